"""Calibration: expected calibration error (ECE), maximum calibration error and reliability data.

Confidence bins are equal-width on [0, 1]: bin ``b`` holds confidences in ``[b/B, (b+1)/B)``
and the last bin also holds 1.0. Binary and multi-label inputs compare each probability with
the 0/1 label (the positive-class reliability, as torchmetrics' binary calibration error);
multi-class inputs use the top label: confidence = highest probability, outcome = whether that
class is right (Guo et al., 2017). Multi-class probabilities must sum to 1 per row (within
1e-3): rows that do not are an error naming them, unless ``normalize=True`` divides each row by
its sum or ``from_logits=True`` applies a softmax.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.classification import (
    ScoreMetric,
    average_values,
    check_average,
    label_names,
    prepare_inputs,
)
from medimg_bench.registry import register_metric

__all__ = ["expected_calibration_error", "reliability_diagram", "ECE"]


_SUM_TOLERANCE = 1e-3


def _confidences(
    pred: Any, target: Any, from_logits: bool, normalize: bool = False
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Confidences and 0/1 outcomes (N, L) (NaN outcome = unlabelled) and the task kind."""
    s, y, kind = prepare_inputs(pred, target)
    if kind == "multiclass":
        if from_logits:
            probs = s.softmax(1)
        else:
            if ((s < 0) | (s > 1)).any():
                raise ValueError("pred must be probabilities in [0, 1] (pass from_logits=True for logits)")
            total = s.sum(1)
            off = (total - 1).abs() > _SUM_TOLERANCE
            if off.any() and not normalize:
                rows = off.nonzero().flatten()[:5].tolist()
                raise ValueError(
                    f"multi-class probabilities must sum to 1 (within {_SUM_TOLERANCE}); row(s) {rows} sum to "
                    f"{[round(float(total[i]), 4) for i in rows]} ({int(off.sum())} row(s) in all); pass "
                    "normalize=True to divide each row by its sum, or from_logits=True for logits"
                )
            if normalize:
                if (total <= 0).any():
                    raise ValueError(f"cannot normalize: row(s) {(total <= 0).nonzero().flatten()[:5].tolist()} sum to 0")
                s = s / total[:, None]
            probs = s
        conf, top = probs.max(1)
        labelled = ~y[:, 0].isnan()
        correct = y.gather(1, top[:, None])[:, 0]
        outcome = torch.where(labelled, correct, float("nan"))
        return conf[:, None], outcome[:, None], kind
    probs = s.sigmoid() if from_logits else s
    return probs, y, kind


def reliability_diagram(
    pred: Any, target: Any, *, n_bins: int = 15, from_logits: bool = False, normalize: bool = False
) -> dict[str, Any]:
    """Reliability-diagram data per label: ``edges`` (B+1,), and (L, B) ``count``,
    ``confidence`` (mean confidence in the bin) and ``accuracy`` (observed frequency of the
    positive / correct outcome), NaN for empty bins; ``support`` (L,) positives per label and
    ``kind`` (the task). Multi-class gives L = 1 (top label).
    """
    conf, outcome, kind = _binned_inputs(pred, target, n_bins, from_logits, normalize)
    n_labels = conf.shape[1]
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64, device=conf.device)
    bins = (torch.bucketize(conf, edges, right=True) - 1).clamp(0, n_bins - 1)
    labelled = ~outcome.isnan()
    flat = (bins + torch.arange(n_labels, device=conf.device) * n_bins)[labelled]
    size = n_labels * n_bins

    def bin_sum(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(size, dtype=torch.float64, device=conf.device)
        return out.index_add_(0, flat, x[labelled]).reshape(n_labels, n_bins)

    count = bin_sum(torch.ones_like(conf))
    safe = count.clamp_min(1)
    return {
        "edges": edges,
        "count": count,
        "confidence": torch.where(count > 0, bin_sum(conf) / safe, float("nan")),
        "accuracy": torch.where(count > 0, bin_sum(outcome.nan_to_num()) / safe, float("nan")),
        "support": (outcome == 1).sum(0),
        "kind": kind,  # type: ignore[dict-item]
    }


def _binned_inputs(
    pred: Any, target: Any, n_bins: int, from_logits: bool, normalize: bool
) -> tuple[torch.Tensor, torch.Tensor, str]:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    conf, outcome, kind = _confidences(pred, target, from_logits, normalize)
    if ((conf < 0) | (conf > 1)).any():
        raise ValueError("pred must be probabilities in [0, 1] (pass from_logits=True for logits)")
    return conf, outcome, kind


def _ece_from_bins(
    count: torch.Tensor, conf_sum: torch.Tensor, acc_sum: torch.Tensor, norm: str
) -> torch.Tensor:
    """ECE / MCE per label from per-bin sums (..., L, B) → (..., L); NaN without samples."""
    safe = count.clamp_min(1)
    confidence = torch.where(count > 0, conf_sum / safe, float("nan"))
    accuracy = torch.where(count > 0, acc_sum / safe, float("nan"))
    gap = (accuracy - confidence).abs().nan_to_num()
    total = count.sum(-1)
    if norm == "l1":
        per = (gap * count).sum(-1) / total.clamp_min(1)
    else:
        per = torch.where(count > 0, gap, 0.0).max(-1).values
    return torch.where(total > 0, per, float("nan"))


def expected_calibration_error(
    pred: Any,
    target: Any,
    *,
    n_bins: int = 15,
    norm: str = "l1",
    average: str | None = "macro",
    from_logits: bool = False,
    normalize: bool = False,
) -> torch.Tensor:
    """ECE ``Σ_b (n_b / n) |acc_b − conf_b|`` (``norm="l1"``) or the maximum calibration error
    ``max_b |acc_b − conf_b|`` over non-empty bins (``norm="max"``); a fraction in [0, 1].

    Multi-label gives one value per label (``average=None``) or their macro / weighted
    (by positives) mean; binary and multi-class give a 0-d tensor. A label without labelled
    samples is NaN with a warning naming it. Multi-class rows must sum to 1 (see module doc).
    """
    if norm not in ("l1", "max"):
        raise ValueError(f"norm must be 'l1' or 'max', got {norm!r}")
    check_average(average)
    if average == "micro":
        raise ValueError("expected_calibration_error has no micro average")
    diagram = reliability_diagram(pred, target, n_bins=n_bins, from_logits=from_logits, normalize=normalize)
    count = diagram["count"]
    per = _ece_from_bins(count, diagram["confidence"].nan_to_num() * count,
                         diagram["accuracy"].nan_to_num() * count, norm)
    if per.isnan().any():
        warnings.warn(f"ece undefined (no labelled sample) for label(s) {label_names(per.isnan())}; NaN, "
                      "left out of averages", stacklevel=2)
    if per.numel() == 1 and diagram["kind"] != "multilabel":
        return per[0]
    return average_values(per, diagram["support"], average, "multilabel")


@register_metric("ece", tags=("classification",))
class ECE(ScoreMetric):
    """Stateful expected calibration error; see :func:`expected_calibration_error`."""

    name = "ece"
    higher_is_better = False
    value_range = (0.0, 1.0)

    def __init__(
        self,
        *,
        n_bins: int = 15,
        norm: str = "l1",
        average: str | None = None,
        from_logits: bool = False,
        normalize: bool = False,
        class_names: Sequence[str] | None = None,
    ) -> None:
        if norm not in ("l1", "max"):
            raise ValueError(f"norm must be 'l1' or 'max', got {norm!r}")
        if average == "micro":
            raise ValueError("expected_calibration_error has no micro average")
        super().__init__(average=average, class_names=class_names, n_bins=n_bins, norm=norm,
                         from_logits=from_logits, normalize=normalize)

    def _fn(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return expected_calibration_error(preds, targets, average=self.average, **self.options)

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        """Bootstrap fast path: per-cluster sums per bin, one product per block of resamples."""
        from medimg_bench.metrics._resample import average_rows, calibration_plan, shared

        o = self.options
        conf, outcome, kind = _binned_inputs(preds, targets, o["n_bins"], o["from_logits"], o["normalize"])
        cl, per_bin = np.asarray(cluster), o["norm"] == "max"
        sums = shared("calibration", (conf, outcome, o["n_bins"], cl, n_clusters, per_bin),
                      lambda: calibration_plan(conf, outcome, o["n_bins"], cl, n_clusters, per_bin_counts=per_bin))
        support = shared("support", (outcome, cl, n_clusters), lambda: _support_plan(outcome, cl, n_clusters))

        def fn(counts: torch.Tensor) -> torch.Tensor:
            gap, count = sums(counts)
            per = _ece_from_gaps(gap, count, o["norm"])  # (b, L)
            if per.shape[1] == 1 and kind != "multilabel":
                return per
            return average_rows(per, support(counts) if self.average == "weighted" else None,
                                self.average, "multilabel")

        fn.estimates = True  # type: ignore[attr-defined]  # counts of one give the full-data value
        return fn


def _ece_from_gaps(gap: torch.Tensor, count: torch.Tensor, norm: str) -> torch.Tensor:
    """ECE / MCE (b, L) from per-bin sums of ``outcome − confidence`` (b, L, B) and the count
    per bin (b, L, B; ``norm="max"``) or per label (b, L; ``"l1"``); NaN without samples.

    ``|Σ(o − c)|`` over a bin is ``n_b |acc_b − conf_b|``, the term of :func:`_ece_from_bins`
    (equal up to rounding: the sums are taken in another order)."""
    if norm == "l1":
        return torch.where(count > 0, gap.abs().sum(-1) / count.clamp_min(1), float("nan"))
    per = torch.where(count > 0, gap.abs() / count.clamp_min(1), 0.0).max(-1).values
    return torch.where(count.sum(-1) > 0, per, float("nan"))


def _support_plan(outcome: torch.Tensor, cluster: np.ndarray, n_clusters: int) -> Any:
    """``counts (b, G)`` → positives per label (b, L) (the weights of ``average="weighted"``)."""
    from medimg_bench.metrics._resample import ClusterProduct

    on = outcome.detach().cpu().numpy()
    n, n_labels = on.shape
    hit = on == 1
    rows = np.broadcast_to(np.arange(n_labels), (n, n_labels))[hit]
    cl = np.broadcast_to(np.asarray(cluster, dtype=np.int64)[:, None], (n, n_labels))[hit]
    prod = ClusterProduct(rows, cl, None, n_rows=n_labels, n_clusters=n_clusters, device=outcome.device)
    return lambda counts: prod(counts).T
