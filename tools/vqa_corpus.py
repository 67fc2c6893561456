"""The generated VQA corpus that the harness fixtures are built on (see vqa_harness_fixtures.py).

Questions and references start from the VQA loaders' test fixtures (tests/datasets/test_vqa.py:
VQA-RAD, SLAKE, PathVQA, PMC-VQA, OmniMedVQA, GMAI-MMBench, MedXpertQA-MM), widened with
references of the same kinds (yes/no in either type, numbers, sides, organs, modalities,
multi-word findings), and crossed with responses of every shape models produce. Deterministic:
the same seed gives the same corpus.

    python tools/vqa_corpus.py --out /tmp/corpus   # writes closed_open.jsonl and mcq.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

# (dataset, question, reference, the dataset's own answer type)
SEED_QUESTIONS = [
    ("vqa_rad", "Are regions of the brain infarcted?", "Yes", "CLOSED"),
    ("vqa_rad", "How many lesions are there?", "2", "OPEN"),
    ("vqa_rad", "Is this normal?", "no", "CLOSED"),
    ("slake", "Which modality is used to take this image?", "CT", "CLOSED"),
    ("slake", "Where is the abnormality?", "Left Lung, Right", "OPEN"),
    ("slake", "这张图片是用什么方式拍摄的?", "CT", "CLOSED"),
    ("pathvqa", "where are liver stem cells?", "in the canals of hering", "OPEN"),
    ("pathvqa", "is there fibrosis?", "yes", "CLOSED"),
    ("pathvqa", "what is present?", "necrosis", "OPEN"),
]
MORE_REFERENCES = [
    ("vqa_rad", "Is there a pneumothorax?", "No", "CLOSED"),
    ("vqa_rad", "Is the heart enlarged?", "yes", "OPEN"),      # VQA-RAD has yes/no answers typed OPEN
    ("vqa_rad", "Is there free air?", "no", "OPEN"),
    ("vqa_rad", "How many kidneys are seen?", "one", "CLOSED"),  # a closed answer that is not yes/no
    ("vqa_rad", "Which side is the lesion on?", "left", "CLOSED"),
    ("vqa_rad", "Which side is the effusion on?", "right side", "CLOSED"),
    ("vqa_rad", "In what plane is this image?", "axial", "CLOSED"),
    ("vqa_rad", "What is the modality?", "MRI", "OPEN"),
    ("vqa_rad", "How many ribs are fractured?", "3", "OPEN"),
    ("vqa_rad", "How many masses?", "two", "OPEN"),
    ("vqa_rad", "How large is the nodule?", "1.5 cm", "OPEN"),
    ("vqa_rad", "What is abnormal?", "pleural effusion", "OPEN"),
    ("vqa_rad", "Where is the mass?", "left lower lobe", "OPEN"),
    ("vqa_rad", "What organ is shown?", "the liver", "OPEN"),
    ("vqa_rad", "What is seen in the lungs?", "none", "OPEN"),
    ("vqa_rad", "Is this an MRI?", "Yes.", "CLOSED"),
    ("slake", "Does the picture contain liver?", "Yes", "CLOSED"),
    ("slake", "Is the lung healthy?", "No", "CLOSED"),
    ("slake", "What modality is used?", "X-Ray", "OPEN"),
    ("slake", "What is the MR weighting?", "T2", "CLOSED"),
    ("slake", "Which organs appear?", "Liver, Spleen", "OPEN"),
    ("slake", "What color is the lung?", "Black", "OPEN"),
    ("slake", "Where is the brain tumor?", "Right Temporal Lobe", "OPEN"),
    ("slake", "How many organs are there?", "4", "OPEN"),
    ("slake", "Is it abnormal?", "no", "OPEN"),
    ("pathvqa", "does this image show cardiomegaly?", "no", "CLOSED"),
    ("pathvqa", "how is the lesion?", "well circumscribed", "OPEN"),
    ("pathvqa", "what does this image show?", "hemorrhage", "OPEN"),
    ("pathvqa", "what is the cause?", "not known", "OPEN"),
    ("pathvqa", "is there no inflammation?", "yes", "CLOSED"),
    ("pathvqa", "how many nuclei?", "10", "OPEN"),
    ("pathvqa", "what is seen?", "notochord remnant", "OPEN"),
]
DISTRACTORS = ["liver", "left", "no", "yes", "kidney", "pleural effusion", "right lung", "CT", "two", "1",
               "edema", "nodule", "normal", "mass", "none"]

# response templates for closed/open questions: {r} the reference, {d} another answer
OPEN_TEMPLATES = [
    "{r}", "{R}", "{Rc}.", "{r}!", "  {r}  ", "**{r}**", "\\boxed{{{r}}}", "<answer>{r}</answer>",
    "The answer is {r}.", "Answer: {r}", "Final answer: {r}", "I think it is {r}.", "{r}, {d}",
    "{d} and {r}", "{d}", "not {r}", "There is no evidence of {r}.", "No evidence of {d}.",
    "Yes", "No", "yes.", "NO.", "Yes, there is.", "No, there is not.", "Nope", "Yeah", "yes and no",
    "Yes. No.", "Possibly yes.", "It is unlikely.", "Maybe", "I cannot determine this from the image.",
    "I'm sorry, but I can't help with that.", "Cannot determine the answer", "", "   ",
    "{long}", "{periods}", "none", "None of the above", "nodule", "cannot", "knowledge", "yesterday",
    "two", "2", "There are two lesions.", "three.", "1.5", "1,000", "是", "否", "oui", "nein", "肝脏",
    "isnt it {r}", "dont know", "cant say", "somebody'd say {r}", "thats yes", "whats {r}",
    "a", "the {r}", "(B)", "B.", "Yes\n\nbecause {d}", "no.\nyes", "{r}s", "pre{r}", "{r}ish",
    "{r}.{r}", "No, {r}", "Yes, {r}", "It is {r}, not {d}.", "answer is: {r}", "{r} (likely)",
    "{r}; {d}; {r}", "The {r} is seen. No {d}.", "{Rc}-sided", "{r}\n", "N/A", "unknown",
]
MCQ_TEMPLATES = [
    "{L}", "({L})", "{L}.", "{L})", "{l}", "Answer: {L}", "answer: {l}", "The answer is {L}.",
    "The answer is {L}", "The correct answer is **{L}**", "**{L}**", "\\boxed{{{L}}}",
    "<answer>{L}</answer>", "{L}. {T}", "({L}) {T}", "{L}: {T}", "{T}", "{t}", "The answer is ({L}) {T}.",
    "Option {M} is incorrect; the answer is {L}", "option {L} is incorrect; the answer is {M}",
    "{L} or {M}", "{L} and {M}", "Both {L} and {M}", "I choose ({L}) because it fits.",
    "A {t} is visible.", "None of the options", "Cannot determine the answer",
    "I'm sorry, but without the image provided I cannot answer.", "", "Z", "{long_letter}",
    "{long_tail}", "Answer: {L}\n\nExplanation: {t} is typical.", "Reasoning first.\n\n{L}",
    "答案是{L}", "选项{L}", "Because of the {u}", "{U}", "{T} or {U}", "not {t}", "The answer is {M}.",
    "{M}. {U}", "The answer is F.", "Final answer: {L}", "final answer is {l}", "{L}\n", "[{L}]",
    "{L}, {T}", "option {L}", "choice {l}", "The correct option is {L}.", "It is {t}.",
    "{t} and {u}", "I think {L}. No wait, The answer is {M}.", "The answer is {L}. The answer is {M}.",
    "B", "b", "A", "a", "E", "{L}{M}", "{T}.", "{periods_letter}", "Answer: ({L})", "({L}) or ({M})",
    "The answer is {L}: {T}", "{l}. {t}", "Option: {L}", "ANSWER: {L}", "The answer is {L}.\n\n{M}",
]
OPTION_SETS = [
    (["MRI", "CT scan", "PET", "US"], "pmc_vqa", "What imaging modality was used?"),
    (["Liver", "Kidney", "Spleen", "Heart"], "pmc_vqa", "Which organ is shown?"),
    (["Normal", "Glaucoma"], "omnimedvqa", "What is the diagnosis?"),
    (["pleural effusion", "pneumothorax", "cardiomegaly", "normal"], "gmai_mmbench", "Which finding?"),
    (["effusion", "pleural effusion", "atelectasis", "edema", "no finding"], "medxpertqa_mm", "Most likely?"),
    (["Yes", "No"], "omnimedvqa", "Is there a lesion?"),
    (["Benign", "Malignant", "Normal"], "omnimedvqa", "Classify the lesion."),
    (["A", "B", "C", "D"], "gmai_mmbench", "Which label?"),
    (["left", "right", "both", "neither", "cannot tell", "bilateral"], "gmai_mmbench", "Which side?"),
    (["T1", "T2", "FLAIR", "DWI", "ADC", "SWI", "PD"], "gmai_mmbench", "Which sequence?"),
]


def _closed_open(rng: random.Random) -> list[dict]:
    items = []
    questions = SEED_QUESTIONS + MORE_REFERENCES
    for qi, (ds, question, ref, atype) in enumerate(questions):
        r = ref.lower()
        for ti, tpl in enumerate(OPEN_TEMPLATES):
            d = rng.choice([x for x in DISTRACTORS if x != r])
            resp = tpl.format(
                r=r, R=ref.upper(), Rc=ref.capitalize(), d=d,
                long=(f"{r} " * 80).strip() + " " + d * 3,
                periods="The image. " * 40 + ref + ".",
            )
            items.append({"id": f"co{qi:03d}_{ti:03d}", "dataset": ds, "question": question, "answer": ref,
                          "answer_type_original": atype, "response": resp})
    return items


def _mcq(rng: random.Random) -> list[dict]:
    items = []
    for si, (options, ds, question) in enumerate(OPTION_SETS):
        letters = [chr(ord("A") + i) for i in range(len(options))]
        for rep in range(5):  # each template five times per option set, with other letters
            for ti, tpl in enumerate(MCQ_TEMPLATES):
                gi = rng.randrange(len(options))
                oi = rng.choice([i for i in range(len(options)) if i != gi])
                li = gi if rng.random() < 0.6 else oi  # the response names the right option 60 % of the time
                mi = rng.choice([i for i in range(len(options)) if i != li])
                L, M = letters[li], letters[mi]
                resp = tpl.format(
                    L=L, l=L.lower(), M=M, T=options[li], t=options[li].lower(), U=options[mi],
                    u=options[mi].lower(),
                    long_letter=f"{L}. " + "The image shows several findings that are typical. " * 8,
                    long_tail="The image shows several findings. " * 12 + f"The answer is {L}.",
                    periods_letter="a. b. c. " * 12 + L,
                )
                items.append({"id": f"mc{si:02d}_{rep}_{ti:03d}", "dataset": ds, "question": question,
                              "options": options, "answer": letters[gi], "response": resp})
    return items


def build_corpus(seed: int = 0) -> tuple[list[dict], list[dict]]:
    """(closed/open items, multiple-choice items), deterministic for a seed."""
    rng = random.Random(seed)
    return _closed_open(rng), _mcq(rng)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    co, mcq = build_corpus(a.seed)
    for name, rows in (("closed_open", co), ("mcq", mcq)):
        with open(a.out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(name, len(rows))


if __name__ == "__main__":
    main()
