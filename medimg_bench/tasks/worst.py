"""What a segmentation run keeps for its report's pictures: the worst cases as one 2-D slice each.

A run does not keep its predicted label maps, and the report never runs the model again, so the
segmentation task keeps, while it scores, the ``k`` cases with the lowest mean foreground Dice
seen so far (Dice from voxel counts, the metric's own definition; classes absent from both
reference and prediction left out). For each it keeps one slice — for a volume, the slice along
the last axis with the most voxels where reference and prediction disagree — of the image (first
channel, windowed to its 1st–99th percentile, ``uint8``), the reference and the prediction, at
most :data:`MAX_SIDE` pixels a side (every n-th pixel beyond). At the end of the run
``write`` puts them in ``worst/segmentation.npz`` (arrays, no pickle) and
``worst/segmentation.json`` (ids, slice, class names): at most ``k × 3 × 384²`` bytes before
compression.

Only what the process that writes the run directory scored is kept: after ``resume=`` the cases
of the resumed part, under ``torchrun`` rank 0's share, and a ``merge`` of shards none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench._fs import atomic_path

__all__ = ["WorstSlices", "MAX_SIDE", "WORST_DIR"]

#: longest side of a kept slice (pixels); larger slices keep every n-th pixel
MAX_SIDE = 384
#: folder of the run directory holding what the report pictures
WORST_DIR = "worst"


def _confusion(pred: torch.Tensor, target: torch.Tensor, k: int) -> np.ndarray:
    """``(B, k, k)`` voxel counts of (predicted, reference) label pairs in ``0..k-1`` per case."""
    b = pred.shape[0]
    if pred.is_cuda:  # one bincount on the device: no volume leaves the GPU
        p, t = pred.reshape(b, -1).long(), target.reshape(b, -1).long()
        code = p * k + t + torch.arange(b, device=p.device)[:, None] * (k * k)
        code = torch.where((p >= 0) & (p < k) & (t >= 0) & (t < k), code, b * k * k)
        return torch.bincount(code.reshape(-1), minlength=b * k * k + 1)[: b * k * k].reshape(b, k, k).cpu().numpy()
    out = np.empty((b, k, k), dtype=np.int64)
    for i in range(b):  # numpy's bincount is several times faster than torch's on the CPU
        p = pred[i].reshape(-1).numpy().astype(np.int64)
        t = target[i].reshape(-1).numpy().astype(np.int64)
        code = p * k + t
        ok = (p >= 0) & (p < k) & (t >= 0) & (t < k)
        out[i] = np.bincount(code if ok.all() else code[ok], minlength=k * k).reshape(k, k)
    return out


def case_dice(pred: torch.Tensor, target: torch.Tensor, k: int, first: int) -> np.ndarray:
    """``(B,)`` mean Dice over classes ``first..k-1`` present in reference or prediction (NaN
    where none is)."""
    conf = _confusion(pred, target, k).astype(np.float64)
    inter = np.diagonal(conf, axis1=1, axis2=2)[:, first:]
    total = (conf.sum(2) + conf.sum(1))[:, first:]
    present = total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        dice = np.where(present, 2 * inter / np.maximum(total, 1), 0.0)
        return np.where(present.any(1), dice.sum(1) / present.sum(1), np.nan)


def _shrink(a: np.ndarray) -> np.ndarray:
    step = max(1, math.ceil(max(a.shape) / MAX_SIDE))
    return np.ascontiguousarray(a[::step, ::step])


def _window(image: np.ndarray) -> np.ndarray:
    lo, hi = np.percentile(image, [1, 99]) if image.size else (0.0, 1.0)
    if not hi > lo:
        lo, hi = float(image.min(initial=0.0)), float(image.max(initial=0.0)) + 1e-6
    return np.clip(np.rint((image - lo) / (hi - lo) * 255.0), 0, 255).astype(np.uint8)


def _slice_of(pred: torch.Tensor, target: torch.Tensor) -> int | None:
    """Index along the last axis of a volume with the most disagreement (then the most
    foreground); None for a 2-D label map."""
    if pred.ndim < 3:
        return None
    p = pred.cpu().numpy().reshape(-1, pred.shape[-1])  # numpy: torch's bool sums are slow on the CPU
    t = target.cpu().numpy().reshape(-1, pred.shape[-1])
    wrong = np.count_nonzero(p != t, axis=0).astype(np.float64)
    fg = np.count_nonzero((p > 0) | (t > 0), axis=0).astype(np.float64)
    return int(np.argmax(wrong * (fg.max() + 1) + fg))


class WorstSlices:
    """The ``k`` worst cases seen (lowest mean foreground Dice), one slice each (module
    docstring); ``offer`` them batch by batch, ``write`` them at the end."""

    def __init__(self, *, k: int = 8) -> None:
        self.k = max(0, int(k))
        self.kept: dict[str, dict[str, Any]] = {}
        self.classes: list[str] = []
        self.first = 1

    def _worst_score(self) -> float:
        return max(c["score"] for c in self.kept.values()) if self.kept else math.inf

    def offer(self, batch: dict[str, Any], pred: torch.Tensor, target: torch.Tensor,
              classes: Sequence[str], first: int) -> None:
        """Consider the cases of one scored batch (``pred`` / ``target``: ``(B, *spatial)``)."""
        if not self.k:
            return
        self.classes, self.first = list(classes), int(first)
        scores = case_dice(pred, target, len(classes), first)
        image = batch.get("image")
        for i, sid in enumerate(batch["id"]):
            score = float(scores[i])
            if math.isnan(score) or (len(self.kept) >= self.k and score >= self._worst_score()):
                continue
            self.kept[str(sid)] = self._picture(image, i, pred[i], target[i], score)
            if len(self.kept) > self.k:
                worst_kept = max(self.kept, key=lambda s: (self.kept[s]["score"], s))
                del self.kept[worst_kept]

    @staticmethod
    def _picture(image: Any, i: int, pred: torch.Tensor, target: torch.Tensor, score: float) -> dict[str, Any]:
        z = _slice_of(pred, target)
        p, t = (pred[..., z], target[..., z]) if z is not None else (pred, target)
        picture: dict[str, Any] = {"score": score, "slice": z, "shape": list(pred.shape),
                                   "reference": _shrink(t.to(torch.uint8).cpu().numpy()),
                                   "prediction": _shrink(p.to(torch.uint8).cpu().numpy())}
        one = image[i] if image is not None else None
        if isinstance(one, torch.Tensor) and tuple(one.shape[1:]) == tuple(pred.shape):
            img = one[0, ..., z] if z is not None else one[0]
            picture["image"] = _shrink(_window(img.detach().float().cpu().numpy()))
        return picture

    def write(self, out_dir: str | Path) -> list[Path]:
        """``segmentation.npz`` + ``segmentation.json`` under ``out_dir``; nothing when no case
        was kept. Returns the files written."""
        if not self.kept:
            return []
        out_dir = Path(out_dir)
        order = sorted(self.kept, key=lambda s: (self.kept[s]["score"], s))
        arrays: dict[str, np.ndarray] = {}
        index = []
        for j, sid in enumerate(order):
            c = self.kept[sid]
            for key in ("image", "reference", "prediction"):
                if key in c:
                    arrays[f"{key}_{j}"] = c[key]
            index.append({"id": sid, "dice": c["score"], "slice": c["slice"], "axis": "last" if c["slice"] is not None else None,
                          "shape": c["shape"], "has_image": "image" in c})
        npz, meta = out_dir / "segmentation.npz", out_dir / "segmentation.json"
        out_dir.mkdir(parents=True, exist_ok=True)
        _replace(npz, lambda tmp: np.savez_compressed(tmp, **arrays))
        info = {"cases": index, "classes": self.classes, "first_class": self.first,
                "rule": "lowest mean foreground Dice (voxel counts), one slice per case: the last "
                        "axis's slice with the most disagreement", "max_side": MAX_SIDE}
        _replace(meta, lambda tmp: tmp.write_text(json.dumps(info, indent=2), encoding="utf-8"))
        return [npz, meta]


def _replace(path: Path, write: Any) -> None:
    """``write(tmp)`` to a temporary name beside ``path``, then rename: a reader sees the old
    file or the new one (files get the umask's mode, like the run's other files)."""
    with atomic_path(path, fsync=False) as tmp:
        write(tmp)
