"""Surface extraction and surface distances with torch ops on the input's device (``backend="torch"``).

The same surfaces as :mod:`medimg_bench.metrics._surface` (voxel edges ``m ^ erode(m)`` with the
cross structuring element and the image border counting as outside, or DeepMind's surfels on
the corner grid weighted by the same lookup table), computed with torch on the masks' device.
Nearest-surface distances are exact, in float64, by one of two methods picked per class by
cost: a separable Euclidean distance transform of each surface over the class's bounding box
(:func:`squared_edt`: nearest seed along the first axis by prefix max/min scans, then exact
min-plus convolutions with the squared coordinate differences along the other axes, chunked by
:data:`CHUNK_BYTES`; both surfaces in one batch), or a chunked brute force over point pairs.
Both sum the squared coordinate differences ``(i·s − j·s)²`` in axis order with separate
subtract / square / add steps, as the KD-tree does, and rounding is monotone, so the minimum is
the same float64 number whichever method finds it. :func:`surface_distance_tensors` keeps the
results on the device; callers move every class of a case to the host in one copy, where
:func:`medimg_bench.metrics._surface.distance_metric_value` applies the convention's
percentile/mean/NSD rules — the same code as the KD-tree backend.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch

from medimg_bench.metrics import _minplus_triton
from medimg_bench.metrics._surface import SurfaceDistances, surfel_table

__all__ = [
    "CHUNK_BYTES",
    "squared_edt",
    "surface_distance_tensors",
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


def edges(padded: torch.Tensor, lead: int = 0) -> torch.Tensor:
    """Voxels of the un-padded mask with a face neighbour outside it: ``m & ~erode(m)``.

    The erosion with the cross (4/6-neighbour) structuring element is the AND of the mask's
    ``2·d`` face-shifted copies; with the zero padding the border value is 0. The first ``lead``
    axes are batch axes (not padded, not eroded).
    """
    nd = padded.ndim - lead
    inner = (slice(None),) * lead + tuple(slice(1, -1) for _ in range(nd))
    core = padded[inner]
    eroded = core.clone()
    for ax in range(lead, lead + nd):
        for lo, hi in ((0, -2), (2, None)):
            sl = list(inner)
            sl[ax] = slice(lo, hi)
            eroded &= padded[tuple(sl)]
    return core & ~eroded


def neighbour_codes(padded: torch.Tensor, lead: int = 0) -> torch.Tensor:
    """The 2^d neighbourhood code (uint8) of every corner point, in DeepMind's bit order (the
    first ``lead`` axes are batch axes)."""
    nd = padded.ndim - lead
    batch = tuple(padded.shape[:lead])
    out_shape = tuple(s - 1 for s in padded.shape[lead:])
    code = torch.zeros(batch + out_shape, dtype=torch.uint8, device=padded.device)
    n_bits = 2**nd
    for flat, off in enumerate(itertools.product((0, 1), repeat=nd)):
        sl = (slice(None),) * lead + tuple(slice(o, o + n) for o, n in zip(off, out_shape))
        code |= padded[sl].to(torch.uint8) * (1 << (n_bits - 1 - flat))
    return code


# Above this many point pairs a brute-force search costs more than a CPU KD-tree even on a
# large GPU (≈ 2e11 float64 pair evaluations take seconds); such surfaces (e.g. the background
# class of a full CT with include_background=True) go to the KD-tree instead.
BRUTE_FORCE_MAX_PAIRS = 2e11
#: How :func:`surface_distance_tensors` searches by default ("auto", "edt" or "brute").
DEFAULT_METHOD = "auto"
#: Half-width (voxels) of the distance transform's min-plus window along the axes after the
#: first; points farther than the window covers are searched exactly over all surface points.
EDT_WINDOW = 8


def nearest_distances(
    src: torch.Tensor,
    dst: torch.Tensor,
    *,
    chunk_bytes: int | None = None,
    max_pairs: float | None = None,
    squared: bool = False,
    p: float = 2.0,
) -> torch.Tensor:
    """Distance (float64, same unit as the coordinates) from each ``src`` row to the nearest
    ``dst`` row, by exact brute force over row chunks of at most ``chunk_bytes`` (default
    :data:`CHUNK_BYTES` on accelerators, the cache-sized :data:`CPU_CHUNK_BYTES` on the CPU).
    Point sets with more than ``max_pairs`` pairs (default :data:`BRUTE_FORCE_MAX_PAIRS` off the
    CPU, no limit on it) are searched with SciPy's KD-tree on the host instead. ``p``: the
    Minkowski exponent (2 Euclidean, 1 taxicab, inf chessboard). ``squared`` returns squared
    distances (torch's CPU ``sqrt`` is not correctly rounded; NumPy's is)."""
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

        d, _ = cKDTree(dst.double().cpu().numpy()).query(src.double().cpu().numpy(), p=p)
        return torch.from_numpy(d * d if squared else d).to(src.device)
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if src.device.type != "cpu" else CPU_CHUNK_BYTES
    # the distance matrix and one difference temporary live at the same time
    rows = max(1, chunk_bytes // (2 * 8 * m))
    dst_cols = [dst[:, k].unsqueeze(0) for k in range(dst.shape[1])]
    for i in range(0, n, rows):
        out[i : i + rows] = _chunk_min(src[i : i + rows], dst_cols, p)
    if p != 2.0:
        return out * out if squared else out
    return out if squared else out.sqrt_()


def _chunk_min(a: torch.Tensor, dst_cols: list[torch.Tensor], p: float) -> torch.Tensor:
    """Per row of ``a``: the minimum over ``dst`` of the squared Euclidean distance (``p=2``) or
    of the taxicab / chessboard distance (``p=1`` / ``inf``)."""
    d = None
    # separate subtract / square / add kernels in axis order: the same rounding as the
    # KD-tree's sum of squared differences on every device (no fused multiply-add), so
    # distances lying exactly on an NSD tolerance compare the same way
    for k, col in enumerate(dst_cols):
        diff = a[:, k : k + 1] - col
        if p == 2.0:
            diff.mul_(diff)
        else:
            diff.abs_()
        if d is None:
            d = diff
        elif p == math.inf:
            torch.maximum(d, diff, out=d)
        else:
            d.add_(diff)
    return d.amin(dim=1)  # type: ignore[union-attr]


def _directed(src: torch.Tensor, on_other: torch.Tensor, dst: torch.Tensor,
              chunk_bytes: int | None = None, p: float = 2.0) -> torch.Tensor:
    """Squared distances from ``src`` points to ``dst`` (0 for points lying on the other
    surface)."""
    out = torch.zeros(src.shape[0], dtype=torch.float64, device=src.device)
    todo = ~on_other
    if bool(todo.any()):
        out[todo] = nearest_distances(src[todo], dst, chunk_bytes=chunk_bytes, squared=True, p=p)
    return out


def min_plus(g: torch.Tensor, axis: int, coord: torch.Tensor, chunk_bytes: int,
              window: int | None = None) -> torch.Tensor:
    """``out[.., x, ..] = min_y g[.., y, ..] + (coord[x] − coord[y])²`` along ``axis`` (≥ 2 of a
    contiguous ``(B, n0, ...)`` tensor), over all ``y`` or, with ``window``, over
    ``|y − x| ≤ window`` (the exact minimum over those ``y``); chunked over ``B × n0`` rows."""
    n = g.shape[axis]
    full = window is None or 2 * window + 1 >= n
    if _minplus_triton.available(g):  # one fused kernel, nothing of size rows × n × window
        diff = coord[:, None] - coord[None, :]
        return _minplus_triton.min_plus_axis(g, axis, diff * diff, chunk_bytes,
                                             window=None if full else int(window))  # type: ignore[arg-type]
    gv = g.reshape(g.shape[0] * g.shape[1], *g.shape[2:])
    ax = axis - 1
    out = torch.empty_like(gv)
    per_row = max(1, gv[0].numel())
    if full:
        diff = coord[:, None] - coord[None, :]
        table = diff * diff  # (x, y): query x, seed y, the brute force's (a − b)²
        rows = max(1, chunk_bytes // (8 * per_row * n))
        for i in range(0, gv.shape[0], rows):
            part = gv[i : i + rows].movedim(ax, -1)
            out[i : i + rows] = torch.amin(part[..., None, :] + table, dim=-1).movedim(-1, ax)
        return out.view(g.shape)
    w = int(window)  # type: ignore[arg-type]
    # coordinates of the padded positions, index × spacing: the same products as ``coord``
    cpad = torch.arange(-w, n + w, dtype=coord.dtype, device=coord.device) * coord[1]
    diff = coord[:, None] - cpad.unfold(0, 2 * w + 1, 1)  # (x, offset)
    shape = [1] * gv.ndim + [2 * w + 1]
    shape[ax] = n
    table = (diff * diff).view(shape)
    rows = max(1, chunk_bytes // (8 * per_row * (2 * w + 1)))
    for i in range(0, gv.shape[0], rows):
        part = gv[i : i + rows]
        edge = list(part.shape)
        edge[ax] = w
        pad = part.new_full(edge, math.inf)
        windows = torch.cat([pad, part, pad], dim=ax).unfold(ax, 2 * w + 1, 1)
        torch.amin(windows + table, dim=-1, out=out[i : i + rows])
    return out.view(g.shape)


def squared_edt(
    seeds: torch.Tensor, coords: list[torch.Tensor], *, chunk_bytes: int | None = None,
    window: Sequence[int | None] | None = None,
) -> torch.Tensor:
    """Squared Euclidean distance (float64, squared coordinate units) from every grid point of
    ``seeds`` (a boolean ``(B, *spatial)`` stack) to the nearest seed of its own item; ``inf``
    where an item has no seed. ``coords[k]`` holds the coordinate of each index along spatial
    axis ``k`` (index × spacing). Exact: equal to the minimum over seeds of the squared
    differences summed in axis order. ``window[k]`` (for axes after the first) restricts the
    seeds to index offsets ``≤ window[k]`` along axis ``k``: the result is then the exact minimum
    over those seeds only (see :func:`surface_distance_tensors` for when that is the true one)."""
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if seeds.device.type != "cpu" else CPU_CHUNK_BYTES
    g = first_axis_pass(seeds, coords[0])
    return other_axes_passes(g, coords, chunk_bytes=chunk_bytes, window=window)


def other_axes_passes(g: torch.Tensor, coords: list[torch.Tensor], *, chunk_bytes: int,
                      window: Sequence[int | None] | None = None) -> torch.Tensor:
    """The min-plus passes of :func:`squared_edt` after the first axis (``g`` may be updated in
    place)."""
    for k in range(1, g.ndim - 1):
        g = min_plus(g, k + 1, coords[k], chunk_bytes, None if window is None else window[k])
    return g


def first_axis_pass(seeds: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
    """Squared distance (float64) along the first spatial axis to the nearest seed of the same
    column (``inf`` for a column without seeds): prefix max/min scans of seed indexes."""
    if _minplus_triton.available(seeds):
        return _minplus_triton.first_axis_pass(seeds, c0)
    n0 = seeds.shape[1]
    view = (1, n0) + (1,) * (seeds.ndim - 2)
    idx = torch.arange(n0, device=seeds.device, dtype=torch.int32).view(view)
    left = torch.where(seeds, idx, -1).cummax(1).values
    right = torch.where(seeds, idx, n0).flip(1).cummin(1).values.flip(1)
    x = c0.view(view)
    inf = torch.tensor(math.inf, dtype=torch.float64, device=seeds.device)
    dl = x - c0[left.clamp(min=0).long()]
    dr = c0[right.clamp(max=n0 - 1).long()] - x
    return torch.minimum(torch.where(left >= 0, dl * dl, inf), torch.where(right < n0, dr * dr, inf))


def _surfaces(pred: torch.Tensor, target: torch.Tensor, spacing: tuple[float, ...], surface: str):
    """Surface masks of both (on the voxel or the corner grid) and their weights (None: all 1)."""
    pp, pt = _pad(pred.bool()), _pad(target.bool())
    if surface == "edge":
        return edges(pp), edges(pt), None, None
    if surface == "surfel":
        cp, ct = neighbour_codes(pp), neighbour_codes(pt)
        full = 2 ** (2**pred.ndim) - 1
        sp = (cp != 0) & (cp != full)
        st = (ct != 0) & (ct != full)
        table = torch.from_numpy(surfel_table(tuple(float(s) for s in spacing))).to(pred.device)
        return sp, st, table[cp[sp].long()], table[ct[st].long()]
    raise ValueError(f"unknown surface definition {surface!r}; expected 'edge' or 'surfel'")


def _edt_distances(
    sp: torch.Tensor, st: torch.Tensor, spacing: tuple[float, ...], chunk_bytes: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared distances of each surface's points to the other surface by distance transforms.

    Windowed transforms first (±``EDT_WINDOW`` voxels, then 4× that, then the whole axis): a
    windowed minimum below the squared distance of every seed outside the window is the true
    one; the points above it are searched exactly over all surface points when that costs less
    than the next, wider transform."""
    dev, shape = sp.device, sp.shape
    coords = [torch.arange(n, dtype=torch.float64, device=dev) * float(s) for n, s in zip(shape, spacing)]
    scale = torch.tensor(spacing, dtype=torch.float64, device=dev)
    seeds = torch.stack([st, sp])
    levels: list[int | None] = [EDT_WINDOW, 4 * EDT_WINDOW, None]
    for level, w in enumerate(levels):
        win = [None] + [None if w is None or 2 * w + 1 >= n else w for n in shape[1:]]
        g = squared_edt(seeds, coords, chunk_bytes=chunk_bytes, window=win)
        d_pt, d_tp = g[0][sp], g[1][st]
        del g
        bounds = [((wk + 1) * float(s)) ** 2 for wk, s in zip(win[1:], spacing[1:]) if wk is not None]
        if not bounds:
            return d_pt, d_tp
        bound = min(bounds) * (1 - 1e-9)  # margin for the rounding of the excluded seeds' sums
        far_pt, far_tp = d_pt >= bound, d_tp >= bound
        n_far_pt, n_far_tp = (int(v) for v in torch.stack([far_pt.sum(), far_tp.sum()]).tolist())
        if n_far_pt + n_far_tp == 0:
            return d_pt, d_tp
        n_p, n_t = d_pt.shape[0], d_tp.shape[0]
        nxt = levels[level + 1] if level + 1 < len(levels) else None
        next_width = sum(n if nxt is None else min(n, 2 * nxt + 1) for n in shape[1:])
        brute = (n_far_pt * n_t + n_far_tp * n_p) * sp.ndim
        if level + 1 < len(levels) and brute > 2 * sp.numel() * (2 + next_width):
            continue  # the next, wider transform costs less than searching the far points
        for d, far, q_mask, s_mask in ((d_pt, far_pt, sp, st), (d_tp, far_tp, st, sp)):
            if bool(far.any()):
                q = torch.nonzero(q_mask)[far].to(torch.float64) * scale
                xyz = torch.nonzero(s_mask).to(torch.float64) * scale
                d[far] = nearest_distances(q, xyz, chunk_bytes=chunk_bytes, squared=True)
        return d_pt, d_tp
    raise AssertionError("unreachable: the last level is exact")  # pragma: no cover


def surface_distance_tensors(
    pred: torch.Tensor, target: torch.Tensor, spacing: tuple[float, ...], surface: str, *,
    method: str | None = None, chunk_bytes: int | None = None, p: float = 2.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """**Squared** distances (mm², float64, on the masks' device) from each prediction surface
    point to the target surface and back, with their weights: ``(d2_pt, w_p, d2_tp, w_t)``.
    Take the square root on the host with NumPy (correctly rounded) to get the KD-tree's
    numbers bit for bit.

    ``method``: ``"edt"`` (distance transform of both surfaces over the box), ``"brute"``
    (point pairs) or ``"auto"`` (the cheaper by a count of elementary steps); default
    :data:`DEFAULT_METHOD`. ``p`` (Minkowski exponent) other than 2 always uses the brute
    force: the distance transforms here are Euclidean."""
    method = method or DEFAULT_METHOD
    dev = pred.device
    sp, st, wp, wt = _surfaces(pred, target, spacing, surface)
    shape = sp.shape
    if p != 2.0 and method in ("auto", "brute"):
        method = "brute"
    elif p != 2.0:
        raise ValueError(f"method {method!r} measures Euclidean distances only; use 'brute'")
    if method == "auto":
        n_p, n_t = (int(v) for v in torch.stack([sp.sum(), st.sum()]).tolist())
        width = sum(min(n, 2 * EDT_WINDOW + 1) for n in shape[1:])
        method = "edt" if 2 * sp.numel() * (2 + width) < n_p * n_t * sp.ndim else "brute"
    if method == "edt":
        d_pt, d_tp = _edt_distances(sp, st, spacing, chunk_bytes)
    elif method == "brute":
        scale = torch.tensor(spacing, dtype=torch.float64, device=dev)
        xp = torch.nonzero(sp).to(torch.float64) * scale
        xt = torch.nonzero(st).to(torch.float64) * scale
        d_pt = _directed(xp, st[sp], xt, chunk_bytes, p)
        d_tp = _directed(xt, sp[st], xp, chunk_bytes, p)
    else:
        raise ValueError(f"unknown method {method!r}; expected 'auto', 'edt' or 'brute'")
    if wp is None:
        wp = torch.ones(d_pt.shape[0], dtype=torch.float64, device=dev)
        wt = torch.ones(d_tp.shape[0], dtype=torch.float64, device=dev)
    return d_pt, wp, d_tp, wt  # type: ignore[return-value]


def class_surface_distances_torch(
    pred: torch.Tensor, target: torch.Tensor, spacing: tuple[float, ...], surface: str, *,
    method: str = "brute", p: float = 2.0,
) -> SurfaceDistances:
    """Surface distances between two non-empty boolean masks, computed on their device.

    Returns NumPy arrays (mm, float64) like the KD-tree backend: distances from each
    prediction surface point to the target surface and back, with weights (all 1 for
    ``surface="edge"``, surfel areas / contour lengths for ``"surfel"``).
    """
    d2_pt, wp, d2_tp, wt = (t.cpu().numpy() for t in surface_distance_tensors(
        pred, target, spacing, surface, method=method, p=p))
    return SurfaceDistances(np.sqrt(d2_pt), wp, np.sqrt(d2_tp), wt)


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
    """Bounding box of every class of a label map, from one presence table per axis on its
    device (a scatter of ``True``: no counting, so no atomic contention on the background)."""
    if lab.numel() == 0:
        return dict.fromkeys(classes)
    k = max(classes) + 1
    flat = lab.long().clamp(max=k)  # labels >= k land in a spare column
    tables = []
    for ax, size in enumerate(lab.shape):
        rows = flat.movedim(ax, 0).reshape(size, -1)
        pres = torch.zeros(size, k + 1, dtype=torch.bool, device=lab.device)
        tables.append(pres.scatter_(1, rows, True)[:, :k].T)
    host = torch.cat(tables, dim=1).cpu().numpy()  # one copy for all axes
    cuts = np.cumsum([0] + list(lab.shape))
    return _boxes_from_presence([host[classes, a:z] for a, z in zip(cuts[:-1], cuts[1:])], classes)


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
