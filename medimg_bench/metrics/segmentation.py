"""Segmentation metrics (overlap). Functional ``dice`` and the stateful ``Dice`` for the engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from medimg_bench.metrics._utils import as_tensor
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = ["dice", "Dice"]


def _one_hot(pred: torch.Tensor, target: torch.Tensor, num_classes: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    if pred.shape != target.shape:
        raise ValueError(f"prediction and target shapes differ: {tuple(pred.shape)} vs {tuple(target.shape)}")
    for name, t in (("prediction", pred), ("target", target)):
        if t.is_floating_point() or t.is_complex():
            raise ValueError(f"{name} must be an integer label map, got {t.dtype}")
    if num_classes is None:
        num_classes = int(max(pred.max().item(), target.max().item())) + 1
    for name, t in (("prediction", pred), ("target", target)):
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= num_classes):
            raise ValueError(f"{name} has a label outside [0, {num_classes}): min {int(t.min())}, max {int(t.max())}")
    classes = torch.arange(num_classes, device=pred.device).view(1, -1, *([1] * (pred.ndim - 1)))
    return pred.unsqueeze(1) == classes, target.unsqueeze(1) == classes


def dice(
    pred: Any,
    target: Any,
    *,
    num_classes: int | None = None,
    include_background: bool = False,
) -> torch.Tensor:
    """Dice coefficient per sample and class, shape ``(B, C)`` (NaN where both masks are empty).

    ``pred``/``target``: integer label maps ``(B, *spatial)``.
    """
    p = as_tensor(pred, name="prediction")
    t = as_tensor(target, name="target")
    ph, th = _one_hot(p, t, num_classes)
    dims = tuple(range(2, ph.ndim))
    inter = (ph & th).sum(dims).double()
    total = ph.sum(dims).double() + th.sum(dims).double()
    out = torch.where(total > 0, 2 * inter / total.clamp_min(1), torch.full_like(total, float("nan")))
    if not include_background:
        out = out[:, 1:]
    return out.float()


@register_metric("dice", tags=("segmentation",))
class Dice(Metric):
    """Stateful Dice: per-sample × class values kept; ``compute`` is the NaN-aware mean per class."""

    name = "dice"
    per_sample = True
    higher_is_better = True

    def __init__(
        self,
        *,
        num_classes: int,
        include_background: bool = False,
        class_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(class_names=class_names)
        self.num_classes = num_classes
        self.include_background = include_background
        self.add_state("scores", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None) -> None:
        values = dice(preds, targets, num_classes=self.num_classes, include_background=self.include_background)
        self._add_ids(ids, values.shape[0])
        self.scores.append(values)

    def values(self) -> tuple[list[str], torch.Tensor]:
        n_cls = self.num_classes - (0 if self.include_background else 1)
        vals = torch.cat(self.scores) if self.scores else torch.empty(0, n_cls)
        return list(self.ids), vals

    def compute(self) -> torch.Tensor:
        return self.values()[1].nanmean(0)
