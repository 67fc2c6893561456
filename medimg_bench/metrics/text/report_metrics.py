"""Stateful per-report text metrics for the engine: ``report_nlg`` keeps the generated and
reference texts and gives per-report BLEU-1..4, ROUGE-L and CIDEr-D (pycocoevalcap's per-report
values; CIDEr-D's document frequencies from all references seen), so the summary reports their
mean with a patient-clustered bootstrap CI. Corpus-level values as pycocoevalcap computes them
are :func:`medimg_bench.metrics.report_text_scores` (the report task writes them too)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.text.nlg import bleu_scores, cider_d_scores, rouge_l_scores
from medimg_bench.metrics.text.tokenizers import TOKENIZERS, tokenize_texts
from medimg_bench.registry import register_metric

__all__ = ["ReportNLG", "REPORT_NLG_COLUMNS", "compare_reports"]

REPORT_NLG_COLUMNS = ("bleu1", "bleu2", "bleu3", "bleu4", "rouge_l", "cider_d")


@register_metric("report_nlg", tags=("report", "text"))
class ReportNLG(Metric):
    """Per-report BLEU-1..4, ROUGE-L, CIDEr-D. ``update(generated_texts, reference_texts)``;
    texts are tokenised with the named ``tokenizer`` (default ``ptb``, pycocoevalcap's
    PTBTokenizer through the pure-Python lexer, one batch at a time) unless ``tokenized=True``."""

    name = "report_nlg"
    per_sample = True
    higher_is_better = True
    value_range = (0.0, 1.0)
    value_ranges = MappingProxyType({"cider_d": (0.0, math.inf)})  # ×10 scale, no fixed maximum
    input_kind = "text"

    def __init__(self, *, tokenized: bool = False, tokenizer: str = "ptb",
                 class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=None)
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"{self.name}: unknown tokenizer {tokenizer!r}; known: {', '.join(TOKENIZERS)}")
        self.tokenized = tokenized
        self.tokenizer = tokenizer
        self.add_state("generated", [], dist_reduce_fx="cat")
        self.add_state("references", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, str) or isinstance(targets, str):
            raise ValueError(f"{self.name}: expected lists of report texts, got a single string")
        if len(preds) != len(targets):
            raise ValueError(f"{self.name}: {len(preds)} generated reports but {len(targets)} references")
        for i, (g, r) in enumerate(zip(preds, targets)):
            where = ids[i] if ids is not None else i
            if not isinstance(g, str) or not isinstance(r, str):
                raise ValueError(f"{self.name}: sample {where}: generated and reference reports must be text")
            if not r.strip():
                raise ValueError(f"{self.name}: sample {where}: the reference report is empty")
        self._add_ids(ids, len(preds))
        if self.tokenized:
            self.generated.extend(preds)
            self.references.extend(targets)
            return
        options = {"backend": "python"} if self.tokenizer == "ptb" else {}  # no JVM start per batch
        self.generated.extend(tokenize_texts(list(preds), self.tokenizer, **options))
        self.references.extend(tokenize_texts(list(targets), self.tokenizer, **options))

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        """``{column: (ids, (N, 1) tensor)}`` for each of :data:`REPORT_NLG_COLUMNS`."""
        ids = list(self.ids)
        if not self.generated:
            return {c: (ids, torch.empty(0, 1, dtype=torch.float64)) for c in REPORT_NLG_COLUMNS}
        refs = [[r] for r in self.references]
        _, bleu = bleu_scores(self.generated, refs)
        _, rouge = rouge_l_scores(self.generated, refs)
        _, cider = cider_d_scores(self.generated, refs)
        cols = [*(bleu[:, k] for k in range(4)), rouge, cider]
        return {c: (ids, torch.as_tensor(v, dtype=torch.float64).reshape(-1, 1))
                for c, v in zip(REPORT_NLG_COLUMNS, cols)}

    def values(self) -> tuple[list[str], torch.Tensor]:
        table = self.metric_values()
        ids = table[REPORT_NLG_COLUMNS[0]][0]
        return ids, torch.cat([table[c][1] for c in REPORT_NLG_COLUMNS], dim=1)

    def compute(self) -> torch.Tensor:
        return self.values()[1].nanmean(0)


def compare_reports(
    generated_a: Sequence[str],
    generated_b: Sequence[str],
    references: Sequence[str],
    *,
    metric: str = "chexpert_5_micro_f1",
    groups: Sequence[Any] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Any:
    """Paired bootstrap of ``metric(a) − metric(b)`` over the same studies (resampling
    ``groups``, e.g. patient ids, when given): a ``PairedBootstrapResult`` with the difference,
    its CI and a two-sided p-value. ``metric``: ``chexpert_{5,14}_{micro,macro}_f1``,
    ``bleu1``…``bleu4`` (corpus level), ``rouge_l`` or ``cider_d``."""
    import numpy as np

    from medimg_bench.metrics.stats import paired_bootstrap
    from medimg_bench.metrics.text.chexpert_labeler import label_reports
    from medimg_bench.metrics.text.factuality import chexpert_f1

    if not (len(generated_a) == len(generated_b) == len(references)):
        raise ValueError(f"lengths differ: {len(generated_a)}, {len(generated_b)}, {len(references)}")
    if metric.startswith("chexpert_"):
        _, n, avg, _ = metric.split("_")
        cols = label_reports(references).columns
        la = label_reports(generated_a).to_numpy()
        lb = label_reports(generated_b).to_numpy()
        lr = label_reports(references).to_numpy()

        def fn(pred: Any, target: Any) -> float:
            import pandas as pd

            return chexpert_f1(pd.DataFrame(np.asarray(pred, float), columns=cols),
                               pd.DataFrame(np.asarray(target, float), columns=cols),
                               observations=n, average=avg)

        return paired_bootstrap(fn, la, lb, lr, n_resamples=n_resamples, confidence=confidence,
                                groups=groups, seed=seed)
    if metric not in ("bleu1", "bleu2", "bleu3", "bleu4", "rouge_l", "cider_d"):
        raise ValueError(f"unknown metric {metric!r}")
    from medimg_bench.metrics.text.tokenizers import ptb_tokenize

    ta = np.array(ptb_tokenize(generated_a), dtype=object)
    tb = np.array(ptb_tokenize(generated_b), dtype=object)
    tr = np.array(ptb_tokenize(references), dtype=object)

    def text_fn(pred: Any, target: Any) -> float:
        refs = [[r] for r in target]
        if metric.startswith("bleu"):
            return bleu_scores(list(pred), refs)[0][int(metric[-1]) - 1]
        if metric == "rouge_l":
            return rouge_l_scores(list(pred), refs)[0]
        return cider_d_scores(list(pred), refs)[0]

    return paired_bootstrap(text_fn, ta, tb, tr, n_resamples=n_resamples, confidence=confidence,
                            groups=groups, seed=seed)
