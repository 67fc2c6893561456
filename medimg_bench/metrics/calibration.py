"""Calibration: expected calibration error (ECE), maximum calibration error and reliability data.

Confidence bins are equal-width on [0, 1]: bin ``b`` holds confidences in ``[b/B, (b+1)/B)``
and the last bin also holds 1.0. Binary and multi-label inputs compare each probability with
the 0/1 label (the positive-class reliability, as torchmetrics' binary calibration error);
multi-class inputs use the top label: confidence = highest probability, outcome = whether that
class is right (Guo et al., 2017).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from medimg_bench.metrics.classification import (
    _average,
    _check_average,
    _ScoreMetric,
    prepare_inputs,
)
from medimg_bench.registry import register_metric

__all__ = ["expected_calibration_error", "reliability_diagram", "ECE"]


def _confidences(pred: Any, target: Any, from_logits: bool) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Confidences and 0/1 outcomes (N, L) (NaN outcome = unlabelled) and the task kind."""
    s, y, kind = prepare_inputs(pred, target)
    if kind == "multiclass":
        probs = s.softmax(1) if from_logits else s
        conf, top = probs.max(1)
        labelled = ~y[:, 0].isnan()
        correct = y.gather(1, top[:, None])[:, 0]
        outcome = torch.where(labelled, correct, float("nan"))
        return conf[:, None], outcome[:, None], kind
    probs = s.sigmoid() if from_logits else s
    return probs, y, kind


def reliability_diagram(
    pred: Any, target: Any, *, n_bins: int = 15, from_logits: bool = False
) -> dict[str, Any]:
    """Reliability-diagram data per label: ``edges`` (B+1,), and (L, B) ``count``,
    ``confidence`` (mean confidence in the bin) and ``accuracy`` (observed frequency of the
    positive / correct outcome), NaN for empty bins; ``support`` (L,) positives per label and
    ``kind`` (the task). Multi-class gives L = 1 (top label).
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    conf, outcome, kind = _confidences(pred, target, from_logits)
    if ((conf < 0) | (conf > 1)).any():
        raise ValueError("pred must be probabilities in [0, 1] (pass from_logits=True for logits)")
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


def expected_calibration_error(
    pred: Any,
    target: Any,
    *,
    n_bins: int = 15,
    norm: str = "l1",
    average: str | None = "macro",
    from_logits: bool = False,
) -> torch.Tensor:
    """ECE ``Σ_b (n_b / n) |acc_b − conf_b|`` (``norm="l1"``) or the maximum calibration error
    ``max_b |acc_b − conf_b|`` over non-empty bins (``norm="max"``); a fraction in [0, 1].

    Multi-label gives one value per label (``average=None``) or their macro / weighted
    (by positives) mean; binary and multi-class give a 0-d tensor.
    """
    if norm not in ("l1", "max"):
        raise ValueError(f"norm must be 'l1' or 'max', got {norm!r}")
    _check_average(average)
    if average == "micro":
        raise ValueError("expected_calibration_error has no micro average")
    diagram = reliability_diagram(pred, target, n_bins=n_bins, from_logits=from_logits)
    count = diagram["count"]
    gap = (diagram["accuracy"] - diagram["confidence"]).abs().nan_to_num()
    total = count.sum(1)
    if norm == "l1":
        per = (gap * count).sum(1) / total.clamp_min(1)
    else:
        per = torch.where(count > 0, gap, 0.0).max(1).values
    per = torch.where(total > 0, per, float("nan"))
    if per.numel() == 1 and diagram["kind"] != "multilabel":
        return per[0]
    if per.isnan().any():
        labels = per.isnan().nonzero().flatten().tolist()
        warnings.warn(f"ece undefined (no labelled sample) for label(s) {labels}", stacklevel=2)
    return _average(per, diagram["support"], average, "multilabel")


@register_metric("ece", tags=("classification",))
class ECE(_ScoreMetric):
    """Stateful expected calibration error; see :func:`expected_calibration_error`."""

    name = "ece"
    higher_is_better = False

    def __init__(
        self,
        *,
        n_bins: int = 15,
        norm: str = "l1",
        average: str | None = None,
        from_logits: bool = False,
        class_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(average=average, class_names=class_names, n_bins=n_bins, norm=norm, from_logits=from_logits)

    def _fn(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return expected_calibration_error(preds, targets, average=self.average, **self.options)
