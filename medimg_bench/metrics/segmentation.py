"""Segmentation metrics: overlap (Dice, IoU, precision, recall, volume difference) and surface
distances (Hausdorff, HD95, ASSD, MASD, NSD) under named conventions.

Functional forms take integer label maps ``(B, *spatial)`` (or one ``(*spatial)`` case, or
one-hot ``(B, C, *spatial)`` with ``one_hot=True``, or a list of differently sized cases) and
return a float64 ``(B, C)`` tensor on the input's device; ``C`` excludes class 0 unless
``include_background=True``. Distances are in millimetres (``spacing``: mm per spatial axis,
one tuple for the batch or one per case). ``convention`` picks the rules of a peer library —
``"default"``, ``"monai"`` (MONAI's ``ignore_empty=True``), ``"monai_ignore_empty_false"``, ``"deepmind"``, ``"medpy"``, ``"metrics_reloaded"`` (MetricsReloaded's
main branch), ``"metrics_reloaded_00219d0"``, ``"brats"`` (see
:mod:`medimg_bench.metrics.seg_conventions` and ``docs/metrics.md``). An option a metric does not
read (e.g. ``percentile`` for Dice) is an error naming it.
:func:`segmentation_scores` computes several metrics from one surface extraction per class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from medimg_bench.metrics._seg_core import (
    STATUS_ABSENT,
    STATUS_PRED_EMPTY,
    STATUS_TARGET_EMPTY,
    SegOptions,
    check_options,
    compute_scores,
    resolve_backend,
)
from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.seg_conventions import SEG_METRIC_NAMES, SegConvention
from medimg_bench.registry import register_metric

__all__ = [
    "dice",
    "iou",
    "precision",
    "recall",
    "volume_difference",
    "hausdorff_distance",
    "hd95",
    "assd",
    "masd",
    "nsd",
    "segmentation_scores",
    "SegmentationMetrics",
    "Dice",
    "IoU",
    "Precision",
    "Recall",
    "VolumeDifference",
    "Hausdorff",
    "HD95",
    "ASSD",
    "MASD",
    "NSD",
]

Convention = str | SegConvention


def segmentation_scores(
    pred: Any,
    target: Any,
    *,
    metrics: Sequence[str] = ("dice", "hd95", "assd", "nsd"),
    num_classes: int | None = None,
    include_background: bool = False,
    spacing: Any = None,
    one_hot: bool = False,
    spatial_dims: int | None = None,
    convention: Convention = "default",
    percentile: float | None = None,
    tolerance: float | Sequence[float] | None = None,
    directed: bool = False,
    empty_distance: float | None = None,
    relative: bool | None = None,
    distance_metric: str | None = None,
    backend: str = "auto",
    chunk_mb: float | None = None,
) -> dict[str, torch.Tensor]:
    """Several metrics at once: ``{name: (B, C) float64 tensor}`` on the input's device.

    Names: ``dice``, ``iou``, ``precision``, ``recall``, ``volume_difference`` (relative
    ``(Vp - Vt) / Vt``, or mm³ with ``relative=False``), ``hausdorff`` (max, or the
    ``percentile``), ``hd95`` (``percentile`` or 95), ``assd``, ``masd`` (mm) and ``nsd``
    (fraction of surface within ``tolerance`` mm: one number, or one per scored class; default
    1). ``directed=True`` keeps prediction → target distances only (NSD: the share of the
    prediction's surface within the tolerance). ``distance_metric``: ``"euclidean"`` (default),
    ``"chessboard"`` or ``"taxicab"`` (conventions ``default`` and ``monai``). ``spatial_dims``
    (2 or 3) resolves a 3-D tensor between a batch of 2D images (the default) and one volume; a
    flat ``spacing`` resolves it too. ``empty_distance`` (mm) replaces the convention's empty
    distance for a one-sided miss (default: the image diagonal in mm). An option that none of
    ``metrics`` reads under ``convention`` is a ``ValueError`` naming it. ``backend``:
    ``"kdtree"`` (surfaces and nearest-neighbour search on the CPU), ``"torch"`` (torch ops on
    the input's device) or ``"auto"`` (torch for CUDA tensors, kdtree for CPU ones).
    ``chunk_mb`` bounds the torch backend's temporaries (MiB; default 256 on GPUs).
    """
    opts = SegOptions(
        metrics=tuple(metrics), num_classes=num_classes, include_background=include_background,
        spacing=spacing, one_hot=one_hot, spatial_dims=spatial_dims, convention=convention,
        percentile=percentile, tolerance=tolerance, directed=directed,
        empty_distance=empty_distance, relative=relative, distance_metric=distance_metric,
        backend=backend, chunk_mb=chunk_mb,
    )
    scores, _ = compute_scores(pred, target, opts)
    return scores


def _one(metric: str, pred: Any, target: Any, **kw: Any) -> torch.Tensor:
    return segmentation_scores(pred, target, metrics=(metric,), **kw)[metric]


def dice(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
         one_hot: bool = False, spatial_dims: int | None = None, convention: Convention = "default",
         backend: str = "auto") -> torch.Tensor:
    """Dice ``2|P∩T| / (|P| + |T|)`` per case and class, ``(B, C)``."""
    return _one("dice", pred, target, num_classes=num_classes, include_background=include_background,
                one_hot=one_hot, spatial_dims=spatial_dims, convention=convention, backend=backend)


def iou(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
        one_hot: bool = False, spatial_dims: int | None = None, convention: Convention = "default",
        backend: str = "auto") -> torch.Tensor:
    """Intersection over union (Jaccard) ``|P∩T| / |P∪T|`` per case and class, ``(B, C)``."""
    return _one("iou", pred, target, num_classes=num_classes, include_background=include_background,
                one_hot=one_hot, spatial_dims=spatial_dims, convention=convention, backend=backend)


def precision(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
              one_hot: bool = False, spatial_dims: int | None = None,
              convention: Convention = "default", backend: str = "auto") -> torch.Tensor:
    """Voxel precision ``|P∩T| / |P|`` per case and class, ``(B, C)``."""
    return _one("precision", pred, target, num_classes=num_classes, include_background=include_background,
                one_hot=one_hot, spatial_dims=spatial_dims, convention=convention, backend=backend)


def recall(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
           one_hot: bool = False, spatial_dims: int | None = None,
           convention: Convention = "default", backend: str = "auto") -> torch.Tensor:
    """Voxel recall (sensitivity) ``|P∩T| / |T|`` per case and class, ``(B, C)``."""
    return _one("recall", pred, target, num_classes=num_classes, include_background=include_background,
                one_hot=one_hot, spatial_dims=spatial_dims, convention=convention, backend=backend)


def volume_difference(pred: Any, target: Any, *, num_classes: int | None = None,
                      include_background: bool = False, spacing: Any = None, relative: bool = True,
                      one_hot: bool = False, spatial_dims: int | None = None,
                      convention: Convention = "default", backend: str = "auto") -> torch.Tensor:
    """Signed volume difference: ``(Vp - Vt) / Vt`` (``relative``) or ``Vp - Vt`` in mm³."""
    return _one("volume_difference", pred, target, num_classes=num_classes,
                include_background=include_background, spacing=spacing, relative=relative,
                one_hot=one_hot, spatial_dims=spatial_dims, convention=convention, backend=backend)


def hausdorff_distance(pred: Any, target: Any, *, num_classes: int | None = None,
                       include_background: bool = False, spacing: Any = None,
                       percentile: float | None = None, directed: bool = False,
                       distance_metric: str = "euclidean", one_hot: bool = False,
                       spatial_dims: int | None = None, convention: Convention = "default",
                       empty_distance: float | None = None, backend: str = "auto") -> torch.Tensor:
    """Hausdorff distance in mm, ``(B, C)``; the ``percentile`` (0-100) instead of the max.

    ``directed=True`` keeps only prediction → target distances.
    """
    return _one("hausdorff", pred, target, num_classes=num_classes,
                include_background=include_background, spacing=spacing, percentile=percentile,
                directed=directed, distance_metric=distance_metric, one_hot=one_hot,
                spatial_dims=spatial_dims, convention=convention, empty_distance=empty_distance,
                backend=backend)


def hd95(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
         spacing: Any = None, percentile: float = 95.0, directed: bool = False,
         distance_metric: str = "euclidean", one_hot: bool = False, spatial_dims: int | None = None,
         convention: Convention = "default", empty_distance: float | None = None,
         backend: str = "auto") -> torch.Tensor:
    """95th-percentile Hausdorff distance in mm, ``(B, C)`` (percentile rule per convention);
    ``directed=True`` keeps only prediction → target distances."""
    return _one("hd95", pred, target, num_classes=num_classes, include_background=include_background,
                spacing=spacing, percentile=percentile, directed=directed,
                distance_metric=distance_metric, one_hot=one_hot, spatial_dims=spatial_dims,
                convention=convention, empty_distance=empty_distance, backend=backend)


def assd(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
         spacing: Any = None, directed: bool = False, distance_metric: str = "euclidean",
         one_hot: bool = False, spatial_dims: int | None = None, convention: Convention = "default",
         empty_distance: float | None = None, backend: str = "auto") -> torch.Tensor:
    """Average symmetric surface distance in mm, ``(B, C)``: the mean over both surfaces' points
    pooled; ``directed=True``: the mean distance of the prediction's surface to the target's."""
    return _one("assd", pred, target, num_classes=num_classes, include_background=include_background,
                spacing=spacing, directed=directed, distance_metric=distance_metric, one_hot=one_hot,
                spatial_dims=spatial_dims, convention=convention, empty_distance=empty_distance,
                backend=backend)


def masd(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
         spacing: Any = None, directed: bool = False, distance_metric: str = "euclidean",
         one_hot: bool = False, spatial_dims: int | None = None, convention: Convention = "default",
         empty_distance: float | None = None, backend: str = "auto") -> torch.Tensor:
    """Mean average surface distance (mean of the two directed means) in mm, ``(B, C)``;
    ``directed=True``: the prediction → target mean only."""
    return _one("masd", pred, target, num_classes=num_classes, include_background=include_background,
                spacing=spacing, directed=directed, distance_metric=distance_metric, one_hot=one_hot,
                spatial_dims=spatial_dims, convention=convention, empty_distance=empty_distance,
                backend=backend)


def nsd(pred: Any, target: Any, *, num_classes: int | None = None, include_background: bool = False,
        spacing: Any = None, tolerance: float | Sequence[float] = 1.0, directed: bool = False,
        distance_metric: str = "euclidean", one_hot: bool = False, spatial_dims: int | None = None,
        convention: Convention = "default", backend: str = "auto") -> torch.Tensor:
    """Normalised surface distance (surface Dice) at ``tolerance`` mm (one number, or one per
    scored class), in [0, 1], ``(B, C)``; ``directed=True``: the share of the prediction's
    surface within the tolerance of the target's (DeepMind's surface overlap)."""
    return _one("nsd", pred, target, num_classes=num_classes, include_background=include_background,
                spacing=spacing, tolerance=tolerance, directed=directed,
                distance_metric=distance_metric, one_hot=one_hot, spatial_dims=spatial_dims,
                convention=convention, backend=backend)


# -- stateful -------------------------------------------------------------------------------------
def _meta_spacing(meta: Sequence[dict] | None, n: int, ndim: int) -> list[tuple[float, ...]]:
    out = []
    for i in range(n):
        sp = (meta[i] or {}).get("spacing") if meta is not None and i < len(meta) else None
        if sp is None:
            out.append((1.0,) * ndim)
            continue
        if isinstance(sp, torch.Tensor):
            sp = sp.detach().cpu().tolist()
        sp = [float(v) for v in (sp if isinstance(sp, list | tuple) else list(sp))]
        if len(sp) != ndim:
            raise ValueError(f"meta[{i}]['spacing'] has {len(sp)} values for {ndim} spatial axes")
        out.append(tuple(sp))
    return out


class _SegBase(Metric):
    """Shared stateful machinery: per-sample values of several metrics plus empty-mask status."""

    metric_names: tuple[str, ...] = ()
    input_kind = "label_maps"

    def __init__(
        self,
        *,
        num_classes: int,
        include_background: bool = False,
        class_names: Sequence[str] | None = None,
        convention: Convention = "default",
        percentile: float | None = None,
        tolerance: float | Sequence[float] | None = None,
        directed: bool = False,
        empty_distance: float | None = None,
        relative: bool | None = None,
        distance_metric: str | None = None,
        one_hot: bool = False,
        backend: str = "auto",
        chunk_mb: float | None = None,
    ) -> None:
        super().__init__(class_names=class_names)
        if num_classes < 1 or num_classes - (0 if include_background else 1) < 1:
            raise ValueError(f"{self.name}: num_classes={num_classes} leaves no class to score")
        resolve_backend(backend, torch.device("cpu"))  # an unknown backend fails here, not in update
        options = dict(percentile=percentile, tolerance=tolerance, directed=directed,
                       empty_distance=empty_distance, relative=relative,
                       distance_metric=distance_metric)
        try:  # an option the metric does not read fails here, not in update
            check_options(self.metric_names, convention, **options)
        except ValueError as err:
            raise ValueError(f"{self.name}: {err}") from None
        self.num_classes = num_classes
        self.include_background = include_background
        self.options = dict(convention=convention, backend=backend, chunk_mb=chunk_mb, **options)
        self.one_hot = one_hot
        for m in self.metric_names:
            self.add_state(f"scores_{m}", [], dist_reduce_fx="cat")
        self.add_state("status_codes", [], dist_reduce_fx="cat")

    @property
    def n_classes_out(self) -> int:
        return self.num_classes - (0 if self.include_background else 1)

    def update(self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *,
               ids: Sequence[str] | None = None) -> None:
        """Score a batch ``(B, *spatial)``; spacing per case from ``meta[i]["spacing"]`` (mm)."""
        p = preds if isinstance(preds, torch.Tensor) else torch.as_tensor(preds)
        ndim = p.ndim - (2 if self.one_hot else 1)
        spacing = _meta_spacing(meta, p.shape[0], ndim)
        opts = SegOptions(metrics=tuple(self.metric_names), num_classes=self.num_classes,
                          include_background=self.include_background, spacing=spacing,
                          one_hot=self.one_hot, spatial_dims=ndim, **self.options)
        scores, status = compute_scores(p, targets, opts)
        self._add_ids(ids, status.shape[0])
        for m in self.metric_names:
            getattr(self, f"scores_{m}").append(scores[m])
        self.status_codes.append(status)

    def _cat(self, state: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        if not state:
            return torch.empty(0, self.n_classes_out, dtype=dtype)
        return torch.cat([s.to(state[0].device) for s in state])

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        """Per metric: the sample ids and a ``(N, C)`` float64 tensor (NaN = undefined)."""
        ids = list(self.ids)
        return {m: (ids, self._cat(getattr(self, f"scores_{m}"), torch.float64))
                for m in self.metric_names}

    def status(self) -> dict[str, list[int]]:
        """Per-class counts: ``absent`` (both masks empty), ``missed`` (exactly one empty), and
        its two parts ``pred_empty`` / ``target_empty``."""
        codes = self._cat(self.status_codes, torch.int8).cpu()
        pe = (codes == STATUS_PRED_EMPTY).sum(0)
        te = (codes == STATUS_TARGET_EMPTY).sum(0)
        return {
            "absent": (codes == STATUS_ABSENT).sum(0).tolist(),
            "missed": (pe + te).tolist(),
            "pred_empty": pe.tolist(),
            "target_empty": te.tolist(),
        }

    def values(self) -> tuple[list[str], torch.Tensor]:
        return self.metric_values()[self.metric_names[0]]

    def compute(self) -> torch.Tensor:
        """NaN-aware mean per class of the (first) metric, ``(C,)``."""
        if not self.ids:
            raise ValueError(f"{self.name}: compute() called before any update() (no cases)")
        return self.values()[1].nanmean(0)


class SegmentationMetrics(_SegBase):
    """Several segmentation metrics from one surface extraction per class and case.

    ``metrics``: names from :data:`SEG_METRIC_NAMES`; :meth:`metric_values` gives each one's
    per-sample values, :meth:`compute_all` the NaN-aware mean per class of each.
    """

    name = "segmentation"
    per_sample = True
    higher_is_better = None

    def __init__(self, *, num_classes: int, metrics: Sequence[str] = ("dice", "hd95", "assd", "nsd"),
                 **kwargs: Any) -> None:
        names = tuple(dict.fromkeys(metrics))
        bad = [m for m in names if m not in SEG_METRIC_NAMES]
        if bad or not names:
            raise ValueError(f"segmentation: unknown metric(s) {bad}; expected {SEG_METRIC_NAMES}")
        self.metric_names = names
        super().__init__(num_classes=num_classes, **kwargs)

    def higher_is_better_of(self, name: str) -> bool | None:
        """Direction of one of the combined metrics: that of its stand-alone class."""
        from medimg_bench.registry import METRICS

        return METRICS.get(name).higher_is_better if name in METRICS else None

    def range_of(self, name: str) -> tuple[float, float]:
        """Bounds of one of the combined metrics: those of its stand-alone class."""
        from medimg_bench.registry import METRICS

        return METRICS.get(name).value_range if name in METRICS else (-math.inf, math.inf)

    def compute_all(self) -> dict[str, torch.Tensor]:
        """``{metric: (C,) NaN-aware mean per class}``."""
        return {m: v.nanmean(0) for m, (_, v) in self.metric_values().items()}


register_metric("segmentation", tags=("segmentation",))(SegmentationMetrics)


def _make(metric: str, cls_name: str, higher: bool | None, doc: str) -> type[_SegBase]:
    bounds = (0.0, math.inf) if metric in ("hausdorff", "hd95", "assd", "masd") else (-math.inf, math.inf) if metric == "volume_difference" \
        else (0.0, 1.0)
    cls = type(cls_name, (_SegBase,), {
        "name": metric, "per_sample": True, "higher_is_better": higher, "value_range": bounds,
        "metric_names": (metric,), "__doc__": doc, "__module__": __name__,
    })
    register_metric(metric, tags=("segmentation",))(cls)
    return cls


Dice = _make("dice", "Dice", True, "Stateful Dice per sample and class.")
IoU = _make("iou", "IoU", True, "Stateful IoU (Jaccard) per sample and class.")
Precision = _make("precision", "Precision", True, "Stateful voxel precision per sample and class.")
Recall = _make("recall", "Recall", True, "Stateful voxel recall per sample and class.")
VolumeDifference = _make("volume_difference", "VolumeDifference", None,  # signed: 0 is best
                         "Stateful signed volume difference per sample and class.")
Hausdorff = _make("hausdorff", "Hausdorff", False, "Stateful Hausdorff distance (mm); `percentile`.")
HD95 = _make("hd95", "HD95", False, "Stateful 95th-percentile Hausdorff distance (mm).")
ASSD = _make("assd", "ASSD", False, "Stateful average symmetric surface distance (mm).")
MASD = _make("masd", "MASD", False, "Stateful mean average surface distance (mm).")
NSD = _make("nsd", "NSD", True, "Stateful normalised surface distance at `tolerance` mm.")
