"""3D grounding: intersection over union of axis-aligned 3D boxes and grounding accuracy.

A box is ``(x1, y1, z1, x2, y2, z2)`` (``box_format="xyzxyz"``, MONAI's ``StandardMode``: the
two opposite corners, ``x1 <= x2`` ...) or ``(cx, cy, cz, w, h, d)`` (``"cccwhd"``, MONAI's
``CenterSizeMode``), in any unit shared by prediction and reference (voxels or mm). Coordinates
are continuous: a box's volume is ``(x2 - x1)(y2 - y1)(z2 - z1)`` — MONAI's convention
(``TO_REMOVE = 0``). ``inclusive=True`` reads integer voxel-index boxes whose last index is
inside the box (volume ``(x2 - x1 + 1)...``), the convention of older detection code.

``box_iou_3d`` equals ``monai.data.box_utils.box_iou`` up to float32 rounding (MONAI computes in
float32 and adds float32's eps to the union; we compute in float64 without it):
``tests/metrics/test_grounding.py``. Grounding accuracy at ``t`` is the share of questions whose
predicted box has IoU ``>= t`` with the reference (ScanRefer's ``Acc@0.25`` / ``Acc@0.5``
rule); a question the model answered without a readable box counts as IoU 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = ["box_iou_3d", "grounding_accuracy", "parse_box_3d", "BoxIoU3D", "GROUNDING_THRESHOLDS"]

#: the thresholds reported by default (ScanRefer's Acc@0.25 and Acc@0.5)
GROUNDING_THRESHOLDS: tuple[float, ...] = (0.25, 0.5)
_FORMATS = ("xyzxyz", "cccwhd")


def _boxes(x: Any, *, name: str, box_format: str) -> torch.Tensor:
    if box_format not in _FORMATS:
        raise ValueError(f"box_format must be one of {_FORMATS}, got {box_format!r}")
    t = torch.as_tensor(np.asarray(x, dtype=np.float64) if not isinstance(x, torch.Tensor) else x)
    t = t.to(torch.float64)
    if t.ndim == 1 and t.numel() == 6:
        t = t[None]
    if t.ndim != 2 or t.shape[1] != 6:
        raise ValueError(f"{name}: expected boxes of shape (N, 6), got {tuple(t.shape)}")
    if t.shape[0] == 0:
        raise ValueError(f"{name}: empty input (no boxes)")
    bad = ~torch.isfinite(t)
    if bad.any():
        rows = bad.any(1).nonzero().flatten()[:10].tolist()
        kind = "NaN" if torch.isnan(t).any() else "inf"
        raise ValueError(f"{name}: boxes with {kind} values at rows {rows}")
    if box_format == "cccwhd":
        if (t[:, 3:] < 0).any():
            rows = (t[:, 3:] < 0).any(1).nonzero().flatten()[:10].tolist()
            raise ValueError(f"{name}: negative box size at rows {rows}")
        t = torch.cat([t[:, :3] - t[:, 3:] / 2, t[:, :3] + t[:, 3:] / 2], 1)
    elif (t[:, 3:] < t[:, :3]).any():
        rows = (t[:, 3:] < t[:, :3]).any(1).nonzero().flatten()[:10].tolist()
        raise ValueError(f"{name}: boxes with x2 < x1, y2 < y1 or z2 < z1 at rows {rows} "
                         "(expected x1, y1, z1, x2, y2, z2)")
    return t


def _volume(b: torch.Tensor, extra: float) -> torch.Tensor:
    return torch.prod(b[..., 3:] - b[..., :3] + extra, dim=-1)


def box_iou_3d(
    pred: Any, target: Any, *, pairwise: bool = False, box_format: str = "xyzxyz", inclusive: bool = False,
) -> torch.Tensor:
    """IoU of 3D boxes (float64): ``(N,)`` for ``pred[i]`` vs ``target[i]``, or ``(N, M)`` for
    every pair with ``pairwise=True``. Two boxes of zero volume that do not overlap give 0."""
    p = _boxes(pred, name="pred", box_format=box_format)
    t = _boxes(target, name="target", box_format=box_format)
    extra = 1.0 if inclusive else 0.0
    if not pairwise and p.shape[0] != t.shape[0]:
        raise ValueError(f"pred and target lengths differ: {p.shape[0]} vs {t.shape[0]} boxes")
    if pairwise:
        p, t = p[:, None, :], t[None, :, :]
    lo = torch.maximum(p[..., :3], t[..., :3])
    hi = torch.minimum(p[..., 3:], t[..., 3:])
    inter = torch.prod((hi - lo + extra).clamp(min=0), dim=-1)
    union = _volume(p, extra) + _volume(t, extra) - inter
    return torch.where(union > 0, inter / union.clamp(min=torch.finfo(torch.float64).tiny),
                       torch.zeros_like(inter))


def grounding_accuracy(ious: Any, thresholds: Sequence[float] = GROUNDING_THRESHOLDS) -> dict[str, float]:
    """``{"acc@t": share of IoUs >= t}`` for each threshold (NaN IoU = no box = a miss)."""
    v = torch.as_tensor(np.asarray(ious, dtype=np.float64))
    if v.numel() == 0:
        raise ValueError("grounding_accuracy: empty input (no IoUs)")
    v = torch.nan_to_num(v, nan=0.0)
    return {f"acc@{t:g}": float((v >= t).double().mean()) for t in thresholds}


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_BOX = re.compile(r"[\[(]\s*(" + _NUMBER + r"(?:\s*[,;]\s*" + _NUMBER + r"){5})\s*[\])]")


def parse_box_3d(text: str | None) -> np.ndarray | None:
    """The first bracketed list of exactly six numbers in ``text`` (``[x1, y1, z1, x2, y2, z2]``
    or with parentheses), as float64; None when there is none. Lists of other lengths are
    skipped, never truncated or padded."""
    if not text:
        return None
    m = _BOX.search(str(text))
    if m is None:
        return None
    return np.array([float(v) for v in re.split(r"\s*[,;]\s*", m.group(1).strip())], dtype=np.float64)


@register_metric("box_iou_3d", tags=("grounding", "detection", "3d"))
class BoxIoU3D(Metric):
    """Per question: IoU of the predicted 3D box with the reference, and whether it reaches each
    threshold. ``update(preds, targets)``: ``preds`` an ``(N, 6)`` array or a list whose items are
    6-vectors or None (the model gave no readable box: IoU 0, counted in ``no_box_rate``);
    ``targets`` ``(N, 6)`` reference boxes. Options: ``thresholds``, ``box_format``, ``inclusive``.
    Columns: ``iou``, ``acc@0.25``, ``acc@0.5`` (one per threshold), ``no_box_rate``."""

    name = "box_iou_3d"
    per_sample = True
    higher_is_better = True
    directions = MappingProxyType({"no_box_rate": False})  # answers without a readable box
    input_kind = "boxes"
    concat_updates = True

    def __init__(self, *, class_names: Sequence[str] | None = None,
                 thresholds: Sequence[float] = GROUNDING_THRESHOLDS, box_format: str = "xyzxyz",
                 inclusive: bool = False) -> None:
        super().__init__(class_names=None)
        if not thresholds or any(not 0 < float(t) <= 1 for t in thresholds):
            raise ValueError(f"{self.name}: thresholds must be in (0, 1], got {list(thresholds)}")
        if box_format not in _FORMATS:
            raise ValueError(f"{self.name}: box_format must be one of {_FORMATS}, got {box_format!r}")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.box_format, self.inclusive = box_format, bool(inclusive)
        self.add_state("rows", [], dist_reduce_fx="cat")

    @property
    def columns(self) -> tuple[str, ...]:
        return ("iou", *(f"acc@{t:g}" for t in self.thresholds), "no_box_rate")

    def _split(self, preds: Any, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Prediction boxes (missing ones as a dummy) and the mask of missing ones."""
        if isinstance(preds, list | tuple) and any(p is None for p in preds):
            missing = torch.tensor([p is None for p in preds])
            filled = [np.zeros(6) if p is None else np.asarray(p, dtype=np.float64).reshape(-1) for p in preds]
            return torch.as_tensor(np.stack(filled)), missing
        if isinstance(preds, list | tuple):
            preds = np.stack([np.asarray(p, dtype=np.float64).reshape(-1) for p in preds]) if len(preds) else \
                np.zeros((0, 6))
        t = torch.as_tensor(preds)
        return t, torch.zeros(t.shape[0] if t.ndim else 0, dtype=torch.bool)

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        target = _boxes(targets, name="target", box_format=self.box_format)
        pred, missing = self._split(preds, target.shape[0])
        if pred.ndim == 2 and pred.shape[0] != target.shape[0]:
            raise ValueError(f"{self.name}: pred and target lengths differ: {pred.shape[0]} vs {target.shape[0]}")
        iou = box_iou_3d(pred, target, box_format=self.box_format, inclusive=self.inclusive)
        iou = torch.where(missing, torch.zeros_like(iou), iou)
        cols = [iou, *((iou >= t).double() for t in self.thresholds), missing.double()]
        self._add_ids(ids, target.shape[0])
        self.rows.append(torch.stack(cols, 1))

    def _table(self) -> torch.Tensor:
        if not self.rows:
            raise ValueError(f"{self.name}: no boxes seen (compute before update)")
        return torch.cat(self.rows)

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        table = self._table()
        return {c: (list(self.ids), table[:, j:j + 1]) for j, c in enumerate(self.columns)}

    def values(self) -> tuple[list[str], torch.Tensor]:
        return list(self.ids), self._table()

    def compute(self) -> torch.Tensor:
        """Means of the columns: mean IoU, accuracy at each threshold, share without a box."""
        return self._table().mean(0)
