"""Report-text scoring pipelines by name (``scoring=`` of ``task=report_generation``).

* ``coco`` — the MS-COCO caption pipeline (pycocoevalcap's ``COCOEvalCap``): both texts through
  the PTB tokenizer (:func:`~.tokenizers.ptb_tokenize`), then BLEU-1..4, METEOR, ROUGE-L, CIDEr-D.
* ``r2gen`` — the evaluation path of the R2Gen family, as its code has it (cuhksz-nlp/R2Gen at
  5a2e63f6d8da670725b1926317b4bfd1393ec51b: ``modules/tokenizers.py``, ``modules/datasets.py``,
  ``modules/trainer.py``, ``modules/metrics.py``; run scripts ``run_iu_xray.sh`` /
  ``run_mimic_cxr.sh``): the *reference* is cleaned (``clean_report_iu_xray`` or
  ``clean_report_mimic_cxr``), mapped through a vocabulary of the training split's cleaned words
  seen at least ``threshold`` times (others become ``<unk>``), truncated to ``max_seq_length`` ids
  counting the leading BOS (so at most ``max_seq_length - 1`` words), decoded back to words; the
  generated text is used as the model wrote it. Both then get a space before each full stop
  (``re.sub(' +', ' ', s.replace('.', ' .'))``, a no-op on R2Gen's own decoded output) and go to
  pycocoevalcap's scorers without the PTB tokenizer. R2Gen's defaults: IU X-ray threshold 3,
  length 60; MIMIC-CXR threshold 10, length 100. ``variant="cvt2distilgpt2"`` is
  CvT2DistilGPT2's copy (aehrc/cvt2distilgpt2 at 8cf4c8dcafe92ebf50d5a1d4ebbc7c3f0b7e2d87,
  ``tools/dataset/*_tokenizer.py``, ``format_examples``, ``tools/metrics/coco.py``): the same
  steps with threshold 3 and length 60 for both datasets; its README prints BLEU and METEOR after
  float32 logging. R2Gen's ``compute_scores`` prints no CIDEr; we compute it on the same texts.
* ``rexrank`` — CXR-Report-Metric's per-report scores (rajpurkarlab/CXR-Report-Metric at
  9c9ecad39be6cb2be8e75be1d1c50ef8888a3e40, ``CXRMetric/run_eval.py``), averaged over reports as
  ReXrank prints them: BLEU-2 ``bleu_score`` always; ``bertscore``, ``semb_score``,
  ``radgraph_combined`` and ``RadCliQ-v0`` / ``RadCliQ-v1`` when the options name their models
  (:mod:`medimg_bench.metrics.text.rexrank`).

Every function returns corpus figures under the names the pipeline's own code prints
(pycocoevalcap: ``BLEU_1``..``BLEU_4``, ``METEOR``, ``ROUGE_L``, ``CIDEr``; CXR-Report-Metric:
``bleu_score``, ``bertscore``, ``semb_score``, ``radgraph_combined``, ``RadCliQ-v0``,
``RadCliQ-v1``) and per-report values.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from medimg_bench.metrics.text.rexrank import prep_reports_rexrank, rexrank_bleu2, rexrank_scores

__all__ = [
    "SCORING_PIPELINES",
    "R2GenVocabulary",
    "r2gen_texts",
    "coco_scores",
    "score_reports",
    "rexrank_bleu2",
    "prep_reports_rexrank",
    "corpus_figures",
]

SCORING_PIPELINES = ("coco", "r2gen", "rexrank")
COCO_NAMES = ("BLEU_1", "BLEU_2", "BLEU_3", "BLEU_4", "METEOR", "ROUGE_L", "CIDEr")
_R2GEN_DEFAULTS = {("r2gen", "iu_xray"): (3, 60), ("r2gen", "mimic_cxr"): (10, 100),
                   ("cvt2distilgpt2", "iu_xray"): (3, 60), ("cvt2distilgpt2", "mimic_cxr"): (3, 60)}
_SPACES = re.compile(" +")
_MEAN_OF_REPORTS = ("bleu_score", "bertscore", "semb_score", "radgraph_combined", "RadCliQ-v0", "RadCliQ-v1")


@dataclass
class R2GenVocabulary:
    """R2Gen's ``Tokenizer``: words of the cleaned training reports seen ``>= threshold`` times
    plus ``<unk>``, sorted, ids from 1 (0 is BOS/EOS)."""

    train_reports: Sequence[str]
    threshold: int = 3
    dataset: str = "iu_xray"
    token2idx: dict[str, int] = field(init=False)
    idx2token: dict[int, str] = field(init=False)

    def __post_init__(self) -> None:
        from medimg_bench.metrics.text.tokenizers import r2gen_clean

        counter = Counter(tok for rep in self.train_reports
                          for tok in r2gen_clean(rep, dataset=self.dataset).split())
        vocab = sorted([k for k, v in counter.items() if v >= self.threshold] + ["<unk>"])
        self.token2idx = {tok: i + 1 for i, tok in enumerate(vocab)}
        self.idx2token = {i: tok for tok, i in self.token2idx.items()}

    def encode(self, report: str) -> list[int]:
        """``[0, ids..., 0]`` of the cleaned report (R2Gen's ``Tokenizer.__call__``)."""
        from medimg_bench.metrics.text.tokenizers import r2gen_clean

        unk = self.token2idx["<unk>"]
        return [0] + [self.token2idx.get(t, unk) for t in r2gen_clean(report, dataset=self.dataset).split()] + [0]

    def decode(self, ids: Sequence[int]) -> str:
        """Words up to the first 0 (R2Gen's ``Tokenizer.decode``)."""
        words = []
        for idx in ids:
            if idx <= 0:
                break
            words.append(self.idx2token[int(idx)])
        return " ".join(words)

    def reference(self, report: str, max_seq_length: int) -> str:
        """The reference text R2Gen scores: encode, truncate to ``max_seq_length``, decode
        without the BOS."""
        return self.decode(self.encode(report)[:max_seq_length][1:])


def _full_stop_spacing(s: str) -> str:
    return _SPACES.sub(" ", s.replace(".", " ."))


def r2gen_texts(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    train_reports: Sequence[str],
    dataset: str = "iu_xray",
    variant: str = "r2gen",
    threshold: int | None = None,
    max_seq_length: int | None = None,
) -> tuple[list[str], list[str]]:
    """(generated, references) as the R2Gen-family code hands them to pycocoevalcap's scorers."""
    if (variant, dataset) not in _R2GEN_DEFAULTS:
        raise ValueError(f"r2gen pipeline: variant must be r2gen or cvt2distilgpt2 and dataset iu_xray "
                         f"or mimic_cxr, got {variant!r} / {dataset!r}")
    if not train_reports:
        raise ValueError("r2gen pipeline: the vocabulary needs the training split's reports (train_reports)")
    d_thr, d_len = _R2GEN_DEFAULTS[(variant, dataset)]
    vocab = R2GenVocabulary(list(train_reports), threshold=threshold or d_thr, dataset=dataset)
    length = max_seq_length or d_len
    refs = [_full_stop_spacing(vocab.reference(r, length)) for r in references]
    gens = [_full_stop_spacing(g) for g in generated]
    return gens, refs


def coco_scores(
    generated: Sequence[str], references: Sequence[str | Sequence[str]], *, meteor: bool | None = None
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """pycocoevalcap's scorers on tokenised texts: corpus figures (``BLEU_1``..``CIDEr``) and
    per-report values. ``meteor=None`` runs METEOR when Java is present."""
    from medimg_bench.metrics.text.nlg import (
        bleu_scores,
        cider_d_scores,
        java_available,
        meteor_scores,
        rouge_l_scores,
    )

    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    corpus: dict[str, float] = {}
    per: dict[str, np.ndarray] = {}
    bleu, bleu_per = bleu_scores(generated, refs)
    for k in range(4):
        corpus[f"BLEU_{k + 1}"], per[f"BLEU_{k + 1}"] = float(bleu[k]), bleu_per[:, k]
    if meteor or (meteor is None and java_available()):
        corpus["METEOR"], per["METEOR"] = meteor_scores(generated, refs)
    corpus["ROUGE_L"], per["ROUGE_L"] = rouge_l_scores(generated, refs)
    corpus["CIDEr"], per["CIDEr"] = cider_d_scores(generated, refs)
    return corpus, per


def score_reports(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    scoring: str = "coco",
    train_reports: Sequence[str] | None = None,
    dataset: str = "iu_xray",
    variant: str = "r2gen",
    threshold: int | None = None,
    max_seq_length: int | None = None,
    meteor: bool | None = None,
    **rexrank_options: object,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Corpus figures and per-report values of the named pipeline (see the module docstring).
    ``train_reports``, ``dataset``, ``variant``, ``threshold`` and ``max_seq_length`` are the
    ``r2gen`` pipeline's; ``meteor`` as in :func:`coco_scores`; further keywords are the
    ``rexrank`` pipeline's model options (:data:`~.rexrank.REXRANK_OPTIONS`)."""
    generated, references = list(generated), list(references)
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated reports but {len(references)} references")
    if scoring == "coco":
        from medimg_bench.metrics.text.tokenizers import ptb_tokenize

        return coco_scores(ptb_tokenize(generated), ptb_tokenize(references), meteor=meteor)
    if scoring == "r2gen":
        gens, refs = r2gen_texts(generated, references, train_reports=train_reports or [], dataset=dataset,
                                 variant=variant, threshold=threshold, max_seq_length=max_seq_length)
        return coco_scores(gens, refs, meteor=meteor)
    if scoring == "rexrank":
        per, _ = rexrank_scores(generated, references, **rexrank_options)
        return {k: float(v.mean()) if len(v) else float("nan") for k, v in per.items()}, per
    if rexrank_options:
        raise ValueError(f"scoring {scoring!r}: unknown option(s) {sorted(rexrank_options)}")
    raise ValueError(f"unknown scoring {scoring!r}; known: {', '.join(SCORING_PIPELINES)}")


def _bleu_statistics(generated: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Per report: matched and candidate n-gram counts (n = 1..4), hypothesis length and the
    closest reference length — the sums pycocoevalcap's corpus BLEU is made of. ``(N, 10)``."""
    out = np.zeros((len(generated), 10))
    for i, (hyp, ref) in enumerate(zip(generated, references)):
        h, r = hyp.split(), ref.split()
        for n in range(1, 5):
            hc = Counter(tuple(h[k : k + n]) for k in range(len(h) - n + 1))
            rc = Counter(tuple(r[k : k + n]) for k in range(len(r) - n + 1))
            out[i, n - 1] = sum(min(c, rc[g]) for g, c in hc.items())
            out[i, 3 + n] = max(0, len(h) - n + 1)
        out[i, 8], out[i, 9] = len(h), len(r)
    return out


def _bleu_from_sums(sums: np.ndarray) -> np.ndarray:
    """Corpus BLEU-1..4 from summed statistics ``(R, 10)`` (pycocoevalcap's smoothing)."""
    tiny, small = 1e-15, 1e-9
    ratios = (sums[:, 0:4] + tiny) / (sums[:, 4:8] + small)
    logs = np.cumsum(np.log(ratios), axis=1) / np.arange(1, 5)
    bleu = np.exp(logs)
    ratio = (sums[:, 8] + tiny) / (sums[:, 9] + small)
    bp = np.where(ratio < 1, np.exp(1 - 1 / np.maximum(ratio, tiny)), 1.0)
    return bleu * bp[:, None]


def corpus_figures(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    groups: Sequence[object] | None = None,
    scoring: str = "coco",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_report: dict[str, Sequence[float]] | None = None,
    **options: object,
) -> dict[str, dict[str, float | None]]:
    """The pipeline's printed figures ``{name: {value, ci_low, ci_high}}`` with a percentile
    bootstrap over ``groups`` (studies or patients; each report its own group by default).
    BLEU is recomputed from resampled n-gram sums (exact); ROUGE-L and the ``rexrank`` scores are
    means of per-report values (as printed); CIDEr resamples per-report values with the document
    frequencies of the whole test set held fixed; METEOR (the jar's aggregate) has no interval.
    ``per_report``: per-report values already computed (e.g. the sample table's model-based
    ``rexrank`` columns), averaged the same way."""
    generated, references = list(generated), list(references)
    corpus, per = score_reports(generated, references, scoring=scoring, **options)  # type: ignore[arg-type]
    for name, values in (per_report or {}).items():
        per[name] = np.asarray(values, dtype=float)
        if len(per[name]) != len(generated):
            raise ValueError(f"corpus_figures: {name} has {len(per[name])} values for {len(generated)} reports")
        corpus[name] = float(per[name].mean()) if len(generated) else float("nan")
    groups = list(range(len(generated))) if groups is None else list(groups)
    _, inverse = np.unique(np.asarray([str(g) for g in groups]), return_inverse=True)
    rng = np.random.default_rng(seed)
    n_groups = int(inverse.max()) + 1 if len(inverse) else 0
    draws = rng.integers(0, max(n_groups, 1), size=(n_resamples, n_groups))
    weights = np.stack([np.bincount(d, minlength=n_groups) for d in draws])[:, inverse] if n_groups else None
    alpha = (1 - confidence) / 2
    out: dict[str, dict[str, float | None]] = {}

    def interval(values: np.ndarray) -> tuple[float, float]:
        return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))

    if scoring in ("coco", "r2gen") and weights is not None:
        gens, refs = _pipeline_texts(generated, references, scoring, options)
        stats = _bleu_statistics(gens, refs)
        boot = _bleu_from_sums(weights @ stats)
        for k in range(4):
            out[f"BLEU_{k + 1}"] = dict(zip(("ci_low", "ci_high"), interval(boot[:, k])))
    for name, value in corpus.items():
        entry = out.setdefault(name, {"ci_low": None, "ci_high": None})
        entry["value"] = float(value)
        if (name in ("ROUGE_L", "CIDEr") or name in _MEAN_OF_REPORTS) and weights is not None:
            means = (weights @ per[name]) / weights.sum(axis=1)
            entry["ci_low"], entry["ci_high"] = interval(means)
    return {k: {"value": v["value"], "ci_low": v["ci_low"], "ci_high": v["ci_high"]} for k, v in out.items()}


def _pipeline_texts(generated: list[str], references: list[str], scoring: str,
                    options: dict[str, object]) -> tuple[list[str], list[str]]:
    if scoring == "coco":
        from medimg_bench.metrics.text.tokenizers import ptb_tokenize

        return ptb_tokenize(generated), ptb_tokenize(references)
    keys = ("train_reports", "dataset", "variant", "threshold", "max_seq_length")
    return r2gen_texts(generated, references, **{k: options[k] for k in keys if k in options})  # type: ignore[arg-type]
