"""VQA answer scoring, strict by default: answer extraction by a documented cascade and never
a random fallback (what cannot be parsed is wrong and counted in ``unparsed_rate``).

Normalisation (:func:`normalize_answer`): lower case, punctuation removed, articles ("a", "an",
"the") dropped, number words zero…twenty written as digits, whitespace collapsed.

Extraction cascade for multiple choice (:func:`extract_choice`), first rule that matches wins:

1. the whole answer is a letter, optionally bracketed or followed by ``.``/``:``/``)``: "B", "(B)", "B.";
2. an explicit answer phrase: "Answer: B", "answer is (B)", "the correct option is B", "option B";
   a phrase negated right after it ("option B is incorrect; the answer is C" → C) does not count,
   "answer …" wins over "option"/"choice", and two different letters decide nothing;
3. the answer starts with a letter marker: "B. Pleural effusion", "(B) effusion", "B) …";
4. exactly one bracketed valid letter anywhere: "… I choose (C) because …";
5. the text of exactly one option appears in the answer (whole words, normalised); when several
   do, the longest wins only if it contains the others ("pleural effusion" over "effusion").

A letter must be one of the options' letters; a letter inside a word ("Because", "AI") never
counts. Closed yes/no questions (:func:`extract_yes_no`): the first word, or the only yes/no
word present as a whole word ("no" inside "not" or "nodule" does not count); both → unparsed.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = [
    "normalize_answer",
    "extract_choice",
    "extract_yes_no",
    "token_recall",
    "token_f1",
    "bleu1",
    "score_vqa_answer",
    "rotate_options",
]

_NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_ARTICLES = {"a", "an", "the"}
_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
YES_WORDS = ("yes", "yeah", "yep", "true", "correct", "present", "positive")
NO_WORDS = ("no", "nope", "false", "incorrect", "absent", "negative")


def normalize_answer(text: str) -> str:
    """The answer as compared: see the module docstring (returns a string)."""
    words = _PUNCT.sub(" ", str(text).lower()).split()
    return " ".join(_NUMBERS.get(w, w) for w in words if w not in _ARTICLES)


def _letters(options: Sequence[str]) -> list[str]:
    return [chr(ord("A") + i) for i in range(len(options))]


_PHRASE = r"(?i:(answer|option|choice))(?:\s+is)?\s*[:：]?\s*\(?([{valid}])\)?(?![A-Za-z])"
# what after "option B" says it is not the answer: "option B is incorrect", "choice C is wrong"
_NEGATED = re.compile(r"\s*(?:is|was|seems|would\s+be)?\s*(?:not\b|incorrect|wrong|false|unlikely|ruled\s+out|excluded)",
                      re.IGNORECASE)


def _answer_phrase(text: str, valid: str) -> str | None:
    """The letter an answer phrase names: phrases negated right after ("option B is incorrect")
    are dropped; an "answer …" phrase wins over "option"/"choice" ones; two different letters
    among the phrases of the winning kind decide nothing (None)."""
    found = [(m.group(1).lower(), m.group(2)) for m in re.finditer(_PHRASE.format(valid=valid), text)
             if not _NEGATED.match(text, m.end())]
    answers = {letter for kind, letter in found if kind == "answer"}
    letters = answers or {letter for _, letter in found}
    return letters.pop() if len(letters) == 1 else None


def extract_choice(response: str, options: Sequence[str]) -> tuple[str | None, str]:
    """(option letter or None, the rule that matched: ``letter``, ``answer_phrase``, ``leading``,
    ``bracketed``, ``option_text`` or ``unparsed``)."""
    text = (response or "").strip()
    if not text or not options:
        return None, "unparsed"
    valid = "".join(_letters(options))
    m = re.fullmatch(rf"\(?\s*([{valid}])\s*\)?[.:)]?", text, flags=re.IGNORECASE)
    if m and (m.group(1).isupper() or len(text) <= 3):
        return m.group(1).upper(), "letter"
    phrase = _answer_phrase(text, valid)
    if phrase:
        return phrase, "answer_phrase"
    m = re.match(rf"\(?([{valid}])[\).:]\s", text + " ")
    if m:
        return m.group(1), "leading"
    bracketed = set(re.findall(rf"\(([{valid}])\)", text))
    if len(bracketed) == 1:
        return bracketed.pop(), "bracketed"
    norm = f" {normalize_answer(text)} "
    hits = [(i, normalize_answer(o)) for i, o in enumerate(options)
            if normalize_answer(o) and f" {normalize_answer(o)} " in norm]
    if len(hits) == 1:
        return _letters(options)[hits[0][0]], "option_text"
    if hits:
        longest = max(hits, key=lambda h: len(h[1]))
        if all(h[1] in longest[1] for h in hits):
            return _letters(options)[longest[0]], "option_text"
    return None, "unparsed"


def extract_yes_no(response: str) -> str | None:
    """``"yes"``, ``"no"`` or None (unparsed) for a closed yes/no question."""
    norm = normalize_answer(response)
    for phrase in ("not present", "not seen"):  # before the single words ("present" is a yes)
        norm = re.sub(rf"\b{phrase}\b", "no", norm)
    if not norm:
        return None
    first = norm.split()[0]
    if first in YES_WORDS:
        return "yes"
    if first in NO_WORDS:
        return "no"
    padded = f" {norm} "
    has_yes = any(f" {w} " in padded for w in YES_WORDS)
    has_no = any(f" {w} " in padded for w in NO_WORDS)
    if has_yes != has_no:
        return "yes" if has_yes else "no"
    return None


def token_recall(prediction: str, answer: str) -> float:
    """Fraction of the answer's normalised tokens found in the prediction (with multiplicity)."""
    a = normalize_answer(answer).split()
    if not a:
        return float("nan")
    p = Counter(normalize_answer(prediction).split())
    return sum(min(c, p[t]) for t, c in Counter(a).items()) / len(a)


def token_f1(prediction: str, answer: str) -> float:
    """Token-level F1 of normalised prediction vs answer (SQuAD style)."""
    p, a = normalize_answer(prediction).split(), normalize_answer(answer).split()
    if not p or not a:
        return float("nan") if not a else 0.0
    common = sum((Counter(p) & Counter(a)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(a)
    return 2 * prec * rec / (prec + rec)


def bleu1(prediction: str, answer: str) -> float:
    """Sentence BLEU-1 of normalised tokens (pycocoevalcap's per-sentence rule)."""
    from medimg_bench.metrics.text.nlg import bleu_scores

    a = normalize_answer(answer)
    if not a:
        return float("nan")
    return float(bleu_scores([normalize_answer(prediction)], [[a]], n=1)[1][0, 0])


def rotate_options(options: Sequence[str], answer: str, shift: int) -> tuple[list[str], str]:
    """Options rotated by ``shift`` and the answer letter remapped (CircularEval)."""
    n = len(options)
    opts = [options[(i + shift) % n] for i in range(n)]
    old = ord(answer) - ord("A")
    return opts, chr(ord("A") + (old - shift) % n)


def score_vqa_answer(
    response: str, *, answer: str | None, answer_type: str, options: Sequence[str] | None = None
) -> dict[str, Any]:
    """Score one answer under the strict ``medimg_bench`` rule. Returns ``parsed`` (letter,
    yes/no or normalised text), ``correct`` (1.0 / 0.0; NaN when the answer is withheld),
    ``unparsed`` (1.0 / 0.0), ``rule``, ``split`` (the question's own type: this profile splits
    closed/open by the dataset's ``answer_type``), ``harness`` (empty: no harness figures) and,
    for open questions, ``exact``, ``recall``, ``f1``, ``bleu1``."""
    nan = float("nan")
    out: dict[str, Any] = {"parsed": None, "correct": nan, "unparsed": 0.0, "rule": "",
                           "exact": nan, "recall": nan, "f1": nan, "bleu1": nan, "split": answer_type,
                           "harness": {}}
    if answer_type == "mcq":
        letter, rule = extract_choice(response, options or [])
        out.update(parsed=letter, rule=rule, unparsed=float(letter is None))
        if answer is not None:
            out["correct"] = float(letter is not None and letter == str(answer).strip().upper())
        return out
    gt = normalize_answer(answer) if answer is not None else None
    if answer_type == "closed" and (gt in ("yes", "no") or gt is None):
        yn = extract_yes_no(response)
        out.update(parsed=yn, rule="yes_no", unparsed=float(yn is None))
        if gt is not None:
            out["correct"] = float(yn is not None and yn == gt)
        return out
    # open questions, and closed ones whose answer is not yes/no (VQA-RAD "one", "left")
    pred = normalize_answer(response)
    out.update(parsed=pred, rule="exact", unparsed=float(not pred))
    if gt is not None:
        exact = float(bool(pred) and pred == gt)
        out.update(correct=exact, exact=exact, recall=token_recall(response, answer),
                   f1=token_f1(response, answer), bleu1=bleu1(response, answer))
    return out
