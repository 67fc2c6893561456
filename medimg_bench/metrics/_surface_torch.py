"""Surface extraction and surface distances with torch ops on the input's device (``backend="torch"``).

The same surfaces as :mod:`medimg_bench.metrics._surface` (voxel edges ``m ^ erode(m)`` with the
cross structuring element and the image border counting as outside, or DeepMind's surfels on
the corner grid weighted by the same lookup table), computed with torch on the masks' device.
Nearest-surface distances come from a chunked exact brute force in float64 (explicit squared
coordinate differences summed in axis order, no matmul expansion, so no cancellation error and
the KD-tree's rounding); each chunk's distance matrix is bounded by :data:`CHUNK_BYTES`. Only the two 1-D distance arrays and their weights go
to the host, where :func:`medimg_bench.metrics._surface.distance_metric_value` applies the
convention's percentile/mean/NSD rules — the same code as the KD-tree backend.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from medimg_bench.metrics._surface import SurfaceDistances, _surfel_table

__all__ = [
    "CHUNK_BYTES",
    "CPU_CHUNK_BYTES",
    "class_surface_distances_torch",
    "label_boxes_torch",
    "onehot_boxes_torch",
    "nearest_distances",
]

#: Upper bound (bytes) of one chunk's float64 squared-distance matrix in the brute force.
CHUNK_BYTES = 256 << 20
#: The same bound on the CPU, small enough to stay in cache.
CPU_CHUNK_BYTES = 2 << 20

Box = tuple[slice, ...] | None


def _pad(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` with one ``False`` voxel on every side (the image border counts as outside)."""
    out = torch.zeros(tuple(s + 2 for s in mask.shape), dtype=torch.bool, device=mask.device)
    out[tuple(slice(1, -1) for _ in range(mask.ndim))] = mask
    return out


def _edges(padded: torch.Tensor) -> torch.Tensor:
    """Voxels of the un-padded mask with a face neighbour outside it: ``m & ~erode(m)``.

    The erosion with the cross (4/6-neighbour) structuring element is the AND of the mask's
    ``2·d`` face-shifted copies; with the zero padding the border value is 0.
    """
    nd = padded.ndim
    inner = tuple(slice(1, -1) for _ in range(nd))
    core = padded[inner]
    eroded = core.clone()
    for ax in range(nd):
        for lo, hi in ((0, -2), (2, None)):
            sl = list(inner)
            sl[ax] = slice(lo, hi)
            eroded &= padded[tuple(sl)]
    return core & ~eroded


def _neighbour_codes(padded: torch.Tensor) -> torch.Tensor:
    """The 2^d neighbourhood code (uint8) of every corner point, in DeepMind's bit order."""
    nd = padded.ndim
    out_shape = tuple(s - 1 for s in padded.shape)
    code = torch.zeros(out_shape, dtype=torch.uint8, device=padded.device)
    n_bits = 2**nd
    for flat, off in enumerate(itertools.product((0, 1), repeat=nd)):
        sl = tuple(slice(o, o + n) for o, n in zip(off, out_shape))
        code |= padded[sl].to(torch.uint8) * (1 << (n_bits - 1 - flat))
    return code


# Above this many point pairs a brute-force search costs more than a CPU KD-tree even on a
# large GPU (≈ 2e11 float64 pair evaluations take seconds); such surfaces (e.g. the background
# class of a full CT with include_background=True) go to the KD-tree instead.
BRUTE_FORCE_MAX_PAIRS = 2e11


def nearest_distances(
    src: torch.Tensor,
    dst: torch.Tensor,
    *,
    chunk_bytes: int | None = None,
    max_pairs: float | None = None,
) -> torch.Tensor:
    """Euclidean distance (float64, same unit as the coordinates) from each ``src`` row to the
    nearest ``dst`` row, by exact brute force over row chunks of at most ``chunk_bytes`` (default
    :data:`CHUNK_BYTES` on accelerators, the cache-sized :data:`CPU_CHUNK_BYTES` on the CPU).
    Point sets with more than ``max_pairs`` pairs (default :data:`BRUTE_FORCE_MAX_PAIRS` off the
    CPU, no limit on it) are searched with SciPy's KD-tree on the host instead."""
    n, m = src.shape[0], dst.shape[0]
    out = torch.empty(n, dtype=torch.float64, device=src.device)
    if n == 0:
        return out
    if m == 0:
        raise ValueError("nearest_distances: the destination point set is empty")
    if max_pairs is None:
        max_pairs = BRUTE_FORCE_MAX_PAIRS if src.device.type != "cpu" else math.inf
    if n * m > max_pairs:
        from scipy.spatial import cKDTree

        d, _ = cKDTree(dst.double().cpu().numpy()).query(src.double().cpu().numpy())
        return torch.from_numpy(d).to(src.device)
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if src.device.type != "cpu" else CPU_CHUNK_BYTES
    # the squared-distance matrix and one difference temporary live at the same time
    rows = max(1, chunk_bytes // (2 * 8 * m))
    dst_cols = [dst[:, k].unsqueeze(0) for k in range(dst.shape[1])]
    for i in range(0, n, rows):
        a = src[i : i + rows]
        d2 = None
        # separate subtract / square / add kernels in axis order: the same rounding as the
        # KD-tree's sum of squared differences on every device (no fused multiply-add), so
        # distances lying exactly on an NSD tolerance compare the same way
        for k, col in enumerate(dst_cols):
            diff = a[:, k : k + 1] - col
            diff.mul_(diff)
            d2 = diff if d2 is None else d2.add_(diff)
        out[i : i + rows] = d2.amin(dim=1)  # type: ignore[union-attr]
    return out.sqrt_()


def _directed(src: torch.Tensor, on_other: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Distances from ``src`` points to ``dst`` (0 for points lying on the other surface)."""
    out = torch.zeros(src.shape[0], dtype=torch.float64, device=src.device)
    todo = ~on_other
    if bool(todo.any()):
        out[todo] = nearest_distances(src[todo], dst)
    return out


def class_surface_distances_torch(
    pred: torch.Tensor, target: torch.Tensor, spacing: tuple[float, ...], surface: str
) -> SurfaceDistances:
    """Surface distances between two non-empty boolean masks, computed on their device.

    Returns NumPy arrays (mm, float64) like the KD-tree backend: distances from each
    prediction surface point to the target surface and back, with weights (all 1 for
    ``surface="edge"``, surfel areas / contour lengths for ``"surfel"``).
    """
    dev = pred.device
    pp, pt = _pad(pred.bool()), _pad(target.bool())
    if surface == "edge":
        sp, st = _edges(pp), _edges(pt)
        wp = wt = None
    elif surface == "surfel":
        cp, ct = _neighbour_codes(pp), _neighbour_codes(pt)
        full = 2 ** (2**pred.ndim) - 1
        sp = (cp != 0) & (cp != full)
        st = (ct != 0) & (ct != full)
        table = torch.from_numpy(_surfel_table(tuple(float(s) for s in spacing))).to(dev)
        wp, wt = table[cp[sp].long()], table[ct[st].long()]
    else:
        raise ValueError(f"unknown surface definition {surface!r}; expected 'edge' or 'surfel'")
    scale = torch.tensor(spacing, dtype=torch.float64, device=dev)
    xp = torch.nonzero(sp).to(torch.float64) * scale
    xt = torch.nonzero(st).to(torch.float64) * scale
    d_pt = _directed(xp, st[sp], xt)
    d_tp = _directed(xt, sp[st], xp)
    if wp is None:
        wp = torch.ones(xp.shape[0], dtype=torch.float64, device=dev)
        wt = torch.ones(xt.shape[0], dtype=torch.float64, device=dev)
    host = [t.cpu().numpy() for t in (d_pt, wp, d_tp, wt)]
    return SurfaceDistances(*host)


def _boxes_from_presence(presence: list[np.ndarray], keys: list[int]) -> dict[int, Box]:
    """Per key: the bounding box from per-axis ``(K, size)`` presence tables, or ``None``."""
    boxes: dict[int, Box] = {}
    for row, key in enumerate(keys):
        box = []
        for pres in presence:
            idx = np.flatnonzero(pres[row])
            if len(idx) == 0:
                box = None
                break
            box.append(slice(int(idx[0]), int(idx[-1]) + 1))
        boxes[key] = tuple(box) if box is not None else None
    return boxes


def label_boxes_torch(lab: torch.Tensor, classes: list[int]) -> dict[int, Box]:
    """Bounding box of every class of a label map, from one ``bincount`` per axis on its device."""
    if lab.numel() == 0:
        return dict.fromkeys(classes)
    k = max(classes) + 1
    flat = lab.long()
    presence = []
    for ax, size in enumerate(lab.shape):
        view = [1] * lab.ndim
        view[ax] = size
        coord = torch.arange(size, device=lab.device).view(view)
        keys = (flat.clamp(max=k) * size + coord).reshape(-1)  # labels >= k land in a spare row
        counts = torch.bincount(keys, minlength=(k + 1) * size)[: k * size]
        presence.append((counts.view(k, size) > 0).cpu().numpy())
    return _boxes_from_presence([p[classes] for p in presence], classes)


def onehot_boxes_torch(stack: torch.Tensor, classes: list[int]) -> dict[int, Box]:
    """Bounding box of every channel of a ``(C, *spatial)`` boolean stack, on its device."""
    if stack.numel() == 0:
        return dict.fromkeys(classes)
    sub = stack[classes].bool()
    presence = []
    for ax in range(stack.ndim - 1):
        per_axis = sub.movedim(1 + ax, 1).reshape(sub.shape[0], sub.shape[1 + ax], -1)
        presence.append(per_axis.any(dim=-1).cpu().numpy())
    return _boxes_from_presence(presence, classes)
