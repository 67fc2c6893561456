"""VQA scoring profiles that reproduce a harness's public scoring code (written from reading
it; see docs/vlm.md for the file and commit read). Each returns the same dict shape as
:func:`~medimg_bench.metrics.text.vqa.score_vqa_answer`.

``llava_med`` — microsoft/LLaVA-Med ``llava/eval/run_eval.py`` with
``eval_metrics/evaluate_metrics.py`` and ``eval_metrics/glossary.py`` (commit ad758b6):

* both texts lower-cased and normalised by ``normalize_word`` (ViLT's VQA normalisation:
  punctuation, periods not before a digit, number words zero…ten and "none" → digits, articles);
* **closed** questions: if the substring "yes" or "no" occurs anywhere in the prediction, the
  question is a hit when the reference occurs in it as a substring, and otherwise it is **left
  out of the closed accuracy altogether** (the harness appends nothing); with neither
  substring, it is a miss. So "no" inside "not"/"cannot"/"nodule" counts as an answer;
* **open** questions: the harness's token *recall* (the number LLaVA-Med reports for open
  questions), also its "exact match" (reference words found / prediction words) and F1.

Known difference: the contraction table of ``glossary.py`` is not reproduced (it only rewrites
forms such as "isnt" → "isn't", rare in medical answers).

Multiple choice under each profile: ``llava_med_choice`` (``eval_science_qa.py``'s "The answer
is X." rule), ``multimedeval_choice`` (the QA family's BLEU-1 option matching),
``lmms_eval_choice`` (MedEvalKit's ``judge_multi_choice``), ``vlmevalkit_can_infer``
(``can_infer``); none ever draws a random option: docs/vlm.md.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

__all__ = ["llava_med_normalize", "score_llava_med", "llava_med_choice", "vlmevalkit_can_infer", "score_vlmevalkit",
           "score_multimedeval", "multimedeval_choice", "lmms_eval_parse_response", "lmms_eval_choice",
           "score_lmms_eval"]

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_MANUAL = {"none": "0", "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
           "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_ARTICLES = {"a", "an", "the"}
_PUNCT = [";", "/", "[", "]", '"', "{", "}", "(", ")", "=", "+", "\\", "_", "-", ">", "<", "@",
          "`", ",", "?", "!"]
_PERIOD = re.compile(r"(?!<=\d)(\.)(?!\d)")  # as written in the harness (a lookahead, not behind)
_COMMA_NUM = re.compile(r"(\d)(,)(\d)")


def llava_med_normalize(text: str) -> str:
    """LLaVA-Med's ``normalize_word`` (ViLT's), without the contraction table."""
    token = str(text)
    out = token
    for p in _PUNCT:
        if (p + " " in token or " " + p in token) or _COMMA_NUM.search(token) is not None:
            out = out.replace(p, "")
        else:
            out = out.replace(p, " ")
    token = _PERIOD.sub("", out)
    words = [_MANUAL.get(w, w) for w in token.lower().split()]
    return " ".join(w for w in words if w not in _ARTICLES).replace(",", "")


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


_SQA_ANSWER = re.compile(r"The answer is ([A-Z]).")


def llava_med_choice(response: str, n_options: int) -> str | None:
    """The option letter LLaVA-Med's ``eval_science_qa.py`` reads (commit ad758b6): exactly one
    match of ``The answer is ([A-Z]).`` (case-sensitive; the ``.`` is any character, so the
    phrase at the very end of the text does not match) naming one of the first ``n_options``
    letters; else None where the harness draws a random option."""
    found = _SQA_ANSWER.findall(str(response or ""))
    letter = found[0] if len(found) == 1 else None
    return letter if letter is not None and letter in _LETTERS[:n_options] else None


def score_llava_med(response: str, *, answer: str | None, answer_type: str,
                    options: list[str] | None = None) -> dict[str, Any]:
    """One answer scored as LLaVA-Med's ``run_eval.py`` scores it (``answer_type`` closed/open);
    multiple choice as the repository's ``eval_science_qa.py`` does, without its random draw."""
    nan = float("nan")
    if answer_type == "mcq":
        letter = llava_med_choice(response, len(options or []))
        out = {"parsed": letter, "correct": nan, "unparsed": float(letter is None),
               "rule": "llava_med_sqa_answer_is", "exact": nan, "recall": nan, "f1": nan, "bleu1": nan}
        if answer is not None:
            out["correct"] = float(letter is not None and letter == str(answer).strip().upper())
        return out
    pred = llava_med_normalize(str(response or "").lower())
    gt = llava_med_normalize(str(answer).lower()) if answer is not None else None
    out: dict[str, Any] = {"parsed": pred, "correct": nan, "unparsed": 0.0, "rule": "llava_med",
                           "exact": nan, "recall": nan, "f1": nan, "bleu1": nan}
    if gt is None:
        return out
    if answer_type == "closed":
        if "yes" in pred or "no" in pred:
            out["correct"] = 1.0 if gt in pred else nan  # a miss here is dropped by the harness
            out["rule"] = "llava_med_closed_hit" if gt in pred else "llava_med_closed_dropped"
        else:
            out["correct"] = 0.0
            out["unparsed"] = 1.0
        return out
    f1, _, recall = _f1_precision_recall(pred, gt)
    out.update(correct=recall, recall=recall, f1=f1, exact=_exact(pred, gt))
    return out


# -- vlmevalkit -------------------------------------------------------------------------------
# open-compass/VLMEvalKit vlmeval/utils/matching_util.py (commit 18fc37a): ``can_infer`` =
# ``can_infer_option`` (the answer split on spaces after replacing . ( ) [ ] , : ; ! * # { } by
# spaces; exactly one option letter among the tokens → that letter; a refusal phrase → "Z") and
# else ``can_infer_text`` (exactly one option text, lower-cased, a substring of the answer).
# Where both fail, VLMEvalKit's multiple-choice evaluation asks an LLM judge or, without one,
# draws a random letter; this profile never draws: the question is unparsed and wrong.

_VLMEVAL_REJECT = (
    "Sorry, I can't help with images of people yet.",
    "I can't process this file.",
    "I'm sorry, but without the image provided",
    "Cannot determine the answer",
)


def vlmevalkit_can_infer(answer: str, choices: dict[str, str]) -> str | None:
    """The letter VLMEvalKit's ``can_infer`` returns (``"Z"`` for a refusal), or None where it
    returns False (default, non-verbose mode)."""
    answer = str(answer)
    if "Failed to obtain answer via API" in answer:
        return None
    for err in _VLMEVAL_REJECT:
        if err in answer:
            return "Z"
    mod = answer
    for c in ".()[],:;!*#{}":
        mod = mod.replace(c, " ")
    splits = [x.strip() for x in mod.split()]
    count = sum(1 for c in choices if c in splits)
    if count == 1:
        for ch in choices:
            if ch in splits:
                return ch
    elif count == 0 and sum(1 for c in ("Z", "") if c in splits) == 1:
        return "Z"
    low = answer.lower()
    cands = [k for k, v in choices.items() if str(v).lower() in low]
    return cands[0] if len(cands) == 1 else None


def score_vlmevalkit(response: str, *, answer: str | None, answer_type: str,
                     options: list[str] | None) -> dict[str, Any]:
    """A multiple-choice answer scored as VLMEvalKit's ``can_infer`` parses it, with no random
    fallback (see above). Closed and open questions are not scored by this routine (error)."""
    nan = float("nan")
    if answer_type != "mcq":
        raise ValueError("the vlmevalkit profile scores multiple-choice questions only")
    choices = {chr(ord("A") + i): o for i, o in enumerate(options or [])}
    letter = vlmevalkit_can_infer(response or "", choices)
    parsed = letter if letter in choices else None
    out: dict[str, Any] = {"parsed": letter, "correct": nan, "unparsed": float(parsed is None),
                           "rule": "vlmevalkit_can_infer", "exact": nan, "recall": nan, "f1": nan,
                           "bleu1": nan}
    if answer is not None:
        out["correct"] = float(parsed is not None and parsed == str(answer).strip().upper())
    return out


# -- multimedeval ---------------------------------------------------------------------------------
# corentin-ryr/MultiMedEval multimedeval/task_families.py ``VQA.evaluate`` (commit 12ab84b) with
# ``clean_str`` of multimedeval/utils.py (commit e06fe64; the same ViLT normalisation, lower-cased
# first). Tokens are *sets* of the cleaned words. Closed questions are those whose cleaned
# reference is "yes" or "no": for "no" the token "not" is added to the reference set, and the
# question is right when the recall of the reference set in the prediction set is >= 0.4. Open
# questions: the set recall, and "open accuracy" = recall >= 0.75.


def _mme_tokens(text: str) -> set[str]:
    return {t for t in llava_med_normalize(str(text).lower()).split() if t}


def _mme_bleu1(pred: str, ref: str) -> float:
    """torchmetrics ``BLEUScore(n_gram=1)`` of one prediction against one reference (whitespace
    tokens, clipped unigram precision, brevity penalty ``exp(1 - r/c)`` unless c > r, 0 when
    nothing matches)."""
    p, r = pred.split(), ref.split()
    if not p or not r:
        return 0.0
    rc = Counter(r)
    matches = sum(min(c, rc[w]) for w, c in Counter(p).items())
    if matches == 0:
        return 0.0
    bp = 1.0 if len(p) > len(r) else math.exp(1 - len(r) / len(p))
    return bp * matches / len(p)


def multimedeval_choice(response: str, options: list[str]) -> str | None:
    """The option MultiMedEval's QA family picks (``get_predicted_answer`` of the dynamic QA
    datasets and MedQA / MedMCQA / MMLU): the cleaned answer's BLEU-1 against each cleaned
    option as listed in the prompt (``"A. text"``), the first best; None ("Invalid answer")
    when the cleaned answer is empty or every score is 0."""
    pred = llava_med_normalize(str(response or "").lower())
    if not pred:
        return None
    scores = [_mme_bleu1(pred, llava_med_normalize(f"{_LETTERS[i]}. {o}".lower())) for i, o in enumerate(options)]
    if not scores or max(scores) == 0:
        return None
    return _LETTERS[scores.index(max(scores))]


def score_multimedeval(response: str, *, answer: str | None, answer_type: str,
                       options: list[str] | None = None) -> dict[str, Any]:
    """One answer scored as MultiMedEval's VQA family scores it. ``correct`` is the closed
    decision (recall >= 0.4) for yes/no references and recall >= 0.75 for the others; ``recall``,
    ``f1`` (precision/recall of the token sets) and ``bleu1`` as reported by it. Multiple
    choice: its QA family's BLEU-1 option matching (:func:`multimedeval_choice`)."""
    nan = float("nan")
    if answer_type == "mcq":
        letter = multimedeval_choice(response, list(options or []))
        out = {"parsed": letter, "correct": nan, "unparsed": float(letter is None),
               "rule": "multimedeval_qa_bleu1", "exact": nan, "recall": nan, "f1": nan, "bleu1": nan}
        if answer is not None:
            out["correct"] = float(letter is not None and letter == str(answer).strip().upper())
        return out
    out: dict[str, Any] = {"parsed": llava_med_normalize(str(response or "").lower()), "correct": nan,
                           "unparsed": 0.0, "rule": "multimedeval", "exact": nan, "recall": nan,
                           "f1": nan, "bleu1": nan}
    if answer is None:
        return out
    pred, gold = _mme_tokens(response or ""), _mme_tokens(answer)
    inter = len(pred & gold)
    precision = inter / len(pred) if pred else 0.0
    recall = inter / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall + 1e-8)
    out.update(recall=recall, f1=f1)
    if llava_med_normalize(str(answer).lower()) in ("yes", "no"):
        if gold == {"no"}:
            gold = gold | {"not"}
        closed_recall = len(pred & gold) / len(gold) if gold else 0.0
        out["correct"] = 1.0 if closed_recall >= 0.4 else 0.0
        out["rule"] = "multimedeval_closed_recall>=0.4"
    else:
        out["correct"] = 1.0 if recall >= 0.75 else 0.0
        out["rule"] = "multimedeval_open_recall>=0.75"
    return out


# -- lmms_eval ------------------------------------------------------------------------------------
# EvolvingLMMs-Lab/lmms-eval lmms_eval/tasks/medevalkit/vqa_rad/utils.py (commit 5a58626)
# ``vqa_rad_process_results`` with lmms_eval/tasks/medevalkit/eval_utils.py (commit 9f7638b):
# the response goes through ``parse_response`` (\boxed{…}, <answer>…</answer>, else the text after
# the last of "answer is", "answer:", "final answer"… patterns), lower-cased. A question is closed
# when its reference is "yes"/"no" (whatever its answer_type): ``judge_yesno`` — after removing
# new lines and periods, right only if exactly one of the substrings "yes"/"no" occurs and the
# reference is a substring. Otherwise ``judge_open``: exact match of the stripped lower-cased
# texts ("open_em"), plus token-set precision/recall/F1 (tokens split on spaces, "." as a token).

_LMMS_PATTERNS = ("**answer**:", "**answer**", "*answer*:", "**answer:**", "answer is", "answer:",
                  "final answer is", "final answer")


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
    """The option lmms-eval's MedEvalKit ``judge_multi_choice`` settles on (PMC-VQA task; see
    docs/vlm.md) and how: ``(letter, rule)``. The response is lower-cased; a first paragraph
    that is a bare letter, else the last paragraph's text before its first ".", replaces it;
    then ``parse_response``, new lines removed, the text before the first "." and after the last
    ":" is compared: a letter → that option; an option's text → that option; longer than 300
    characters → no option; anything else → the option with the highest difflib
    ``SequenceMatcher`` ratio against the whole parsed response (the first on ties — option A
    when nothing is similar at all). The answer letter is matched separately (it is a letter)."""
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


def score_lmms_eval(response: str, *, answer: str | None, answer_type: str,
                    options: list[str] | None = None) -> dict[str, Any]:
    """One VQA-RAD-style answer scored as lmms-eval's MedEvalKit task scores it; multiple choice
    by its ``judge_multi_choice`` (:func:`lmms_eval_choice`)."""
    nan = float("nan")
    if answer_type == "mcq":
        opts = list(options or [])
        letter, rule = lmms_eval_choice(response, opts)
        # no option read, or the similarity fallback with nothing similar (the harness then
        # takes option A): counted as unparsed; its decision still stands, as in the harness
        out = {"parsed": letter, "correct": nan,
               "unparsed": float(letter is None or rule == "lmms_eval_similarity_none"),
               "rule": rule, "exact": nan, "recall": nan, "f1": nan, "bleu1": nan}
        if answer is not None:
            gt = str(answer).strip().upper()
            hit = letter is not None and (letter == gt or (
                rule == "lmms_eval_option_text" and gt in _LETTERS[: len(opts)]
                and opts[_LETTERS.index(gt)].lower() == opts[_LETTERS.index(letter)].lower()))
            out["correct"] = float(hit)
        return out
    resp = lmms_eval_parse_response(response or "").lower().strip()
    out: dict[str, Any] = {"parsed": resp, "correct": nan, "unparsed": 0.0, "rule": "lmms_eval",
                           "exact": nan, "recall": nan, "f1": nan, "bleu1": nan}
    if answer is None:
        return out
    gt = str(answer).lower().strip()
    if gt in ("yes", "no"):
        r = resp.replace("\n", "").replace(".", "")
        has_yes, has_no = "yes" in r, "no" in r
        out["correct"] = float((has_yes ^ has_no) and gt in r)
        out["unparsed"] = float(not (has_yes ^ has_no))
        out["rule"] = "lmms_eval_judge_yesno"
        return out

    def toks(t: str) -> set[str]:
        return set(t.lower().replace(".", " .").split())

    em = float(resp.strip().lower() == gt)
    p_t, g_t = toks(resp), toks(gt)
    common = p_t & g_t
    precision = len(common) / len(p_t) if common else 0.0
    recall = len(common) / len(g_t) if common else 0.0
    f1 = 2 * precision * recall / (precision + recall) if common else 0.0
    out.update(correct=em, exact=em, recall=recall, f1=f1, rule="lmms_eval_judge_open")
    return out
