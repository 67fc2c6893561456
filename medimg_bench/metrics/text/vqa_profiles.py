"""VQA scoring profiles that reproduce a harness's public scoring code, answer by answer (written
from reading it and held to it by differential tests on a generated corpus: docs/vlm.md). Each
scorer returns the dict shape of :func:`~medimg_bench.metrics.text.vqa.score_vqa_answer` plus
``split`` — the harness's own closed/open partition (``"closed"``, ``"open"``, ``"mcq"``) — and
``harness``: this answer's share of each figure the harness prints, by the harness's name (NaN
where the answer does not count towards it). :data:`PROFILES` names every profile, its source
and its figures.

``llava_med`` — microsoft/LLaVA-Med ``llava/eval/run_eval.py`` with ``eval_metrics/*`` at tag
v1.0.0 (commit b9a98a7); ``llava_med_initial`` — the same at the initial release (ad758b6):

* both texts lower-cased and normalised by ``normalize_word`` (ViLT's VQA normalisation:
  punctuation, at most 32 periods not before a digit, number words zero…ten and "none" → digits,
  articles, contractions such as "isnt" → "isn't");
* questions split by the dataset's ``answer_type`` (CLOSED / OPEN);
* **closed**: if the substring "yes" or "no" occurs anywhere in the prediction, a hit when the
  reference occurs in it as a substring; otherwise a miss under v1.0.0, while the initial
  release appends nothing — the question is **left out of the closed accuracy**; with neither
  substring, a miss. So "no" inside "not"/"cannot"/"nodule" counts as an answer;
* **open**: token recall (``correct``: the number LLaVA-Med reports for open questions), the
  harness's "exact match score", "f1 score", "precision", BLEU (NLTK, unsmoothed) and "open
  accuracy": the candidate answer (from a list, LLaVA-Med's ``train_open_answers.json``) sharing
  the most words with the prediction equals the reference.

Multiple choice under each profile: ``llava_med_choice`` (``eval_science_qa.py``'s "The answer
is X." rule), ``multimedeval_choice`` (the QA family's BLEU-1 option matching),
``lmms_eval_choice`` (MedEvalKit's ``judge_multi_choice``), ``vlmevalkit_can_infer``
(``can_infer``); none ever draws a random option: docs/vlm.md.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from medimg_bench.metrics.text.vqa_harness_nlg import nltk_sentence_bleu, pltrdy_rouge

__all__ = ["llava_med_normalize", "score_llava_med", "llava_med_choice", "llava_med_open_hit",
           "vlmevalkit_can_infer", "score_vlmevalkit", "score_multimedeval", "multimedeval_choice",
           "lmms_eval_parse_response", "lmms_eval_choice", "score_lmms_eval", "VQAProfile", "PROFILES",
           "LLAVA_MED_VERSIONS", "VLMEVALKIT_VERSIONS"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NAN = float("nan")
_MANUAL = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
           "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_ARTICLES = {"a", "an", "the"}
_PUNCT = [";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@",
          "`", ",", "?", "!"]
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")  # as written in the harness (a lookahead, not behind)
_COMMA_NUM = re.compile(r"(\d)(,)(\d)")
# The contraction forms of the VQA normalisation table; a word equal to one of them with one
# apostrophe left out ("isnt", "couldnt've", "couldn'tve") is rewritten to it. The table's one
# reversed entry ("somebody'd" → "somebodyd") is added below; its entries with upper-case keys
# never match (words are lower-cased first) and are left out.
_CONTRACTION_FORMS = (
    "'ow's'at 'twas ain't aren't can't could've couldn't couldn't've didn't doesn't don't hadn't "
    "hadn't've hasn't haven't he'd he'd've he's how'd how'll how's isn't it'd it'd've it'll ma'am "
    "might've mightn't mightn't've must've mustn't needn't not've o'clock oughtn't shan't she'd've "
    "should've shouldn't shouldn't've somebody'd've somebody'll somebody's someone'd someone'd've "
    "someone'll someone's something'd something'd've something'll that's there'd there'd've "
    "there're there's they'd they'd've they'll they're they've wasn't we'd've we've weren't what'll "
    "what're what's what've when's where'd where's where've who'd who'd've who'll who's who've "
    "why'll why're why's won't would've wouldn't wouldn't've y'all y'all'd've y'all'll you'd "
    "you'd've you'll you're you've").split()
_CONTRACTIONS = {form[:i] + form[i + 1:]: form for form in _CONTRACTION_FORMS
                 for i, c in enumerate(form) if c == "'"}
_CONTRACTIONS["somebody'd"] = "somebodyd"


def llava_med_normalize(text: str) -> str:
    """LLaVA-Med's ``normalize_word`` (ViLT's VQA normalisation; MultiMedEval's ``clean_str`` after
    lower-casing): punctuation, periods, number words, articles, contractions (returns a string)."""
    token = str(text)
    out = token
    for p in _PUNCT:
        if (p + " " in token or " " + p in token) or _COMMA_NUM.search(token) is not None:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    token = _PERIOD.sub("", out, 32)  # the harness passes re.UNICODE (32) as sub's count
    words = [_MANUAL.get(w, w) for w in token.lower().split()]
    words = [_CONTRACTIONS.get(w, w) for w in words if w not in _ARTICLES]
    return " ".join(words).replace(",", "")


def _counts(text: str) -> Counter:
    return Counter(text.lower().strip().split())


def _f1_precision_recall(candidate: str, reference: str) -> tuple[float, float, float]:
    c, r = _counts(llava_med_normalize(candidate)), _counts(llava_med_normalize(reference))
    if not c or not r:
        return 0.0, 0.0, 0.0
    tp = sum(c[w] for w in set(c) | set(r) if w in c and w in r)
    fp = sum(c[w] for w in c if w not in r)
    fn = sum(r[w] for w in r if w not in c)
    if tp == 0:
        return 0.0, 0.0, 0.0
    p, rec = tp / (tp + fp), tp / (tp + fn)
    return 2 * p * rec / (p + rec), p, rec


def _exact(candidate: str, reference: str) -> float:
    c, r = _counts(llava_med_normalize(candidate)), _counts(llava_med_normalize(reference))
    total = sum(c.values())
    return sum(1 for w in r if w in c) / total if total else 0.0


def llava_med_open_hit(prediction: str, reference: str, candidates: Sequence[Any]) -> float:
    """run_eval's "open accuracy" for one answer (1.0 / 0.0): among the ``candidates`` (each
    normalised), the first with the largest share of its distinct words found in the
    prediction's words is the prediction; a hit when it equals the normalised reference."""
    if not candidates:
        raise ValueError("llava_med: the open-accuracy candidate list is empty")
    words = set(_counts(llava_med_normalize(prediction)))
    best, best_sim = "", -1.0
    for cand in candidates:
        norm = llava_med_normalize(str(cand))
        cw = set(_counts(norm))
        sim = sum(1 for w in words if w in cw) / len(cw) if cw else 0.0
        if sim > best_sim:
            best, best_sim = norm, sim
    return float(best == llava_med_normalize(reference))


_SQA_ANSWER = re.compile(r"The answer is ([A-Z]).")


def llava_med_choice(response: str, n_options: int) -> str | None:
    """The option letter LLaVA-Med's ``eval_science_qa.py`` reads (commit ad758b6, unchanged in
    v1.0.0): exactly one match of ``The answer is ([A-Z]).`` (case-sensitive; the ``.`` is any
    character, so the phrase at the very end of the text does not match) naming one of the first
    ``n_options`` of the letters A–E it knows (its ``--options`` default); else None where the
    harness draws a random option."""
    found = _SQA_ANSWER.findall(str(response or ""))
    letter = found[0] if len(found) == 1 else None
    return letter if letter is not None and letter in "ABCDE"[:n_options] else None


#: LLaVA-Med versions by profile name: (commit, whether a closed miss with yes/no is dropped)
LLAVA_MED_VERSIONS = {"llava_med": ("b9a98a7", False), "llava_med_initial": ("ad758b6", True)}
_LLAVA_OPEN_FIGURES = ("exact match score", "f1 score", "precision", "recall", "bleu_score",
                       "bleu_score_1", "bleu_score_2", "bleu_score_3", "open accuracy")
_BLEU_WEIGHTS = {"bleu_score": (0.25, 0.25, 0.25, 0.25), "bleu_score_1": (1, 0, 0, 0),
                 "bleu_score_2": (0, 1, 0, 0), "bleu_score_3": (0, 0, 1, 0)}


def _mcq_out(letter: str | None, answer: str | None, rule: str, figure: str) -> dict[str, Any]:
    out = {"parsed": letter, "correct": _NAN, "unparsed": float(letter is None), "rule": rule,
           "exact": _NAN, "recall": _NAN, "f1": _NAN, "bleu1": _NAN, "split": "mcq", "harness": {}}
    if answer is not None:
        out["correct"] = float(letter is not None and letter == str(answer).strip().upper())
        out["harness"] = {figure: out["correct"]}
    return out


def _llava_closed(pred: str, gt: str, drop: bool) -> tuple[float, str, float]:
    """(correct, rule, unparsed) of run_eval's closed branch."""
    if "yes" in pred or "no" in pred:
        if gt in pred:
            return 1.0, "llava_med_closed_hit", 0.0
        return (_NAN, "llava_med_closed_dropped", 0.0) if drop else (0.0, "llava_med_closed_miss", 0.0)
    return 0.0, "llava_med_closed_no_yes_no", 1.0


def score_llava_med(response: str, *, answer: str | None, answer_type: str,
                    options: list[str] | None = None, version: str = "llava_med",
                    candidates: Sequence[Any] | None = None) -> dict[str, Any]:
    """One answer scored as LLaVA-Med's ``run_eval.py`` scores it at ``version`` (a key of
    :data:`LLAVA_MED_VERSIONS`); ``answer_type`` closed/open is the dataset's CLOSED/OPEN.
    ``candidates``: the list for "open accuracy" (NaN without one). Multiple choice as the
    repository's ``eval_science_qa.py`` does, without its random draw."""
    if version not in LLAVA_MED_VERSIONS:
        raise ValueError(f"llava_med: unknown version {version!r}; expected one of {list(LLAVA_MED_VERSIONS)}")
    if answer_type == "mcq":
        return _mcq_out(llava_med_choice(response, len(options or [])), answer, "llava_med_sqa_answer_is", "Accuracy")
    pred = llava_med_normalize(str(response or "").lower())
    out: dict[str, Any] = {"parsed": pred, "correct": _NAN, "unparsed": 0.0, "rule": "llava_med",
                           "exact": _NAN, "recall": _NAN, "f1": _NAN, "bleu1": _NAN,
                           "split": "closed" if answer_type == "closed" else "open", "harness": {}}
    if answer is None:
        return out
    gt = llava_med_normalize(str(answer).lower())
    if answer_type == "closed":
        correct, rule, unparsed = _llava_closed(pred, gt, LLAVA_MED_VERSIONS[version][1])
        out.update(correct=correct, rule=rule, unparsed=unparsed, harness={"yes/no accuracy": correct})
        return out
    f1, precision, recall = _f1_precision_recall(pred, gt)
    fig = {"exact match score": _exact(pred, gt), "f1 score": f1, "precision": precision, "recall": recall}
    for name, w in _BLEU_WEIGHTS.items():
        fig[name] = nltk_sentence_bleu([gt.lower().split()], pred.lower().split(), w)
    fig["open accuracy"] = llava_med_open_hit(pred, gt, candidates) if candidates else _NAN
    out.update(correct=recall, recall=recall, f1=f1, exact=fig["exact match score"], harness=fig)
    return out


# -- vlmevalkit -------------------------------------------------------------------------------
# open-compass/VLMEvalKit vlmeval/utils/matching_util.py ``can_infer`` = ``can_infer_option`` (the
# answer split on spaces after replacing . ( ) [ ] , : ; ! * # { } by spaces; exactly one option
# letter among the tokens → that letter; a refusal phrase → "Z") and else ``can_infer_text``
# (exactly one option text, lower-cased, a substring of the answer). Two rule changes since
# 18fc37a: c337155 (2025-08) takes the single letter only when it is among the last four tokens
# and gives up on option texts when the answer is longer than twice all options together;
# a67ace5 (2026-06) then reads "(correct) answer is X" (X in A-D, any case) where the tokens
# decided nothing. Where both fail, VLMEvalKit's multiple-choice evaluation (``eval_vanilla``)
# takes "Z" (a miss) under exact matching, or asks an LLM judge and, after three failed replies,
# draws a random letter; this profile never draws: the question is unparsed and wrong.

#: VLMEvalKit versions by profile name: (commit, letter position + text length rules, verbose regex)
VLMEVALKIT_VERSIONS = {"vlmevalkit": ("e8e78f0", True, True), "vlmevalkit_18fc37a": ("18fc37a", False, False)}
_VLMEVAL_REJECT = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)
_VLMEVAL_VERBOSE = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")


def _vlmeval_option(answer: str, choices: dict[str, str], version: str) -> str | None:
    _, positional, verbose = VLMEVALKIT_VERSIONS[version]
    if "Failed to obtain answer via API" in answer:
        return None
    if any(err in answer for err in _VLMEVAL_REJECT):
        return "Z"
    mod = answer
    for c in ".()[],:;!*#{}":
        mod = mod.replace(c, " ")
    splits = [x.strip() for x in mod.split()]
    count = sum(1 for c in choices if c in splits)
    if count == 1:
        ch = next(c for c in choices if c in splits)
        if not positional or splits.index(ch) > len(splits) - 5:
            return ch
    elif count == 0 and "Z" in splits:
        return "Z"
    if verbose:
        m = _VLMEVAL_VERBOSE.search(answer)
        if m and m.group(1).upper() in choices:
            return m.group(1).upper()
    return None


def vlmevalkit_can_infer(answer: str, choices: dict[str, str], *, version: str = "vlmevalkit") -> str | None:
    """The letter VLMEvalKit's ``can_infer`` returns at ``version`` (a key of
    :data:`VLMEVALKIT_VERSIONS`; ``"Z"`` for a refusal), or None where it returns False
    (default, non-verbose mode)."""
    if version not in VLMEVALKIT_VERSIONS:
        raise ValueError(f"vlmevalkit: unknown version {version!r}; expected one of {list(VLMEVALKIT_VERSIONS)}")
    answer = str(answer)
    letter = _vlmeval_option(answer, choices, version)
    if letter is not None:
        return letter
    low = answer.lower()
    if VLMEVALKIT_VERSIONS[version][1] and len(low) > 2 * sum(len(str(v)) for v in choices.values()):
        return None
    cands = [k for k, v in choices.items() if str(v).lower() in low]
    return cands[0] if len(cands) == 1 else None


def score_vlmevalkit(response: str, *, answer: str | None, answer_type: str,
                     options: list[str] | None, version: str = "vlmevalkit") -> dict[str, Any]:
    """A multiple-choice answer scored as VLMEvalKit's ``eval_vanilla`` scores it under exact
    matching (``can_infer``, else "Z"), never a random letter (see above). Closed and open
    questions are not scored by this routine (error)."""
    if answer_type != "mcq":
        raise ValueError("the vlmevalkit profile scores multiple-choice questions only")
    choices = {chr(ord("A") + i): o for i, o in enumerate(options or [])}
    letter = vlmevalkit_can_infer(response or "", choices, version=version)
    out = _mcq_out(letter if letter in choices else None, answer, "vlmevalkit_can_infer", "Overall")
    out["parsed"] = letter
    return out


# -- multimedeval ---------------------------------------------------------------------------------
# corentin-ryr/MultiMedEval multimedeval/task_families.py ``VQA.evaluate`` (commit d9ac283; the
# rule unchanged since 12ab84b) with ``clean_str`` of multimedeval/utils.py (the same
# normalisation as LLaVA-Med's, lower-cased first). Tokens are *sets* of the cleaned words.
# Closed questions are those whose cleaned reference is "yes" or "no" (whatever the dataset's
# answer_type): for "no" the token "not" is added to the reference set, and the question is right
# when the recall of the reference set in the prediction set is >= 0.4. Open questions: the set
# recall, and "open accuracy" = recall >= 0.75. F1, recall and BLEU-1 over all questions.


def _mme_tokens(text: str) -> set[str]:
    return {t for t in llava_med_normalize(str(text).lower()).split() if t}


def _mme_bleu1(pred: str, ref: str) -> float:
    """torchmetrics ``BLEUScore(n_gram=1)`` of one prediction against one reference, in float32 as
    torchmetrics computes it (whitespace tokens, clipped unigram precision, ``exp(log p)``,
    brevity penalty ``exp(1 - r/c)`` unless c > r, 0 when nothing matches): the float32 rounding
    decides MultiMedEval's ties between options."""
    import torch

    p, r = pred.split(), ref.split()
    matches = sum(min(c, Counter(r)[w]) for w, c in Counter(p).items())
    if matches == 0:
        return 0.0
    f32 = torch.float32
    precision = torch.tensor([float(matches)], dtype=f32) / torch.tensor([float(len(p))], dtype=f32)
    mean = torch.exp(torch.sum(torch.tensor([1.0], dtype=f32) * torch.log(precision)))
    c, rl = torch.tensor(float(len(p)), dtype=f32), torch.tensor(float(len(r)), dtype=f32)
    bp = torch.tensor(1.0, dtype=f32) if c > rl else torch.exp(1 - (rl / c))
    return float((bp * mean).item())


def multimedeval_choice(response: str, options: list[str]) -> str | None:
    """The option MultiMedEval's QA family picks (``MedQA.get_predicted_answer`` in qa.py; the
    dynamic QA datasets' rule, with the options listed "A. text", picks the same): the cleaned
    answer's BLEU-1 against each cleaned "letter text", the first best; None ("Invalid answer")
    when the cleaned answer is empty or every score is 0. Cleaning drops the article "a", so
    option A's letter never counts."""
    pred = llava_med_normalize(str(response or "").lower())
    if not pred:
        return None
    scores = [_mme_bleu1(pred, llava_med_normalize(f"{_LETTERS[i]} {o}".lower())) for i, o in enumerate(options)]
    if not scores or max(scores) == 0:
        return None
    return _LETTERS[scores.index(max(scores))]


def score_multimedeval(response: str, *, answer: str | None, answer_type: str,
                       options: list[str] | None = None) -> dict[str, Any]:
    """One answer scored as MultiMedEval's VQA family scores it. ``split`` is "closed" for a
    yes/no reference (its rule), "open" otherwise; ``correct`` is the closed decision
    (recall >= 0.4) or recall >= 0.75; ``recall``, ``f1``, ``bleu1`` and the ``harness``
    figures as it reports them. Multiple choice: its QA family's BLEU-1 option matching."""
    if answer_type == "mcq":
        return _mcq_out(multimedeval_choice(response, list(options or [])), answer, "multimedeval_qa_bleu1", "accuracy")
    clean_pred = llava_med_normalize(str(response or "").lower())
    out: dict[str, Any] = {"parsed": clean_pred, "correct": _NAN, "unparsed": 0.0, "rule": "multimedeval",
                           "exact": _NAN, "recall": _NAN, "f1": _NAN, "bleu1": _NAN, "split": None, "harness": {}}
    if answer is None:
        return out
    clean_gt = llava_med_normalize(str(answer).lower())
    pred, gold = _mme_tokens(response or ""), _mme_tokens(answer)
    inter = len(pred & gold)
    precision = inter / len(pred) if pred else 0.0
    recall = inter / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall + 1e-8)
    bleu = _mme_bleu1(clean_pred, clean_gt)
    out.update(recall=recall, f1=f1, bleu1=bleu)
    fig = {"bleu": bleu, "F1": f1, "recall": recall}
    if clean_gt in ("yes", "no"):
        gold = gold | {"not"} if gold == {"no"} else gold
        closed_recall = len(pred & gold) / len(gold) if gold else 0.0
        out.update(correct=1.0 if closed_recall >= 0.4 else 0.0, rule="multimedeval_closed_recall>=0.4", split="closed")
        fig["closedQuestionsAccuracy"] = out["correct"]
    else:
        out.update(correct=1.0 if recall >= 0.75 else 0.0, rule="multimedeval_open_recall>=0.75", split="open")
        fig.update(openQuestionsRecall=recall, openQuestionsAccuracy=out["correct"])
    out["harness"] = fig
    return out


# -- lmms_eval ------------------------------------------------------------------------------------
# EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/medevalkit (refs/pull/1355, commits 5a58626 and
# 9f7638b; scoring unchanged between them): ``*_process_results`` of vqa_rad/utils.py (path_vqa's
# is the same) and slake/utils.py with eval_utils.py. The response goes through
# ``parse_response`` (\boxed{…}, <answer>…</answer>, else the text after the last of "answer is",
# "answer:", "final answer"… patterns), lower-cased. VQA-RAD / PathVQA: a question is closed when
# its reference is "yes"/"no" (whatever its answer_type) and judged by ``judge_yesno`` — after
# removing new lines and periods, right only if exactly one of the substrings "yes"/"no" occurs
# and the reference is a substring. Otherwise ``judge_open``: exact match of the stripped
# lower-cased texts ("open_em"), token-set F1 (tokens split on spaces, "." a token), BLEU-1/4
# (NLTK, smoothing method1) and ROUGE-1/L (the rouge package). SLAKE splits by answer_type:
# CLOSED with a yes/no reference → judge_yesno, other CLOSED → ``judge_close_end`` (exact match
# after removing new lines and periods), OPEN → judge_open.

_LMMS_PATTERNS = ("**answer**:", "**answer**", "*answer*:", "**answer:**", "answer is", "answer:",
                  "final answer is", "final answer")
#: lmms-eval task whose split rule a variant follows
LMMS_EVAL_VARIANTS = ("vqa_rad", "path_vqa", "slake")
_LMMS_OPEN = ("open_em", "bleu1", "bleu4", "rouge1", "rougel", "f1")


def lmms_eval_parse_response(response: str) -> str:
    """lmms-eval's MedEvalKit ``parse_response`` (see above)."""
    resp = str(response).strip()
    m = re.search(r"\\boxed\{(.+?)\}", resp)
    if m:
        return m.group(1).strip()
    m = re.search(r"<answer>(.*?)</answer>", resp, re.DOTALL)
    if m:
        return m.group(1).strip()
    low = resp.lower()
    for pattern in _LMMS_PATTERNS:
        if pattern in low:
            resp = resp[low.index(pattern) + len(pattern):]
            low = resp.lower()
    return resp.strip().lstrip(":").strip()


def lmms_eval_choice(response: str, options: list[str]) -> tuple[str | None, str]:
    """The option lmms-eval's MedEvalKit ``judge_multi_choice`` settles on and how:
    ``(letter, rule)``. The response is lower-cased; a first paragraph that is a bare letter,
    else the last paragraph's text before its first ".", replaces it; then ``parse_response``,
    new lines removed, the text before the first "." and after the last ":" is compared: a
    letter → that option; an option's text → that option; longer than 300 characters → no
    option; anything else → the option with the highest difflib ``SequenceMatcher`` ratio
    against the whole parsed response (the first on ties — option A when nothing is similar)."""
    from difflib import SequenceMatcher

    resp = str(response or "").lower()
    alphas = [c.lower() for c in _LETTERS[: len(options)]]
    first = resp.split("\n\n")[0]
    if first in alphas:
        resp = first
    else:
        last = resp.split("\n\n")[-1].split(".")[0]
        if last in alphas:
            resp = last
    resp = lmms_eval_parse_response(resp)
    lowered = [o.lower() for o in options]
    resp = resp.strip().lower().replace("\n", "")
    split = resp.split(".")[0].split(":")[-1].strip()
    if len(split) > 300:
        return None, "lmms_eval_too_long"
    if split in alphas:
        return split.upper(), "lmms_eval_letter"
    if split in lowered:
        return _LETTERS[lowered.index(split)], "lmms_eval_option_text"
    best, best_score = 0, 0.0
    for i, choice in enumerate(lowered):
        score = SequenceMatcher(None, choice, resp).ratio()
        if score > best_score:
            best, best_score = i, score
    if not options:
        return None, "lmms_eval_no_options"
    return _LETTERS[best], ("lmms_eval_similarity" if best_score > 0 else "lmms_eval_similarity_none")


def _lmms_mcq(response: str, answer: str | None, options: list[str]) -> dict[str, Any]:
    letter, rule = lmms_eval_choice(response, options)
    out = _mcq_out(letter, answer, rule, "accuracy")
    # no option read, or the similarity fallback with nothing similar (the harness then takes
    # option A): counted as unparsed; its decision still stands, as in the harness
    out["unparsed"] = float(letter is None or rule == "lmms_eval_similarity_none")
    if answer is not None:
        gt = str(answer).strip().upper()
        hit = letter is not None and (letter == gt or (
            rule == "lmms_eval_option_text" and gt in _LETTERS[: len(options)]
            and options[_LETTERS.index(gt)].lower() == options[_LETTERS.index(letter)].lower()))
        out["correct"] = float(hit)
        out["harness"] = {"accuracy": out["correct"]}
    return out


def _lmms_open(resp: str, gt: str) -> dict[str, float]:
    """``judge_open``'s figures (em, BLEU, ROUGE, token-set F1)."""
    def toks(t: str) -> list[str]:
        return t.lower().replace(".", " .").split()

    fig = {"open_em": float(resp.strip().lower() == gt.strip().lower())}
    fig["bleu1"] = nltk_sentence_bleu([toks(gt)], toks(resp), (1.0,), smoothing="method1")
    fig["bleu4"] = nltk_sentence_bleu([toks(gt)], toks(resp), (0.25,) * 4, smoothing="method1")
    rouge = {"rouge1": 0.0, "rougel": 0.0}
    if resp.strip() and gt.strip():
        try:
            rouge = pltrdy_rouge(resp.lower(), gt.lower())
        except ValueError:  # the harness catches the package's errors as zeros
            pass
    fig.update(rouge)
    p_t, g_t = set(toks(resp)), set(toks(gt))
    common = p_t & g_t
    precision = len(common) / len(p_t) if common else 0.0
    recall = len(common) / len(g_t) if common else 0.0
    fig["f1"] = 2 * precision * recall / (precision + recall) if common else 0.0
    fig["_recall"] = recall
    return fig


def score_lmms_eval(response: str, *, answer: str | None, answer_type: str,
                    options: list[str] | None = None, variant: str = "vqa_rad") -> dict[str, Any]:
    """One answer scored as the lmms-eval MedEvalKit task ``variant`` (a name in
    :data:`LMMS_EVAL_VARIANTS`) scores it; multiple choice by its ``judge_multi_choice``."""
    if variant not in LMMS_EVAL_VARIANTS:
        raise ValueError(f"lmms_eval: unknown variant {variant!r}; expected one of {list(LMMS_EVAL_VARIANTS)}")
    if answer_type == "mcq":
        return _lmms_mcq(response, answer, list(options or []))
    resp = lmms_eval_parse_response(response or "").lower().strip()
    out: dict[str, Any] = {"parsed": resp, "correct": _NAN, "unparsed": 0.0, "rule": "lmms_eval",
                           "exact": _NAN, "recall": _NAN, "f1": _NAN, "bleu1": _NAN, "split": None, "harness": {}}
    if answer is None:
        return out
    gt = str(answer).lower().strip()
    closed = answer_type == "closed" if variant == "slake" else gt in ("yes", "no")
    if closed and gt in ("yes", "no"):
        r = resp.replace("\n", "").replace(".", "")
        has_yes, has_no = "yes" in r, "no" in r
        out.update(correct=float((has_yes ^ has_no) and gt in r), unparsed=float(not (has_yes ^ has_no)),
                   rule="lmms_eval_judge_yesno", split="closed")
    elif closed:  # SLAKE's closed questions with other answers ("CT", "left")
        hit = resp.replace("\n", "").replace(".", "").strip().lower() == gt
        out.update(correct=float(hit), rule="lmms_eval_judge_close_end", split="closed")
    else:
        fig = _lmms_open(resp, gt)
        out.update(correct=fig["open_em"], exact=fig["open_em"], recall=fig.pop("_recall"), f1=fig["f1"],
                   rule="lmms_eval_judge_open", split="open", harness=fig)
        return out
    out["harness"] = {"close_accuracy": out["correct"]}
    return out


# -- the profiles ------------------------------------------------------------------------------
@dataclass(frozen=True)
class VQAProfile:
    """A scoring profile: its ``name`` (``scoring=``), the ``implementation`` it reproduces
    (repository, files, commit), the ``figures`` its harness prints (the names in
    ``summary.json["harness"]``), whether an LLM ``judge`` may extend it, and ``score(response,
    *, answer, answer_type, options, **options)``."""

    name: str
    implementation: str
    figures: tuple[str, ...]
    score: Callable[..., dict[str, Any]]
    judge: bool = False
    options: tuple[str, ...] = ()


def _strict(response: str, **kw: Any) -> dict[str, Any]:
    from medimg_bench.metrics.text.vqa import score_vqa_answer

    return score_vqa_answer(response, **kw)


def _llava(version: str) -> Callable[..., dict[str, Any]]:
    def score(response: str, **kw: Any) -> dict[str, Any]:
        return score_llava_med(response, version=version, **kw)

    return score


def _vlmeval(version: str) -> Callable[..., dict[str, Any]]:
    def score(response: str, **kw: Any) -> dict[str, Any]:
        return score_vlmevalkit(response, version=version, **kw)

    return score


_LLAVA_SRC = "microsoft/LLaVA-Med llava/eval/run_eval.py + eval_metrics/ (+ eval_science_qa.py for multiple choice)"
_VLMEVAL_SRC = "open-compass/VLMEvalKit vlmeval/utils/matching_util.py can_infer, dataset/utils/multiple_choice.py eval_vanilla"
PROFILES: dict[str, VQAProfile] = {p.name: p for p in (
    VQAProfile("medimg_bench", "medimg_bench.metrics.text.vqa (ours, strict)", (), _strict, judge=True),
    VQAProfile("llava_med", f"{_LLAVA_SRC} @ b9a98a7 (tag v1.0.0)",
               ("yes/no accuracy", *_LLAVA_OPEN_FIGURES, "Accuracy"), _llava("llava_med"), options=("candidates",)),
    VQAProfile("llava_med_initial", f"{_LLAVA_SRC} @ ad758b6 (initial release)",
               ("yes/no accuracy", *_LLAVA_OPEN_FIGURES, "Accuracy"), _llava("llava_med_initial"),
               options=("candidates",)),
    VQAProfile("multimedeval", "corentin-ryr/MultiMedEval multimedeval/task_families.py VQA.evaluate, "
               "utils.py clean_str, qa.py MedQA.get_predicted_answer @ d9ac283",
               ("closedQuestionsAccuracy", "openQuestionsAccuracy", "openQuestionsRecall", "recall", "F1",
                "bleu", "accuracy"), score_multimedeval),
    VQAProfile("lmms_eval", "EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/medevalkit/{vqa_rad,path_vqa,slake,pmc_vqa}"
               "/utils.py + eval_utils.py @ 9f7638b (refs/pull/1355)",
               ("close_accuracy", "open_em", "bleu1", "bleu4", "rouge1", "rougel", "f1", "accuracy"),
               score_lmms_eval, options=("variant",)),
    VQAProfile("vlmevalkit", f"{_VLMEVAL_SRC} @ e8e78f0", ("Overall",), _vlmeval("vlmevalkit"), judge=True),
    VQAProfile("vlmevalkit_18fc37a", f"{_VLMEVAL_SRC} @ 18fc37a", ("Overall",), _vlmeval("vlmevalkit_18fc37a"),
               judge=True),
)}
