"""Classification metrics. Functional ``auroc`` and the stateful ``AUROC`` for the engine."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from medimg_bench.metrics._utils import as_tensor
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = ["auroc", "AUROC"]


def _binary_auroc_columns(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """AUROC of each column of ``scores`` (N, L) against 0/1/NaN ``labels`` (N, L), ties averaged."""
    out = torch.full((scores.shape[1],), float("nan"), dtype=torch.float64, device=scores.device)
    for j in range(scores.shape[1]):
        valid = ~labels[:, j].isnan()
        s, y = scores[valid, j].double(), labels[valid, j].double()
        n_pos = int((y == 1).sum())
        n_neg = int((y == 0).sum())
        if n_pos == 0 or n_neg == 0:
            continue
        order = torch.argsort(s)
        s_sorted = s[order]
        # average ranks for ties: rank = mean of positions of equal values
        _, inverse, counts = torch.unique_consecutive(s_sorted, return_inverse=True, return_counts=True)
        ends = torch.cumsum(counts, 0).double()
        avg_rank = ends - (counts.double() - 1) / 2
        ranks = torch.empty_like(s)
        ranks[order] = avg_rank[inverse]
        rank_sum = ranks[y == 1].sum()
        out[j] = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return out


def auroc(pred: Any, target: Any, *, average: str | None = "macro") -> torch.Tensor:
    """Area under the ROC curve (ties counted ½, as scikit-learn).

    ``pred``: scores ``(N,)`` (binary) or ``(N, K)``; ``target``: 0/1 ``(N,)``, multi-hot ``(N, K)``
    (NaN = unlabelled, excluded per label), or integer classes ``(N,)`` with ``(N, K)`` scores
    (one-vs-rest). Returns a scalar, or ``(K,)`` with ``average=None``; labels with one class
    present are NaN (with a warning) and left out of the macro average.
    """
    s = as_tensor(pred, name="pred").double()
    y = as_tensor(target, name="target").double()
    if s.isnan().any() or s.isinf().any():
        raise ValueError("pred contains NaN or inf scores")
    if s.shape[0] != y.shape[0]:
        raise ValueError(f"pred and target lengths differ: {s.shape[0]} vs {y.shape[0]}")
    if s.ndim == 1:
        s, y = s[:, None], y[:, None] if y.ndim == 1 else y
    elif y.ndim == 1:  # multi-class: integer targets, one-vs-rest
        k = s.shape[1]
        if ((y < 0) | (y >= k) | (y != y.round())).any():
            raise ValueError(f"target has values that are not classes in [0, {k})")
        y = torch.nn.functional.one_hot(y.long(), k).double()
    per_label = _binary_auroc_columns(s, y)
    undefined = per_label.isnan()
    if undefined.any():
        warnings.warn(
            f"AUROC undefined (one class present) for label(s) {undefined.nonzero().flatten().tolist()}",
            stacklevel=2,
        )
    if average is None:
        return per_label if per_label.numel() > 1 else per_label[0]
    if average == "macro":
        return per_label.nanmean()
    raise ValueError(f"average must be None or 'macro', got {average!r}")


@register_metric("auroc", tags=("classification",))
class AUROC(Metric):
    """Stateful AUROC per class; keeps scores and targets (a dataset-level metric)."""

    name = "auroc"
    per_sample = False
    higher_is_better = True

    def __init__(self, *, class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=class_names)
        self.add_state("preds", [], dist_reduce_fx="cat")
        self.add_state("targets", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None) -> None:
        p = as_tensor(preds, name="pred").detach()
        t = as_tensor(targets, name="target").detach()
        self._add_ids(ids, p.shape[0])
        self.preds.append(p if p.ndim > 1 else p[:, None])
        self.targets.append(t[:, None] if t.ndim == 1 and p.ndim == 1 else t)

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cat(self.preds), torch.cat(self.targets)

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = auroc(preds, targets, average=None)
        return out.reshape(-1)

    def compute(self) -> torch.Tensor:
        return self.functional(*self.state_arrays())
