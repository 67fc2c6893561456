"""Report-generation text metrics: BLEU-1..4, ROUGE-L, CIDEr-D (pure Python, equal to
pycocoevalcap on the same tokenised inputs) and METEOR (pycocoevalcap's Java jar).

Inputs of the scorers are whitespace-tokenised strings; :func:`report_text_scores` tokenises raw
text first with a named tokenizer (default ``ptb``: pycocoevalcap's own PTBTokenizer, see
:mod:`medimg_bench.metrics.text.tokenizers`). :func:`tokenize` is the ``simple`` tokenizer (lower
case, punctuation dropped). Conventions kept from pycocoevalcap on purpose, so numbers match papers:

* BLEU: corpus-level brevity penalty with the *closest* reference length (ties → the shorter);
  per-report values multiply the n-gram precisions cumulatively with a per-report penalty,
  smoothed with 1e-15 / 1e-9 exactly as ``bleu_scorer.py`` does.
* ROUGE-L: F-measure with beta = 1.2 from the best precision and best recall over references;
  corpus value = mean over reports.
* CIDEr-D: tf-idf over 1..4-grams with document frequencies from the references of the corpus
  scored together, clipped hypothesis weights, Gaussian length penalty (sigma = 6) on the
  *bigram* count (pycocoevalcap counts length that way), × 10, averaged over references.
"""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

__all__ = [
    "tokenize",
    "bleu_scores",
    "rouge_l_scores",
    "cider_d_scores",
    "meteor_scores",
    "report_text_scores",
]

_PUNCT = re.compile(r"[^\w\s]|_")


def tokenize(text: str) -> str:
    """Lower-cased words separated by single spaces, punctuation removed (returns a string;
    the ``simple`` tokenizer, not PTB)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a string, got {type(text).__name__}")
    return " ".join(_PUNCT.sub(" ", text.lower()).split())


def _ngrams(words: Sequence[str], n: int) -> Counter:
    counts: Counter = Counter()
    for k in range(1, n + 1):
        for i in range(len(words) - k + 1):
            counts[tuple(words[i : i + k])] += 1
    return counts


def _refs_list(references: Sequence[str | Sequence[str]]) -> list[list[str]]:
    out = []
    for i, r in enumerate(references):
        refs = [r] if isinstance(r, str) else list(r)
        if not refs:
            raise ValueError(f"reference {i} is empty: every report needs at least one reference")
        out.append(refs)
    return out


def _check_pairs(generated: Sequence[str], references: Sequence) -> list[list[str]]:
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated reports but {len(references)} references")
    for i, g in enumerate(generated):
        if not isinstance(g, str):
            raise TypeError(f"generated report {i} is {type(g).__name__}, expected str")
    return _refs_list(references)


def bleu_scores(
    generated: Sequence[str], references: Sequence[str | Sequence[str]], *, n: int = 4
) -> tuple[list[float], np.ndarray]:
    """Corpus BLEU-1..n (list of n floats) and per-report values ``(N, n)``, as pycocoevalcap."""
    refs_all = _check_pairs(generated, references)
    tiny, small = 1e-15, 1e-9
    tot_guess, tot_correct = [0] * n, [0] * n
    tot_test = tot_ref = 0.0
    per = np.zeros((len(generated), n))
    for row, (hyp, refs) in enumerate(zip(generated, refs_all)):
        words = hyp.split()
        testlen = len(words)
        maxcounts: Counter = Counter()
        reflens = []
        for ref in refs:
            rw = ref.split()
            reflens.append(len(rw))
            for g, c in _ngrams(rw, n).items():
                if c > maxcounts[g]:
                    maxcounts[g] = c
        reflen = min((abs(length - testlen), length) for length in reflens)[1]
        guess = [max(0, testlen - k + 1) for k in range(1, n + 1)]
        correct = [0] * n
        for g, c in _ngrams(words, n).items():
            correct[len(g) - 1] += min(maxcounts.get(g, 0), c)
        tot_test += testlen
        tot_ref += reflen
        bleu = 1.0
        for k in range(n):
            tot_guess[k] += guess[k]
            tot_correct[k] += correct[k]
            bleu *= (correct[k] + tiny) / (guess[k] + small)
            per[row, k] = bleu ** (1.0 / (k + 1))
        ratio = (testlen + tiny) / (reflen + small)
        if ratio < 1:
            per[row] *= math.exp(1 - 1 / ratio)
    corpus = []
    bleu = 1.0
    for k in range(n):
        bleu *= (tot_correct[k] + tiny) / (tot_guess[k] + small)
        corpus.append(bleu ** (1.0 / (k + 1)))
    ratio = (tot_test + tiny) / (tot_ref + small)
    if ratio < 1:
        corpus = [b * math.exp(1 - 1 / ratio) for b in corpus]
    return corpus, per


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (bit-parallel: one big-int step per token)."""
    if len(a) < len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, tok in enumerate(b):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(b)) - 1
    v = full
    for tok in a:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - bin(v).count("1")


def rouge_l_scores(
    generated: Sequence[str], references: Sequence[str | Sequence[str]], *, beta: float = 1.2
) -> tuple[float, np.ndarray]:
    """Corpus ROUGE-L (mean) and per-report values ``(N,)``, as pycocoevalcap's ``Rouge``."""
    refs_all = _check_pairs(generated, references)
    out = np.zeros(len(generated))
    for row, (hyp, refs) in enumerate(zip(generated, refs_all)):
        cand = hyp.split(" ")  # pycocoevalcap splits on single spaces ("" → [""])
        prec, rec = [], []
        for ref in refs:
            toks = ref.split(" ")
            lcs = _lcs_length(toks, cand)
            prec.append(lcs / len(cand))
            rec.append(lcs / len(toks))
        p, r = max(prec), max(rec)
        out[row] = ((1 + beta**2) * p * r) / (r + beta**2 * p) if p != 0 and r != 0 else 0.0
    return float(out.mean()) if len(out) else float("nan"), out


def cider_d_scores(
    generated: Sequence[str],
    references: Sequence[str | Sequence[str]],
    *,
    n: int = 4,
    sigma: float = 6.0,
) -> tuple[float, np.ndarray]:
    """Corpus CIDEr-D (mean) and per-report values ``(N,)``, as pycocoevalcap's ``Cider``.
    Document frequencies come from the references of the reports scored together."""
    refs_all = _check_pairs(generated, references)
    if not generated:
        return float("nan"), np.zeros(0)
    ref_counts = [[_ngrams(r.split(), n) for r in refs] for refs in refs_all]
    df: Counter = Counter()
    for refs in ref_counts:
        df.update({g for rc in refs for g in rc})
    log_n = math.log(float(len(refs_all)))

    def vec(counts: Counter) -> tuple[list[dict], list[float], int]:
        v: list[dict] = [{} for _ in range(n)]
        norm = [0.0] * n
        length = 0
        for g, tf in counts.items():
            k = len(g) - 1
            w = float(tf) * (log_n - math.log(max(1.0, df[g])))
            v[k][g] = w
            norm[k] += w * w
            if k == 1:
                length += tf
        return v, [math.sqrt(x) for x in norm], length

    out = np.zeros(len(generated))
    gauss = 2 * sigma**2
    for row, (hyp, refs) in enumerate(zip(generated, ref_counts)):
        hv, hn, hl = vec(_ngrams(hyp.split(), n))
        score = np.zeros(n)
        for rc in refs:
            rv, rn, rl = vec(rc)
            penalty = math.exp(-((hl - rl) ** 2) / gauss)
            for k in range(n):
                val = 0.0
                ref_k = rv[k]
                for g, w in hv[k].items():
                    r = ref_k.get(g, 0.0)
                    val += min(w, r) * r
                if hn[k] != 0 and rn[k] != 0:
                    val /= hn[k] * rn[k]
                score[k] += val * penalty
        out[row] = float(np.mean(score)) / len(refs) * 10.0
    return float(out.mean()), out


def java_available() -> bool:
    """True when a ``java`` executable is on the PATH (METEOR needs it)."""
    return shutil.which("java") is not None


def meteor_scores(
    generated: Sequence[str], references: Sequence[str | Sequence[str]]
) -> tuple[float, np.ndarray]:
    """Corpus METEOR 1.5 and per-report values through pycocoevalcap's jar (needs Java and
    pycocoevalcap); raises RuntimeError naming what is missing, ValueError on empty input (before
    Java starts). The Java process is always ended before returning or raising."""
    refs_all = _check_pairs(generated, references)
    _check_not_empty(generated, "meteor_scores")
    if not java_available():
        raise RuntimeError("METEOR needs Java: no 'java' executable on the PATH")
    try:
        from pycocoevalcap.meteor.meteor import Meteor
    except ImportError as exc:  # pragma: no cover - dev extra
        raise RuntimeError("METEOR needs pycocoevalcap (pip install pycocoevalcap)") from exc
    # the jar reads one line per request: a line break inside a text would stall it
    flat = {ord(c): " " for c in "\n\r\u000b\u000c\u0085\u2028\u2029"}
    gts = {i: [r.translate(flat) for r in refs] for i, refs in enumerate(refs_all)}
    res = {i: [h.translate(flat) if h.strip() else "."] for i, h in enumerate(generated)}  # the jar needs a token
    with _meteor_process(Meteor) as scorer:
        corpus, per = scorer.compute_score(gts, res)
    return float(corpus), np.asarray(per, dtype=float)


def _check_not_empty(generated: Sequence[str], name: str) -> None:
    if len(generated) == 0:
        raise ValueError(f"{name}: no reports to score (empty input)")


@contextmanager
def _meteor_process(factory: Any) -> Iterator[Any]:
    """A pycocoevalcap ``Meteor`` whose Java process is ended on leaving, even after an error.

    Its ``compute_score`` takes a lock and does not release it when it raises, and its
    ``__del__`` waits for that lock before killing the process, so a failed call used to leave
    the interpreter hanging at exit."""
    scorer = factory()
    try:
        yield scorer
    finally:
        proc = scorer.meteor_p
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with suppress(OSError):
                    stream.close()
        proc.kill()
        proc.wait()
        if scorer.lock.locked():
            scorer.lock.release()


def report_text_scores(
    generated: Sequence[str],
    references: Sequence[str | Sequence[str]],
    *,
    tokenizer: str = "ptb",
    tokenized: bool = False,
    meteor: bool | None = None,
) -> dict[str, float]:
    """Corpus-level ``bleu1``…``bleu4``, ``rouge_l``, ``cider_d`` (and ``meteor`` when Java is
    present, or when ``meteor=True``) as pycocoevalcap computes them.

    ``tokenizer`` (see :mod:`medimg_bench.metrics.text.tokenizers`): ``ptb`` (default:
    pycocoevalcap's own PTBTokenizer, token for token, so the numbers equal its
    ``COCOEvalCap`` pipeline on raw text), ``r2gen`` (R2Gen's cleaning), ``simple`` or ``none``.
    ``tokenized=True`` skips tokenisation (texts already tokenised; same as before). No reports
    at all is a ValueError (nothing is started)."""
    from medimg_bench.metrics.text.tokenizers import tokenize_texts

    refs_all = _check_pairs(generated, references)
    _check_not_empty(generated, "report_text_scores")
    if not tokenized:
        generated = tokenize_texts(generated, tokenizer)
        counts = [len(r) for r in refs_all]
        flat = tokenize_texts([r for refs in refs_all for r in refs], tokenizer)
        refs_all, k = [], 0
        for c in counts:
            refs_all.append(flat[k : k + c])
            k += c
    bleu, _ = bleu_scores(generated, refs_all)
    out = {f"bleu{k + 1}": float(b) for k, b in enumerate(bleu)}
    out["rouge_l"] = rouge_l_scores(generated, refs_all)[0]
    out["cider_d"] = cider_d_scores(generated, refs_all)[0]
    if meteor or (meteor is None and java_available()):
        out["meteor"] = meteor_scores(generated, refs_all)[0]
    return out
