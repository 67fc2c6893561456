"""Surface extraction and surface distances for one class of one case (NumPy, CPU).

Each class is cropped to the bounding box of ``pred | target`` and padded with one zero voxel
per side (exact: outside the box both masks are empty, and the image border counts as outside,
as in ``binary_erosion(..., border_value=0)``). Surfaces are extracted once and the two directed
nearest-surface distances are found with a KD-tree (points on both surfaces are at distance 0
and are not queried); every distance metric of the class derives from these arrays.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from medimg_bench.metrics.seg_conventions import SegConvention

__all__ = ["SurfaceDistances", "DistanceRules", "class_surface_distances", "distance_metric_value",
           "minkowski_p", "edt_corner_nsd"]


def minkowski_p(distance_metric: str) -> float:
    """The Minkowski exponent of a ``distance_metric`` name: 2 (euclidean), inf (chessboard), 1
    (taxicab)."""
    return {"euclidean": 2.0, "chessboard": math.inf, "taxicab": 1.0}[distance_metric]


@dataclass(frozen=True)
class DistanceRules:
    """How distance metrics are derived from surface distances: the convention's rules, the
    percentile (``None``: the max for ``hausdorff``, 95 for ``hd95``), whether only prediction →
    target distances count (``directed``) and the distance metric's Minkowski exponent ``p``."""

    conv: SegConvention
    percentile: float | None = None
    directed: bool = False
    p: float = 2.0

    def quantile(self, metric: str) -> float | None:
        """The percentile a Hausdorff metric reads (``None``: the maximum)."""
        if metric == "hausdorff":
            return self.percentile
        return 95.0 if self.percentile is None else self.percentile


@dataclass
class SurfaceDistances:
    """Directed distances (mm, float64) and per-point weights (1 or surfel area / length)."""

    d_pred_to_target: np.ndarray
    w_pred: np.ndarray
    d_target_to_pred: np.ndarray
    w_target: np.ndarray


def _pad(mask: np.ndarray) -> np.ndarray:
    return np.pad(mask, 1, mode="constant", constant_values=False)


def _edges(padded: np.ndarray) -> np.ndarray:
    """Voxels of the (un-padded) mask with a face neighbour outside it: ``m ^ erode(m)``."""
    nd = padded.ndim
    inner = tuple(slice(1, -1) for _ in range(nd))
    core = padded[inner]
    eroded = core.copy()
    for ax in range(nd):
        for lo, hi in ((0, -2), (2, None)):
            sl = list(inner)
            sl[ax] = slice(lo, hi)
            eroded &= padded[tuple(sl)]
    return core & ~eroded


def _neighbour_codes(padded: np.ndarray) -> np.ndarray:
    """The 2^d neighbourhood code of every corner point of the voxel grid.

    Bit ``2^(2^d - 1 - flat(o))`` is set when the voxel at offset ``o`` (row-major) around the
    corner is inside; this is the bit order of DeepMind's surface-area lookup tables.
    """
    nd = padded.ndim
    out_shape = tuple(s - 1 for s in padded.shape)
    code = np.zeros(out_shape, dtype=np.uint8)
    n_bits = 2**nd
    for flat, off in enumerate(itertools.product((0, 1), repeat=nd)):
        sl = tuple(slice(o, o + n) for o, n in zip(off, out_shape))
        code |= padded[sl].astype(np.uint8) << np.uint8(n_bits - 1 - flat)
    return code


@lru_cache(maxsize=64)
def surfel_table(spacing: tuple[float, ...]) -> np.ndarray:
    """Code → surfel area (3D, mm²) or contour length (2D, mm), DeepMind's lookup tables."""
    try:
        from surface_distance import lookup_tables
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'deepmind' and 'brats' conventions use DeepMind's surfel area tables: "
            "pip install surface-distance (or medimg_bench[seg])"
        ) from err
    if len(spacing) == 3:
        table = lookup_tables.create_table_neighbour_code_to_surface_area(spacing)
    else:
        table = lookup_tables.create_table_neighbour_code_to_contour_length(spacing)
    return np.asarray(table, dtype=np.float64)


def _directed(
    src_coords: np.ndarray, src_on_other: np.ndarray, tree: object, n_src: int, p: float = 2.0
) -> np.ndarray:
    """Distance from every source point to the other surface's KD-tree (0 on shared points)."""
    out = np.zeros(n_src, dtype=np.float64)
    todo = ~src_on_other
    if todo.any():
        out[todo] = tree.query(src_coords[todo], k=1, p=p)[0]  # type: ignore[attr-defined]
    return out


def class_surface_distances(
    pred: np.ndarray, target: np.ndarray, spacing: tuple[float, ...], surface: str, *,
    p: float = 2.0,
) -> SurfaceDistances:
    """Surface distances between two non-empty boolean masks (already cropped is fine).

    Returns the distances in mm from each prediction surface point to the target surface and
    back, with weights (all 1 for ``surface="edge"``, areas for ``"surfel"``). ``p``: the
    Minkowski exponent (2 Euclidean, 1 taxicab, inf chessboard).
    """
    from scipy.spatial import cKDTree

    pp, pt = _pad(pred), _pad(target)
    if surface == "edge":
        sp, st = _edges(pp), _edges(pt)
        wp = wt = None
    elif surface == "surfel":
        cp, ct = _neighbour_codes(pp), _neighbour_codes(pt)
        full = np.uint8(2 ** (2**pred.ndim) - 1)
        sp = (cp != 0) & (cp != full)
        st = (ct != 0) & (ct != full)
        table = surfel_table(tuple(float(s) for s in spacing))
        wp, wt = table[cp[sp]], table[ct[st]]
    else:
        raise ValueError(f"unknown surface definition {surface!r}; expected 'edge' or 'surfel'")
    scale = np.asarray(spacing, dtype=np.float64)
    xp = np.argwhere(sp).astype(np.float64) * scale
    xt = np.argwhere(st).astype(np.float64) * scale
    p_on_t = st[sp]
    t_on_p = sp[st]
    tree_t = cKDTree(xt, leafsize=32)
    tree_p = cKDTree(xp, leafsize=32)
    d_pt = _directed(xp, p_on_t, tree_t, len(xp), p)
    d_tp = _directed(xt, t_on_p, tree_p, len(xt), p)
    if wp is None:
        wp, wt = np.ones(len(xp)), np.ones(len(xt))
    return SurfaceDistances(d_pt, wp, d_tp, wt)


def edt_corner_nsd(mask: np.ndarray, spacing: tuple[float, ...], tolerance: float) -> float:
    """MetricsReloaded's NSD when the other mask is empty: the share of ``mask``'s border voxels
    within ``tolerance`` mm of index ``(-1, 0, ..., 0)``, where SciPy's Euclidean distance
    transform of an image without background puts its nearest "background" voxel. The distances
    are summed as SciPy sums them: ``((feature - index) * spacing)²`` in axis order."""
    idx = [np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != ax)))
           for ax in range(mask.ndim)]
    box = tuple(slice(int(i[0]), int(i[-1]) + 1) for i in idx)
    border = np.argwhere(_edges(_pad(mask[box]))) + np.asarray([b.start for b in box])
    corner = np.zeros(mask.ndim, dtype=np.int64)
    corner[0] = -1
    dt = (corner - border).astype(np.float64) * np.asarray(spacing, dtype=np.float64)
    d2 = dt[:, 0] * dt[:, 0]
    for k in range(1, mask.ndim):
        d2 = d2 + dt[:, k] * dt[:, k]
    return float(np.count_nonzero(np.sqrt(d2) <= tolerance)) / len(d2)


def _percentile(d: np.ndarray, w: np.ndarray, q: float, rule: str) -> float:
    if rule == "area_weighted":
        order = np.lexsort((w, d))  # DeepMind sorts (distance, area) pairs
        ws = w[order]
        # the total over the *sorted* areas, as DeepMind sums it: np.sum's pairwise rounding
        # depends on the order, and where the cumulative area reaches q exactly at the end of a
        # run of equal distances that last bit decides which distance is the percentile
        cum = np.cumsum(ws) / np.sum(ws)
        idx = int(np.searchsorted(cum, q / 100.0))
        return float(d[order][min(idx, len(d) - 1)])
    return float(np.percentile(d, q))


def distance_metric_value(sd: SurfaceDistances, metric: str, rules: DistanceRules,
                          tolerance: float) -> float:
    """One distance metric (mm, or a fraction for ``nsd``) from precomputed surface distances.

    ``metric``: ``"hausdorff"`` (max, or the rules' percentile), ``"hd95"`` (percentile, 95
    unless given), ``"assd"``, ``"masd"`` or ``"nsd"`` (``tolerance`` in mm). With
    ``rules.directed`` only prediction → target distances count (NSD: the share of the
    prediction's surface within the tolerance).
    """
    dp, wp, dt, wt = sd.d_pred_to_target, sd.w_pred, sd.d_target_to_pred, sd.w_target
    conv, directed = rules.conv, rules.directed
    if metric in ("hausdorff", "hd95"):
        q = rules.quantile(metric)
        if q is None:
            return float(dp.max()) if directed else float(max(dp.max(), dt.max()))
        if directed:
            return _percentile(dp, wp, q, conv.percentile_rule)
        if conv.percentile_rule == "pooled":
            return float(np.percentile(np.concatenate([dp, dt]), q))
        return max(_percentile(dp, wp, q, conv.percentile_rule),
                   _percentile(dt, wt, q, conv.percentile_rule))
    if metric == "nsd":
        if directed:
            return float(wp[dp <= tolerance].sum()) / float(wp.sum())
        ok = float(wp[dp <= tolerance].sum() + wt[dt <= tolerance].sum())
        return ok / float(wp.sum() + wt.sum())
    mean_p = float(np.dot(dp, wp) / wp.sum())
    if directed and metric in ("assd", "masd"):
        return mean_p
    mean_t = float(np.dot(dt, wt) / wt.sum())
    if metric == "assd":
        if conv.assd_rule == "mean_of_means":
            return 0.5 * (mean_p + mean_t)
        return float((np.dot(dp, wp) + np.dot(dt, wt)) / (wp.sum() + wt.sum()))
    if metric == "masd":
        return 0.5 * (mean_p + mean_t)
    raise ValueError(f"unknown distance metric {metric!r}")
