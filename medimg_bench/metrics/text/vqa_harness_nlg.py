"""The text scores VQA harnesses print, written to give the same numbers as the libraries they
call (checked against those libraries' outputs on the generated corpus; see docs/vlm.md):

* :func:`nltk_sentence_bleu` — NLTK's ``sentence_bleu`` (3.10): clipped n-gram precisions of one
  hypothesis against references, brevity penalty against the closest reference length, 0 when
  no unigram matches; zero precisions either floor to the smallest float (no smoothing, the
  NLTK default: LLaVA-Med ``run_eval.py``) or get ``epsilon`` = 0.1 added to their numerator
  (``SmoothingFunction().method1``: lmms-eval's MedEvalKit tasks). Zero weights drop out.
* :func:`pltrdy_rouge` — the ``rouge`` package's (pltrdy, 1.0) ``Rouge().get_scores`` F-scores
  "rouge-1" and "rouge-l": sentences split on ".", words on single spaces, n-grams as *sets*;
  ROUGE-L is its summary-level union-LCS over those sentences with its backtrace tie rule.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Sequence

__all__ = ["nltk_sentence_bleu", "pltrdy_rouge"]


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def nltk_sentence_bleu(references: Sequence[Sequence[str]], hypothesis: Sequence[str],
                       weights: Sequence[float] = (0.25, 0.25, 0.25, 0.25), *,
                       smoothing: str = "none", epsilon: float = 0.1) -> float:
    """Sentence BLEU in [0, 1] as NLTK computes it (``smoothing``: ``"none"`` or ``"method1"``)."""
    num, den = [], []
    for n in range(1, len(weights) + 1):
        counts = _ngrams(hypothesis, n)
        best: Counter = Counter()
        for ref in references:
            for g, c in _ngrams(ref, n).items():
                best[g] = max(best[g], c)
        num.append(sum(min(c, best[g]) for g, c in counts.items()))
        den.append(max(1, sum(counts.values())))
    if num[0] == 0:
        return 0.0
    hyp_len = len(hypothesis)
    ref_len = min((len(r) for r in references), key=lambda r: (abs(r - hyp_len), r))
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    if smoothing == "method1":
        p = [(k + epsilon) / d if k == 0 else k / d for k, d in zip(num, den)]
    elif smoothing == "none":
        p = [k / d if k else sys.float_info.min for k, d in zip(num, den)]
    else:
        raise ValueError(f"unknown smoothing {smoothing!r}; expected 'none' or 'method1'")
    return bp * math.exp(math.fsum(w * math.log(x) for w, x in zip(weights, p) if x > 0))


def _sentences(text: str) -> list[str]:
    return [" ".join(s.split()) for s in text.split(".") if len(s) > 0]


def _words(sentences: Sequence[str]) -> list[str]:
    return [w for s in sentences for w in s.split(" ")]


def _lcs_words(x: Sequence[str], y: Sequence[str]) -> set[str]:
    """Words of the longest common subsequence the package's backtrace picks (on ties it moves
    along ``y``)."""
    n, m = len(x), len(y)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if x[i - 1] == y[j - 1] else max(table[i - 1][j], table[i][j - 1])
    out, i, j = set(), n, m
    while i and j:
        if x[i - 1] == y[j - 1]:
            out.add(x[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return out


def _f(p: float, r: float) -> float:
    return 2.0 * ((p * r) / (p + r + 1e-8))


def pltrdy_rouge(hypothesis: str, reference: str) -> dict[str, float]:
    """``{"rouge1": F, "rougel": F}`` of one pair as the ``rouge`` package scores it; raises
    ``ValueError`` where it does (a side with no sentence)."""
    hyp, ref = _sentences(hypothesis), _sentences(reference)
    if not hyp or not ref:
        raise ValueError("Hypothesis is empty." if not hyp else "Reference is empty.")
    hw, rw = _words(hyp), _words(ref)
    h1, r1 = {(w,) for w in hw}, {(w,) for w in rw}
    overlap = len(h1 & r1)
    rouge1 = _f(overlap / len(h1) if h1 else 0.0, overlap / len(r1) if r1 else 0.0)
    union: set[str] = set()
    for ref_s in ref:
        for hyp_s in hyp:
            union |= _lcs_words(ref_s.split(" "), hyp_s.split(" "))
    llcs = len(union)
    return {"rouge1": rouge1, "rougel": _f(llcs / len(set(hw)), llcs / len(set(rw)))}
