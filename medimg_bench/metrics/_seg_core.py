"""Input checking and the one-pass computation behind every segmentation metric.

:func:`compute_scores` validates a batch and its :class:`SegOptions` (an option that none of the
metrics asked reads is an error naming it: :func:`check_options`), counts overlaps per class on
the input's device (``torch.bincount``) and, when a distance metric is asked for, extracts each
class's surfaces once and derives every distance metric from the same distances: on the CPU with
a KD-tree (``backend="kdtree"``) or with torch on the input's device (``backend="torch"``,
chunked brute force or distance transforms; all classes of a batch at once on a GPU);
``"auto"`` picks torch for non-CPU tensors.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics import _surface_batched
from medimg_bench.metrics._surface import (
    DistanceRules,
    SurfaceDistances,
    class_surface_distances,
    distance_metric_value,
    edt_corner_nsd,
    minkowski_p,
)
from medimg_bench.metrics._surface_batched import Item, distance_metrics
from medimg_bench.metrics._surface_torch import (
    label_boxes_torch,
    onehot_boxes_torch,
    surface_distance_tensors,
)
from medimg_bench.metrics.seg_conventions import (
    DISTANCE_METRICS,
    EDT_CORNER,
    EMPTY_DISTANCE,
    OPTION_USERS,
    SEG_METRIC_NAMES,
    SegConvention,
    get_convention,
)

__all__ = ["SegOptions", "check_options", "compute_scores", "resolve_backend", "BACKENDS", "STATUS_OK",
           "STATUS_ABSENT", "STATUS_PRED_EMPTY", "STATUS_TARGET_EMPTY"]

STATUS_OK, STATUS_ABSENT, STATUS_PRED_EMPTY, STATUS_TARGET_EMPTY = 0, 1, 2, 3
_OVERLAP = ("dice", "iou", "precision", "recall", "volume_difference")
_DIST = ("hausdorff", "hd95", "assd", "masd", "nsd")
BACKENDS = ("auto", "kdtree", "torch")


def resolve_backend(backend: str, device: torch.device) -> str:
    """``"kdtree"`` or ``"torch"``: ``"auto"`` is torch for non-CPU (CUDA) tensors, else kdtree."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {list(BACKENDS)}")
    if backend == "auto":
        return "kdtree" if device.type == "cpu" else "torch"
    return backend


def _as_tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, np.ndarray | np.generic | list | tuple):
        arr = np.asarray(x)
        if arr.dtype == object:
            raise ValueError(f"{name}: items disagree on shape or dimensionality")
        return torch.from_numpy(np.ascontiguousarray(arr))
    raise ValueError(f"{name}: expected a tensor or array, got {type(x).__name__}")


def _split_cases(x: Any, name: str, spatial_dims: int | None, one_hot: bool) -> list[torch.Tensor]:
    """One tensor per case: ``(*spatial)`` label maps or ``(C, *spatial)`` one-hot stacks."""
    if isinstance(x, list | tuple) and x and not isinstance(x[0], int | float | bool):
        cases = [_as_tensor(c, f"{name}[{i}]") for i, c in enumerate(x)]
        dims = {c.ndim for c in cases}
        if len(dims) > 1:
            raise ValueError(f"{name}: batch items disagree on dimensionality: {sorted(dims)}")
        return cases
    t = _as_tensor(x, name)
    extra = 1 if one_hot else 0
    if spatial_dims is None:
        spatial_dims = 3 if t.ndim >= 4 + extra else 2
    if t.ndim == spatial_dims + extra:
        return [t]
    if t.ndim != spatial_dims + extra + 1:
        layout = "(B, C, *spatial)" if one_hot else "(B, *spatial)"
        raise ValueError(
            f"{name}: expected {layout} or one case with {spatial_dims} spatial dims, "
            f"got shape {tuple(t.shape)}"
        )
    return list(t.unbind(0))


def _check_labels(t: torch.Tensor, name: str, num_classes: int, one_hot: bool) -> torch.Tensor:
    if t.is_complex():
        raise ValueError(f"{name}: complex values where labels are expected")
    if t.is_floating_point():
        if not torch.isfinite(t).all():
            raise ValueError(f"{name}: NaN or inf values where labels are expected")
        if not one_hot:
            raise ValueError(f"{name}: must be an integer label map, got {t.dtype}")
        if not ((t == 0) | (t == 1)).all():
            raise ValueError(f"{name}: one-hot input must hold only 0 and 1")
        return t.bool()
    if one_hot:
        if t.dtype != torch.bool and t.numel() and (int(t.min()) < 0 or int(t.max()) > 1):
            raise ValueError(f"{name}: one-hot input must hold only 0 and 1")
        return t.bool()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= num_classes:
            raise ValueError(
                f"{name}: label outside [0, {num_classes}) (min {lo}, max {hi})"
            )
    return t


def _spacings(spacing: Any, n: int, ndims: list[int]) -> list[tuple[float, ...]]:
    """Per-case spacing tuples (mm); one value, one tuple for all, or one tuple per case."""
    if spacing is None:
        return [(1.0,) * d for d in ndims]
    if isinstance(spacing, torch.Tensor):
        spacing = spacing.detach().cpu().tolist()
    if isinstance(spacing, np.ndarray):
        spacing = spacing.tolist()
    if isinstance(spacing, int | float):
        per = [tuple([float(spacing)] * d) for d in ndims]
    elif spacing and isinstance(spacing[0], list | tuple | np.ndarray | torch.Tensor):
        if len(spacing) != n:
            raise ValueError(f"spacing: got {len(spacing)} per-case spacings for {n} cases")
        per = [tuple(float(v) for v in np.asarray(s, dtype=np.float64).ravel()) for s in spacing]
    else:
        per = [tuple(float(v) for v in spacing)] * n
    for i, (s, d) in enumerate(zip(per, ndims)):
        if len(s) != d:
            raise ValueError(f"spacing of case {i}: {len(s)} values for {d} spatial axes: {s}")
        if not all(math.isfinite(v) and v > 0 for v in s):
            raise ValueError(f"spacing of case {i}: values must be finite and > 0, got {s}")
    return per


def _bbox(mask: np.ndarray) -> tuple[slice, ...] | None:
    idx = [np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != ax)))
           for ax in range(mask.ndim)]
    if any(len(i) == 0 for i in idx):
        return None
    return tuple(slice(int(i[0]), int(i[-1]) + 1) for i in idx)


def _union(a: tuple[slice, ...] | None, b: tuple[slice, ...] | None) -> tuple[slice, ...] | None:
    if a is None:
        return b
    if b is None:
        return a
    return tuple(slice(min(x.start, y.start), max(x.stop, y.stop)) for x, y in zip(a, b))


def _label_boxes(lab: np.ndarray, classes: list[int]) -> dict[int, tuple[slice, ...] | None]:
    from scipy import ndimage

    top = max(classes)
    lab = lab if lab.dtype in (np.int32, np.int64) else lab.astype(np.int32)
    objs = ndimage.find_objects(lab, max_label=top) if top > 0 else []
    boxes: dict[int, tuple[slice, ...] | None] = {}
    for c in classes:
        boxes[c] = _bbox(lab == 0) if c == 0 else objs[c - 1]
    return boxes


def _overlap_counts(p: torch.Tensor, t: torch.Tensor, k: int, one_hot: bool) -> np.ndarray:
    """``(3, K)`` int64: true positives, |pred|, |target| per class.

    Label maps: one joint histogram of ``pred * K + target`` (NumPy on the CPU, ``torch`` on
    the input's device); one-hot: channel sums.
    """
    if one_hot:
        dims = tuple(range(1, p.ndim))
        return torch.stack([(p & t).sum(dims), p.sum(dims), t.sum(dims)]).long().cpu().numpy()
    if k * k <= 1 << 22:
        if p.device.type == "cpu":
            joint = np.bincount((p.numpy().astype(np.int64, copy=False) * k + t.numpy()).ravel(),
                                minlength=k * k)
        else:
            # most voxels are background in both: histogram the rest only (atomic contention on
            # one bin makes a full-volume bincount ~10x slower on a GPU), count (0, 0) by difference
            key = (p.long() * k + t.long()).reshape(-1)
            joint = torch.bincount(key[key != 0], minlength=k * k).cpu().numpy()
            joint[0] = key.numel() - joint.sum()
        joint = joint.reshape(k, k)
        return np.stack([np.diagonal(joint), joint.sum(1), joint.sum(0)])
    pf, tf = p.reshape(-1).long(), t.reshape(-1).long()
    tp = torch.bincount(pf[pf == tf], minlength=k)
    counts = torch.stack([tp, torch.bincount(pf, minlength=k), torch.bincount(tf, minlength=k)])
    return counts.cpu().numpy()


def _overlap_value(metric: str, tp: int, n_p: int, n_t: int, voxel_mm3: float, relative: bool) -> float:
    if metric == "dice":
        return 2.0 * tp / (n_p + n_t)
    if metric == "iou":
        return tp / (n_p + n_t - tp)
    if metric == "precision":
        return tp / n_p if n_p else math.nan
    if metric == "recall":
        return tp / n_t if n_t else math.nan
    if relative:
        return (n_p - n_t) / n_t if n_t else math.nan
    return (n_p - n_t) * voxel_mm3


@dataclass(frozen=True)
class SegOptions:
    """What :func:`compute_scores` needs besides the masks; ``None`` means "not given" (the
    metric's default: percentile max / 95, tolerance 1 mm, relative volume difference,
    Euclidean distances). See :func:`medimg_bench.metrics.segmentation.segmentation_scores`."""

    metrics: tuple[str, ...] = ("dice", "hd95", "assd", "nsd")
    num_classes: int | None = None
    include_background: bool = False
    spacing: Any = None
    one_hot: bool = False
    spatial_dims: int | None = None
    convention: str | SegConvention = "default"
    percentile: float | None = None
    tolerance: float | Sequence[float] | None = None
    directed: bool = False
    empty_distance: float | None = None
    relative: bool | None = None
    distance_metric: str | None = None
    backend: str = "auto"
    chunk_mb: float | None = None


def check_options(metrics: Sequence[str], convention: str | SegConvention, **options: Any) -> None:
    """Refuse options that no metric in ``metrics`` reads under ``convention``, naming them.

    ``options``: ``percentile``, ``tolerance``, ``directed``, ``empty_distance``, ``relative``,
    ``distance_metric`` (``None`` / ``False`` = not given). Also checks each value's range."""
    conv = get_convention(convention)
    unknown = sorted(set(options) - set(OPTION_USERS))
    if unknown:
        raise ValueError(f"unknown segmentation option(s) {unknown}; expected {sorted(OPTION_USERS)}")
    asked = tuple(dict.fromkeys(metrics))
    for name, value in options.items():
        given = bool(value) if name == "directed" else value is not None
        if given and not any(m in OPTION_USERS[name] for m in asked):
            raise ValueError(
                f"option {name}={value!r} is not used by metric(s) {list(asked)}: it applies to "
                f"{list(OPTION_USERS[name])}")
    pct, dm = options.get("percentile"), options.get("distance_metric")
    if pct is not None and not (isinstance(pct, int | float) and 0 <= pct <= 100):
        raise ValueError(f"percentile must be in [0, 100], got {pct!r}")
    if options.get("directed") not in (None, False, True):
        raise ValueError(f"directed must be True or False, got {options['directed']!r}")
    if options.get("relative") not in (None, False, True):
        raise ValueError(f"relative must be True or False, got {options['relative']!r}")
    if options.get("empty_distance") is not None and not conv.uses_empty_distance(asked):
        raise ValueError(
            f"option empty_distance={options['empty_distance']!r} is not used by convention "
            f"{conv.name!r}: its one-sided-miss values of {list(asked)} are fixed (inf / NaN as in "
            f"{conv.reference or conv.name}); conventions 'default' and 'brats' take it")
    if dm is not None and dm not in DISTANCE_METRICS:
        raise ValueError(f"unknown distance_metric {dm!r}; expected one of {list(DISTANCE_METRICS)}")
    if dm is not None and dm not in conv.distance_metrics:
        raise ValueError(
            f"distance_metric={dm!r} is not offered by convention {conv.name!r} "
            f"({conv.reference or conv.name} measures {', '.join(conv.distance_metrics)} distances "
            f"only); conventions 'default' and 'monai' offer {list(DISTANCE_METRICS)}")


def _tolerances(tolerance: Any, n_cols: int) -> np.ndarray:
    """One NSD tolerance (mm) per scored class: a number for all, or one value per class."""
    if tolerance is None:
        return np.ones(n_cols)
    if isinstance(tolerance, torch.Tensor | np.ndarray):
        tolerance = np.asarray(tolerance.tolist() if isinstance(tolerance, torch.Tensor) else tolerance)
        tolerance = tolerance.tolist() if tolerance.ndim else float(tolerance)
    values = [tolerance] * n_cols if isinstance(tolerance, int | float) else list(tolerance)
    if len(values) != n_cols:
        raise ValueError(f"tolerance: {len(values)} values for {n_cols} scored classes "
                         "(give one number, or one per class)")
    out = np.asarray([float(v) for v in values], dtype=np.float64)
    if not np.all(np.isfinite(out) & (out >= 0)):
        raise ValueError(f"tolerance must be finite distances >= 0 mm, got {values}")
    return out


def _inputs(pred: Any, target: Any, opts: SegOptions) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
    """Validated per-case masks (on the prediction's device) and the number of classes."""
    spatial_dims, spacing, one_hot = opts.spatial_dims, opts.spacing, opts.one_hot
    if spatial_dims is None and spacing is not None:
        flat = np.asarray(spacing, dtype=object) if not isinstance(spacing, int | float) else None
        if flat is not None and flat.ndim == 1 and not isinstance(flat[0], list | tuple):
            spatial_dims = len(flat)
    preds = _split_cases(pred, "prediction", spatial_dims, one_hot)
    targets = _split_cases(target, "target", spatial_dims, one_hot)
    if len(preds) != len(targets):
        raise ValueError(f"prediction and target lengths differ: {len(preds)} vs {len(targets)} cases")
    if not preds:
        raise ValueError("empty batch: no cases to score")
    device = preds[0].device
    targets = [t.to(device) for t in targets]  # mixed devices: compute where the prediction is
    num_classes = opts.num_classes
    if one_hot:
        k = preds[0].shape[0]
        if num_classes is not None and k != num_classes:
            raise ValueError(f"one-hot input has {k} channels, num_classes is {num_classes}")
        num_classes = k
    elif num_classes is None:  # inferred from the largest label present
        num_classes = 1 + max((int(x.max()) for x in [*preds, *targets] if x.numel()
                               and not x.is_floating_point()), default=1)
    for i, (p, t) in enumerate(zip(preds, targets)):
        if p.shape != t.shape:
            raise ValueError(
                f"case {i}: prediction and target shapes differ: {tuple(p.shape)} vs {tuple(t.shape)}")
        if p.ndim - (1 if one_hot else 0) not in (2, 3):
            raise ValueError(f"case {i}: expected 2D or 3D masks, got shape {tuple(p.shape)}")
        for what, x in (("prediction", p), ("target", t)):
            if x.is_floating_point() and not bool(torch.isfinite(x).all()):
                raise ValueError(f"case {i}: {what} has NaN or inf values where labels are expected")
    preds = [_check_labels(p, f"prediction[{i}]", num_classes, one_hot) for i, p in enumerate(preds)]
    targets = [_check_labels(t, f"target[{i}]", num_classes, one_hot) for i, t in enumerate(targets)]
    return preds, targets, num_classes


def _oom(what: str, chunk_mb: float | None, err: Exception) -> RuntimeError:
    return RuntimeError(
        f"{what}; pass a smaller chunk_mb (now {chunk_mb if chunk_mb is not None else 256} MiB) "
        "or backend='kdtree'")


class _Run:
    """One :func:`compute_scores` call: options resolved once, then case by case."""

    def __init__(self, opts: SegOptions) -> None:
        self.opts, self.conv = opts, get_convention(opts.convention)
        self.metrics = list(dict.fromkeys(opts.metrics))
        unknown = [m for m in self.metrics if m not in SEG_METRIC_NAMES]
        if unknown:
            raise ValueError(f"unknown segmentation metric(s) {unknown}; expected {SEG_METRIC_NAMES}")
        check_options(self.metrics, self.conv, percentile=opts.percentile, tolerance=opts.tolerance,
                      directed=opts.directed, empty_distance=opts.empty_distance,
                      relative=opts.relative, distance_metric=opts.distance_metric)
        if opts.chunk_mb is not None and not (opts.chunk_mb > 0 and math.isfinite(opts.chunk_mb)):
            raise ValueError(f"chunk_mb must be a positive number of MiB, got {opts.chunk_mb}")
        self.chunk_bytes = int(opts.chunk_mb * 2**20) if opts.chunk_mb is not None else None
        self.rules = DistanceRules(self.conv, opts.percentile, bool(opts.directed),
                                   minkowski_p(opts.distance_metric or "euclidean"))
        self.relative = True if opts.relative is None else bool(opts.relative)
        self.want_dist = [m for m in self.metrics if m in _DIST]

    def prepare(self, pred: Any, target: Any) -> None:
        """Check the inputs; allocate the outputs; pick the distance path."""
        opts = self.opts
        self.preds, self.targets, self.k = _inputs(pred, target, opts)
        self.device = self.preds[0].device
        self.use_torch = resolve_backend(opts.backend, self.device) == "torch"
        # all classes of a batch at once off the CPU (launch- and sync-bound per class on a GPU);
        # its distance transforms are Euclidean
        self.batched = (self.use_torch and _surface_batched.ENABLED and self.rules.p == 2.0
                        and (self.device.type != "cpu" or _surface_batched.FORCE))
        ndims = [p.ndim - (1 if opts.one_hot else 0) for p in self.preds]
        self.spacings = _spacings(opts.spacing, len(self.preds), ndims)
        self.classes = list(range(0 if opts.include_background else 1, self.k))
        self.tols = _tolerances(opts.tolerance, len(self.classes))
        n, c = len(self.preds), len(self.classes)
        self.out = {m: np.full((n, c), math.nan) for m in self.metrics}
        self.status = np.zeros((n, c), dtype=np.int8)
        self.pending: dict[tuple[float, ...], list[Item]] = {}  # batched path: items by spacing
        if (self.want_dist and self.conv.chamfer_in_voxels and self.rules.p != 2.0
                and any(any(v != 1.0 for v in s) for s in self.spacings)):
            warnings.warn(
                f"convention {self.conv.name!r}: {opts.distance_metric} distances are counted in voxel "
                "steps, as MONAI's chamfer transform does (it ignores the spacing); convention "
                "'default' measures them in mm", UserWarning, stacklevel=4)

    def distance_spacing(self, sp: tuple[float, ...]) -> tuple[float, ...]:
        """The spacing distances are measured with (unit steps for MONAI's chamfer metrics)."""
        if self.conv.chamfer_in_voxels and self.rules.p != 2.0:
            return (1.0,) * len(sp)
        return sp

    def empty_fill(self, shape: tuple[int, ...], sp: tuple[float, ...]) -> float:
        """The empty distance (mm): ``empty_distance``, the convention's, or the image diagonal."""
        fill = self.opts.empty_distance
        fill = fill if fill is not None else self.conv.default_empty_distance
        if fill is None:
            return math.sqrt(sum((n_ * s) ** 2 for n_, s in zip(shape, sp)))
        return float(fill)

    def case_arrays(self, p: torch.Tensor, t: torch.Tensor) -> tuple[Any, Any, dict, dict]:
        """The case's masks where its distances are computed, and per-class bounding boxes
        (``{}`` for one-hot masks on the KD-tree path: boxed per channel)."""
        if self.use_torch:
            boxer = onehot_boxes_torch if self.opts.one_hot else label_boxes_torch
            return p, t, boxer(p, self.classes), boxer(t, self.classes)
        pn, tn = p.cpu().numpy(), t.cpu().numpy()
        if self.opts.one_hot:
            return pn, tn, {}, {}
        return pn, tn, _label_boxes(pn, self.classes), _label_boxes(tn, self.classes)

    def set_overlap_and_empty(self, b: int, j: int, counts: tuple[int, int, int],
                              case: tuple[torch.Tensor, torch.Tensor, tuple[float, ...], float]) -> None:
        """Overlap metrics of class column ``j`` and every metric a missing mask decides."""
        tp, n_p, n_t = counts
        p, t, sp, fill = case
        pe, te = n_p == 0, n_t == 0
        for m in self.metrics:
            if m in _OVERLAP:
                # a volume difference stays defined when only the prediction is empty
                # (and, in mm³, when only the target is)
                vd_ok = m == "volume_difference" and not (pe and te) and (not te or not self.relative)
                if not (pe or te) or vd_ok:
                    voxel = float(np.prod(sp))
                    self.out[m][b, j] = _overlap_value(m, tp, n_p, n_t, voxel, self.relative)
                    continue
            if not (pe or te):
                continue
            v = self.conv.empty_value(m, pred_empty=pe, target_empty=te,
                                      directed=self.rules.directed and m in _DIST)
            if v == EMPTY_DISTANCE:
                v = fill
            elif v == EDT_CORNER:
                cls = self.classes[j]
                x = t if pe else p
                mask = (x[cls] if self.opts.one_hot else x == cls).cpu().numpy().astype(bool)
                v = edt_corner_nsd(mask, sp, float(self.tols[j]))
            self.out[m][b, j] = float(v)

    def score_case(self, b: int) -> None:
        """Every metric of case ``b``; distances of the batched path are queued."""
        p, t, sp = self.preds[b], self.targets[b], self.spacings[b]
        counts = _overlap_counts(p, t, self.k, self.opts.one_hot)
        shape = p.shape[1:] if self.opts.one_hot else p.shape
        fill = self.empty_fill(tuple(shape), sp)
        arrays = self.case_arrays(p, t) if self.want_dist else None
        on_device: list[tuple[int, tuple[torch.Tensor, ...]]] = []  # (class column, distances)
        for j, cls in enumerate(self.classes):
            tp, n_p, n_t = (int(v) for v in counts[:, cls])
            pe, te = n_p == 0, n_t == 0
            self.status[b, j] = (STATUS_ABSENT if pe and te else STATUS_PRED_EMPTY if pe
                                 else STATUS_TARGET_EMPTY if te else STATUS_OK)
            self.set_overlap_and_empty(b, j, (tp, n_p, n_t), (p, t, sp, fill))
            if self.want_dist and not (pe or te):
                self.class_distances(b, j, arrays, sp, on_device)  # type: ignore[arg-type]
        if on_device:
            self.collect_device(b, on_device)

    def class_distances(self, b: int, j: int, arrays: tuple[Any, Any, dict, dict],
                        sp: tuple[float, ...], on_device: list) -> None:
        """Distance metrics of one class present in both masks (or its queued batched item)."""
        pn, tn, boxes_p, boxes_t = arrays
        cls, one_hot, dsp = self.classes[j], self.opts.one_hot, self.distance_spacing(sp)
        if one_hot and not boxes_p:
            box = _union(_bbox(pn[cls]), _bbox(tn[cls]))
        else:
            box = _union(boxes_p[cls], boxes_t[cls])
        if self.batched:  # every class of every case of the batch at once, after the cases
            item = Item((b, j), pn, tn, cls, box, float(self.tols[j]))
            self.pending.setdefault(tuple(float(v) for v in dsp), []).append(item)
            return
        pm, tm = (pn[cls][box], tn[cls][box]) if one_hot else (pn[box] == cls, tn[box] == cls)
        if self.use_torch:
            try:
                on_device.append((j, surface_distance_tensors(
                    pm, tm, dsp, self.conv.surface, chunk_bytes=self.chunk_bytes, p=self.rules.p)))
            except torch.cuda.OutOfMemoryError as err:
                raise _oom(f"case {b}, class {cls}: out of GPU memory computing surface distances "
                           f"over a {tuple(pm.shape)} box", self.opts.chunk_mb, err) from err
            return
        sd = class_surface_distances(pm, tm, dsp, self.conv.surface, p=self.rules.p)
        for m in self.want_dist:
            self.out[m][b, j] = distance_metric_value(sd, m, self.rules, float(self.tols[j]))

    def collect_device(self, b: int, on_device: list[tuple[int, tuple[torch.Tensor, ...]]]) -> None:
        """Every class of a case comes to the host in one copy; the metrics from NumPy."""
        parts = [x for _, four in on_device for x in four]
        host = torch.cat(parts).cpu().numpy()
        sizes = np.cumsum([0] + [x.shape[0] for x in parts])
        arrays = [host[a:z] for a, z in zip(sizes[:-1], sizes[1:])]
        for i, (j, _) in enumerate(on_device):
            d2_pt, w_p, d2_tp, w_t = arrays[4 * i : 4 * i + 4]
            sd = SurfaceDistances(np.sqrt(d2_pt), w_p, np.sqrt(d2_tp), w_t)
            for m in self.want_dist:
                self.out[m][b, j] = distance_metric_value(sd, m, self.rules, float(self.tols[j]))

    def finish_batched(self) -> None:
        """The queued classes of all cases, grouped by spacing, through the batched transforms."""
        for spacing_key, items in self.pending.items():
            try:
                values = distance_metrics(items, spacing_key, self.rules, self.want_dist,
                                          one_hot=self.opts.one_hot, chunk_bytes=self.chunk_bytes)
            except torch.cuda.OutOfMemoryError as err:
                cases = sorted({it.key[0] for it in items})
                raise _oom(f"case(s) {cases}: out of GPU memory computing surface distances of "
                           f"{len(items)} classes", self.opts.chunk_mb, err) from err
            for (b, j), vals in values.items():
                for m in self.want_dist:
                    self.out[m][b, j] = vals[m]


def compute_scores(pred: Any, target: Any, options: SegOptions) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Every metric of ``options.metrics`` as a ``(B, C)`` float64 tensor on the input's device.

    ``options.backend`` computes surfaces and distances with a CPU KD-tree (``"kdtree"``), with
    torch on the input's device (``"torch"``), or picks torch for CUDA tensors (``"auto"``).
    Also returns the ``(B, C)`` int8 status: 0 both present, 1 both empty ("absent"), 2
    prediction empty, 3 target empty (2 and 3 are "missed"). ``options.chunk_mb`` bounds the
    torch backend's temporaries (MiB per chunk; default 256 on GPUs, 2 on the CPU); a GPU running
    out of memory raises a ``RuntimeError`` naming the case, the class and this option.
    """
    run = _Run(options)
    run.prepare(pred, target)
    for b in range(len(run.preds)):
        run.score_case(b)
    run.finish_batched()
    result = {m: torch.from_numpy(v).to(run.device) for m, v in run.out.items()}
    return result, torch.from_numpy(run.status).to(run.device)
