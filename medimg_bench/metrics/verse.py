"""VerSe labelling metrics from vertebra centroids: identification rate and localisation distance.

Rules of the official evaluation (``anjany/verse``, ``utils/eval_utilities.py::get_hits`` and
``utils/evaluate.ipynb`` at commit 02b292b8): a ground-truth vertebra ``v`` is *identified* when a
prediction of ``v`` exists, the ground-truth centroid nearest to it — among the vertebrae present
in **both** sets — is ``v``'s own (first index on ties), and that distance is ``<= 20`` mm; the
scan's id.rate is hits / number of ground-truth vertebrae. Centroids are compared in mm (the
challenge resampled to 1 mm, so voxel indices were mm; we use world coordinates, which gives the
same distances for any spacing).

Localisation distance: the repository ships no code for it (its notebook says so); we use the
definition of the VerSe benchmark papers as stated in ``docs/metrics.md``: the mean Euclidean
distance (mm) between the predicted and ground-truth centroid of each vertebra present in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = [
    "centroid_array",
    "centroids_from_labels",
    "verse_hits",
    "verse_id_rate",
    "verse_localisation_distance",
    "VerSeIdRate",
    "VerSeLocalisationDistance",
]

MAX_VERT_IDX = 28  # VerSe'20: T13 is label 28

Centroids = Mapping[int, Sequence[float]] | np.ndarray


def centroid_array(centroids: Centroids, *, max_label: int = MAX_VERT_IDX) -> np.ndarray:
    """``(max_label, 3)`` float64 array, row ``v - 1`` = centroid of label ``v`` (mm), NaN if absent.

    Accepts a mapping label → (x, y, z) or such an array already; labels above ``max_label``
    are dropped (as the official notebook does).
    """
    if isinstance(centroids, np.ndarray):
        arr = np.asarray(centroids, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise ValueError(f"centroid array must be (K, 3), got shape {arr.shape}")
        if arr.shape[0] != max_label:
            raise ValueError(f"centroid array has {arr.shape[0]} rows, expected {max_label}")
        return arr
    arr = np.full((max_label, 3), np.nan)
    for label, xyz in centroids.items():
        v = int(label)
        if v < 1:
            raise ValueError(f"vertebra labels start at 1, got {label!r}")
        if v > max_label:
            continue
        xyz = np.asarray(xyz, dtype=np.float64).reshape(-1)
        if xyz.shape != (3,) or not np.isfinite(xyz).all():
            raise ValueError(f"centroid of label {v} must be 3 finite numbers, got {xyz.tolist()}")
        arr[v - 1] = xyz
    return arr


def verse_hits(
    gt: Centroids, pred: Centroids, *, max_distance: float = 20.0, max_label: int = MAX_VERT_IDX
) -> tuple[int, np.ndarray]:
    """Identification hits of one scan: ``(hits, hit_list)``; ``hit_list[v - 1]`` is 1
    (identified), 0 (missed) or NaN (vertebra ``v`` not in the ground truth)."""
    g = centroid_array(gt, max_label=max_label)
    p = centroid_array(pred, max_label=max_label)
    in_gt = ~np.isnan(g[:, 0])
    both = np.flatnonzero(in_gt & ~np.isnan(p[:, 0]))
    hit_list = np.where(in_gt, 0.0, np.nan)
    if both.size == 0:
        return 0, hit_list
    # rows: predictions, columns: ground truth, both restricted to the shared vertebrae
    d = np.sqrt(((p[both][:, None, :] - g[both][None, :, :]) ** 2).sum(-1))
    own = np.arange(both.size)
    hit = (d.argmin(1) == own) & (d[own, own] <= max_distance)
    hit_list[both[hit]] = 1.0
    return int(hit.sum()), hit_list


def verse_id_rate(gt: Centroids, pred: Centroids, *, max_distance: float = 20.0) -> float:
    """Identification rate of one scan in [0, 1]: hits / ground-truth vertebrae (NaN if none)."""
    hits, hit_list = verse_hits(gt, pred, max_distance=max_distance)
    n = int(np.count_nonzero(~np.isnan(hit_list)))
    return hits / n if n else float("nan")


def verse_localisation_distance(gt: Centroids, pred: Centroids) -> float:
    """Mean distance (mm) between predicted and true centroids of the vertebrae in both sets
    (NaN when none is shared)."""
    g = centroid_array(gt)
    p = centroid_array(pred)
    both = ~np.isnan(g[:, 0]) & ~np.isnan(p[:, 0])
    if not both.any():
        return float("nan")
    return float(np.sqrt(((p[both] - g[both]) ** 2).sum(-1)).mean())


def centroids_from_labels(labels: Any, affine: Any = None, *, spacing: Sequence[float] | None = None) -> dict[int, np.ndarray]:
    """Centre of mass (world mm) of every positive label of a label map (3D, or 2D).

    ``affine``: voxel → world matrix (4×4; 3×3 for 2D); else ``spacing`` (mm per axis) scales
    voxel indices; else voxel indices are returned.
    """
    arr = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if arr.ndim not in (2, 3):
        raise ValueError(f"expected a 2D or 3D label map, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("label map has NaN or inf values")
    if (arr != np.round(arr)).any() or (arr < 0).any():
        raise ValueError("label map must hold non-negative integer labels")
    flat = arr.reshape(-1).astype(np.int64)
    keep = flat > 0
    lab = flat[keep]
    if lab.size == 0:
        return {}
    nd = arr.ndim
    idx = np.stack(np.unravel_index(np.flatnonzero(keep), arr.shape), 1).astype(np.float64)
    counts = np.bincount(lab)
    present = np.flatnonzero(counts)
    sums = np.stack([np.bincount(lab, weights=idx[:, a], minlength=counts.size) for a in range(nd)], 1)
    vox = sums[present] / counts[present, None]
    if affine is not None:
        aff = np.asarray(affine.cpu() if isinstance(affine, torch.Tensor) else affine, dtype=np.float64)
        if aff.shape != (nd + 1, nd + 1):
            raise ValueError(f"affine of shape {aff.shape} for a {nd}D label map")
        world = vox @ aff[:nd, :nd].T + aff[:nd, nd]
    elif spacing is not None:
        world = vox * np.asarray(spacing, dtype=np.float64)
    else:
        world = vox
    if nd == 2:  # centroids are 3D points: a 2D map lies in the plane z = 0
        world = np.concatenate([world, np.zeros((len(world), 1))], 1)
    return {int(v): world[i] for i, v in enumerate(present)}


def _case_centroids(pred: Any, target: Any, meta: Mapping[str, Any] | None) -> tuple[dict, dict]:
    meta = meta or {}
    affine, spacing = meta.get("affine"), meta.get("spacing")
    pred_c = centroids_from_labels(pred, affine, spacing=spacing)
    gt = meta.get("centroids_world") if affine is not None else None
    if gt is None:  # no centroid file: the ground-truth mask's centres of mass
        gt = centroids_from_labels(target, affine, spacing=spacing)
    return {int(k): v for k, v in gt.items()}, pred_c


class _VerSeBase(Metric):
    """Per-scan value from the predicted label map's centroids vs the dataset's centroid file
    (``meta["centroids_world"]``) or, without one, the ground-truth mask's centres of mass."""

    per_sample = True
    input_kind = "label_maps"
    concat_updates = False

    def __init__(self, *, num_classes: int | None = None, include_background: bool = False,
                 class_names: Sequence[str] | None = None, max_distance: float = 20.0) -> None:
        super().__init__(class_names=None)
        if not max_distance > 0:
            raise ValueError(f"{self.name}: max_distance must be > 0, got {max_distance}")
        self.max_distance = float(max_distance)
        self.add_state("scores", [], dist_reduce_fx="cat")

    def _value(self, gt: dict, pred: dict) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *,
               ids: Sequence[str] | None = None) -> None:
        """Score a batch of 3D label maps ``(B, X, Y, Z)`` (or a list of them)."""
        n = len(preds)
        if n == 0:
            raise ValueError(f"{self.name}: empty batch")
        if len(targets) != n:
            raise ValueError(f"{self.name}: batch lengths differ: {n} predictions for {len(targets)} targets")
        metas = list(meta) if meta is not None else [{}] * n
        vals = []
        for i in range(n):
            if tuple(preds[i].shape) != tuple(targets[i].shape):
                raise ValueError(f"{self.name}: pred and target shapes differ in sample {i}: "
                                 f"{tuple(preds[i].shape)} vs {tuple(targets[i].shape)}")
            gt, pred = _case_centroids(preds[i], targets[i], metas[i])
            vals.append(self._value(gt, pred))
        self._add_ids(ids, n)
        self.scores.append(torch.tensor(vals, dtype=torch.float64)[:, None])

    def values(self) -> tuple[list[str], torch.Tensor]:
        vals = torch.cat(self.scores) if self.scores else torch.empty(0, 1, dtype=torch.float64)
        return list(self.ids), vals

    def compute(self) -> torch.Tensor:
        """Mean over scans (NaN scans left out), ``(1,)``."""
        if not self.ids:
            raise ValueError(f"{self.name}: compute() called before any update() (no scans)")
        return self.values()[1].nanmean(0)


@register_metric("verse_id_rate", tags=("segmentation", "spine"))
class VerSeIdRate(_VerSeBase):
    """VerSe identification rate per scan (hits / ground-truth vertebrae), mean over scans."""

    name = "verse_id_rate"
    higher_is_better = True

    def _value(self, gt: dict, pred: dict) -> float:
        return verse_id_rate(gt, pred, max_distance=self.max_distance)


@register_metric("verse_localisation_distance", tags=("segmentation", "spine"))
class VerSeLocalisationDistance(_VerSeBase):
    """Mean centroid distance (mm) per scan over vertebrae in both sets, mean over scans."""

    name = "verse_localisation_distance"
    higher_is_better = False

    def _value(self, gt: dict, pred: dict) -> float:
        return verse_localisation_distance(gt, pred)
