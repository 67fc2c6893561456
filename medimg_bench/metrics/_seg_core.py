"""Input checking and the one-pass computation behind every segmentation metric.

:func:`compute_scores` validates a batch, counts overlaps per class on the input's device
(``torch.bincount``) and, when a distance metric is asked for, extracts each class's surfaces
once and derives every distance metric from the same distances: on the CPU with a KD-tree
(``backend="kdtree"``) or with torch on the input's device (``backend="torch"``, chunked
brute force); ``"auto"`` picks torch for non-CPU tensors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics import _surface_batched
from medimg_bench.metrics._surface import (
    SurfaceDistances,
    class_surface_distances,
    distance_metric_value,
)
from medimg_bench.metrics._surface_batched import Item, distance_metrics
from medimg_bench.metrics._surface_torch import (
    label_boxes_torch,
    onehot_boxes_torch,
    surface_distance_tensors,
)
from medimg_bench.metrics.seg_conventions import (
    EMPTY_DISTANCE,
    SEG_METRIC_NAMES,
    SegConvention,
    get_convention,
)

__all__ = ["compute_scores", "resolve_backend", "BACKENDS", "STATUS_OK", "STATUS_ABSENT", "STATUS_PRED_EMPTY", "STATUS_TARGET_EMPTY"]

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


def compute_scores(
    pred: Any,
    target: Any,
    *,
    metrics: Sequence[str],
    num_classes: int | None = None,
    include_background: bool = False,
    spacing: Any = None,
    one_hot: bool = False,
    spatial_dims: int | None = None,
    convention: str | SegConvention = "default",
    percentile: float | None = None,
    tolerance: float = 1.0,
    directed: bool = False,
    empty_distance: float | None = None,
    relative: bool = True,
    backend: str = "auto",
    chunk_mb: float | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Every metric in ``metrics`` as a ``(B, C)`` float64 tensor on the input's device.

    ``backend`` computes surfaces and distances with a CPU KD-tree (``"kdtree"``), with torch
    on the input's device (``"torch"``), or picks torch for CUDA tensors (``"auto"``). Also returns the ``(B, C)`` int8 status: 0 both present, 1 both empty ("absent"),
    2 prediction empty, 3 target empty (2 and 3 are "missed"). ``chunk_mb`` bounds the torch
    backend's temporaries (MiB per chunk; default 256 on GPUs, 2 on the CPU); a GPU running out
    of memory raises a ``RuntimeError`` naming the case, the class and this option.
    """
    conv = get_convention(convention)
    if chunk_mb is not None and not (chunk_mb > 0 and math.isfinite(chunk_mb)):
        raise ValueError(f"chunk_mb must be a positive number of MiB, got {chunk_mb}")
    chunk_bytes = int(chunk_mb * 2**20) if chunk_mb is not None else None
    metrics = list(dict.fromkeys(metrics))
    unknown = [m for m in metrics if m not in SEG_METRIC_NAMES]
    if unknown:
        raise ValueError(f"unknown segmentation metric(s) {unknown}; expected {SEG_METRIC_NAMES}")
    if tolerance < 0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance must be a finite distance >= 0 mm, got {tolerance}")
    if percentile is not None and not 0 <= percentile <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {percentile}")
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
    device = preds[0].device if preds else torch.device("cpu")
    targets = [t.to(device) for t in targets]  # mixed devices: compute where the prediction is
    use_torch = resolve_backend(backend, device) == "torch"
    # all classes of a case at once off the CPU (launch- and sync-bound per class on a GPU)
    batched = use_torch and _surface_batched.ENABLED and (device.type != "cpu" or _surface_batched.FORCE)
    if one_hot:
        k = preds[0].shape[0] if preds else (num_classes or 0)
        if num_classes is not None and k != num_classes:
            raise ValueError(f"one-hot input has {k} channels, num_classes is {num_classes}")
        num_classes = k
    elif num_classes is None:  # inferred from the largest label present
        num_classes = 1 + max((int(x.max()) for x in [*preds, *targets] if x.numel()
                               and not x.is_floating_point()), default=1)
    for i, (p, t) in enumerate(zip(preds, targets)):
        if p.shape != t.shape:
            raise ValueError(
                f"case {i}: prediction and target shapes differ: {tuple(p.shape)} vs {tuple(t.shape)}"
            )
        if p.ndim - (1 if one_hot else 0) not in (2, 3):
            raise ValueError(f"case {i}: expected 2D or 3D masks, got shape {tuple(p.shape)}")
        for what, x in (("prediction", p), ("target", t)):
            if x.is_floating_point() and not bool(torch.isfinite(x).all()):
                raise ValueError(f"case {i}: {what} has NaN or inf values where labels are expected")
    preds = [_check_labels(p, f"prediction[{i}]", num_classes, one_hot) for i, p in enumerate(preds)]
    targets = [_check_labels(t, f"target[{i}]", num_classes, one_hot) for i, t in enumerate(targets)]
    ndims = [p.ndim - (1 if one_hot else 0) for p in preds]
    spacings = _spacings(spacing, len(preds), ndims)
    classes = list(range(0 if include_background else 1, num_classes))
    n, c = len(preds), len(classes)
    out = {m: np.full((n, c), math.nan) for m in metrics}
    status = np.zeros((n, c), dtype=np.int8)
    want_dist = [m for m in metrics if m in _DIST]
    pending: dict[tuple[float, ...], list[Item]] = {}  # batched path: items by spacing
    for b, (p, t, sp) in enumerate(zip(preds, targets, spacings)):
        counts = _overlap_counts(p, t, num_classes, one_hot)
        shape = p.shape[1:] if one_hot else p.shape
        diag = math.sqrt(sum((n_ * s) ** 2 for n_, s in zip(shape, sp)))
        fill = empty_distance if empty_distance is not None else conv.default_empty_distance
        fill = diag if fill is None else float(fill)
        voxel = float(np.prod(sp))
        on_device: list[tuple[int, tuple[torch.Tensor, ...]]] = []  # (class column, distances)
        if want_dist and use_torch:
            pn, tn = p, t
            boxer = onehot_boxes_torch if one_hot else label_boxes_torch
            boxes_p, boxes_t = boxer(p, classes), boxer(t, classes)
        elif want_dist:
            pn, tn = p.cpu().numpy(), t.cpu().numpy()
            if not one_hot:
                boxes_p, boxes_t = _label_boxes(pn, classes), _label_boxes(tn, classes)
        for j, cls in enumerate(classes):
            tp, n_p, n_t = (int(v) for v in counts[:, cls])
            pe, te = n_p == 0, n_t == 0
            status[b, j] = (STATUS_ABSENT if pe and te else STATUS_PRED_EMPTY if pe
                            else STATUS_TARGET_EMPTY if te else STATUS_OK)
            for m in metrics:
                if m in _OVERLAP:
                    # a volume difference stays defined when only the prediction is empty
                    # (and, in mm³, when only the target is)
                    vd_ok = m == "volume_difference" and not (pe and te) and (not te or not relative)
                    if not (pe or te) or vd_ok:
                        out[m][b, j] = _overlap_value(m, tp, n_p, n_t, voxel, relative)
                        continue
                if pe or te:
                    v = conv.empty_value(m, pred_empty=pe, target_empty=te)
                    out[m][b, j] = fill if v == EMPTY_DISTANCE else float(v)
            if not want_dist or pe or te:
                continue
            if batched:  # every class of every case of the batch at once, after this loop
                pending.setdefault(tuple(float(v) for v in sp), []).append(
                    Item((b, j), pn, tn, cls, _union(boxes_p[cls], boxes_t[cls])))
                continue
            if use_torch:
                box = _union(boxes_p[cls], boxes_t[cls])
                if one_hot:
                    pm, tm = pn[cls][box], tn[cls][box]
                else:
                    pm, tm = pn[box] == cls, tn[box] == cls
                try:
                    on_device.append((j, surface_distance_tensors(pm, tm, sp, conv.surface,
                                                                  chunk_bytes=chunk_bytes)))
                except torch.cuda.OutOfMemoryError as err:
                    raise RuntimeError(
                        f"case {b}, class {cls}: out of GPU memory computing surface distances over a "
                        f"{tuple(pm.shape)} box; pass a smaller chunk_mb (now "
                        f"{chunk_mb if chunk_mb is not None else 256} MiB) or backend='kdtree'"
                    ) from err
                continue
            else:
                if one_hot:
                    box = _union(_bbox(pn[cls]), _bbox(tn[cls]))
                    pm, tm = pn[cls][box], tn[cls][box]
                else:
                    box = _union(boxes_p[cls], boxes_t[cls])
                    pm, tm = pn[box] == cls, tn[box] == cls
                sd = class_surface_distances(pm, tm, sp, conv.surface)
            for m in want_dist:
                out[m][b, j] = distance_metric_value(
                    sd, m, conv, percentile=percentile, tolerance=tolerance, directed=directed
                )
        if on_device:
            # every class of the case comes to the host in one copy
            parts = [x for _, four in on_device for x in four]
            host = torch.cat(parts).cpu().numpy()
            sizes = np.cumsum([0] + [x.shape[0] for x in parts])
            arrays = [host[a:z] for a, z in zip(sizes[:-1], sizes[1:])]
            for i, (j, _) in enumerate(on_device):
                d2_pt, w_p, d2_tp, w_t = arrays[4 * i : 4 * i + 4]
                sd = SurfaceDistances(np.sqrt(d2_pt), w_p, np.sqrt(d2_tp), w_t)
                for m in want_dist:
                    out[m][b, j] = distance_metric_value(
                        sd, m, conv, percentile=percentile, tolerance=tolerance, directed=directed
                    )
    for spacing_key, items in pending.items():
        try:
            values = distance_metrics(items, spacing_key, conv, want_dist, one_hot=one_hot,
                                      percentile=percentile, tolerance=tolerance, directed=directed,
                                      chunk_bytes=chunk_bytes)
        except torch.cuda.OutOfMemoryError as err:
            cases = sorted({it.key[0] for it in items})
            raise RuntimeError(
                f"case(s) {cases}: out of GPU memory computing surface distances of "
                f"{len(items)} classes; pass a smaller chunk_mb (now "
                f"{chunk_mb if chunk_mb is not None else 256} MiB) or backend='kdtree'"
            ) from err
        for (b, j), vals in values.items():
            for m in want_dist:
                out[m][b, j] = vals[m]
    result = {m: torch.from_numpy(v).to(device) for m, v in out.items()}
    return result, torch.from_numpy(status).to(device)
