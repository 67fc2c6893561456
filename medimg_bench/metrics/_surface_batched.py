"""Distance metrics of every class of a case at once, on the masks' device (the CUDA path).

The per-class path (:mod:`medimg_bench.metrics._surface_torch`) runs a dozen kernels and several
host round trips per class; on a GPU a 41-organ CT is then bound by launches and
synchronisation, not by arithmetic. Here the classes that need distances are processed together:

1. **pack** — classes are sorted by bounding-box volume and cut into groups whose padded stack
   fits a memory budget (and wastes at most half of it on padding); each group is one
   ``(B, *box)`` stack of prediction and target masks, every class cropped to its own box with
   the crop at the origin (so coordinates are the per-class crop's, as in the other backends);
2. **surfaces** of the whole stack (voxel edges or DeepMind surfels);
3. **one exact squared Euclidean distance transform** of the ``2B`` surfaces
   (:func:`~medimg_bench.metrics._surface_torch.squared_edt`: nearest seed along the first
   axis by scans, then full-axis min-plus passes — one fused Triton kernel each on CUDA);
4. **reductions on the device**: the transform is read at the other surface's points, square
   roots taken on the device (CUDA's float64 ``sqrt`` is correctly rounded, as NumPy's is), and
   per class and direction the count, the sum, the order statistics a percentile needs (a
   segmented sort) and the count within the NSD tolerance go to the host in one copy, where
   the KD-tree backend's formulas (NumPy's linear percentile included) give the metrics.

Distances, HD, HD95 and NSD equal the KD-tree backend bit for bit; ASSD/MASD sum in another
order (≤ 1e-12 relative). Conventions with surfel weights (``deepmind``, ``brats``) bring the
distances and weights to the host and use the KD-tree backend's metric code unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from medimg_bench.metrics._surface import SurfaceDistances, _surfel_table, distance_metric_value
from medimg_bench.metrics._surface_torch import (
    CHUNK_BYTES,
    CPU_CHUNK_BYTES,
    _edges,
    _neighbour_codes,
    squared_edt,
)
from medimg_bench.metrics.seg_conventions import SegConvention

__all__ = ["GROUP_SLACK", "case_distance_metrics", "plan_groups", "numpy_linear_percentile"]

#: Whether ``backend="torch"`` uses this path off the CPU (the benchmark compares it with the
#: per-class path by switching it off).
ENABLED = True
#: Use this path for torch-backend CPU tensors too (tests; the CPU default is the KD-tree).
FORCE = False
#: A group's padded volume may be at most this multiple of its classes' own box volumes.
GROUP_SLACK = 2.0
#: Device bytes per voxel of a group's padded box: two float64 transforms and the masks.
BYTES_PER_VOXEL = 24

Item = tuple[int, int, tuple[slice, ...]]  # (output column, class, bounding box)


def plan_groups(shapes: Sequence[tuple[int, ...]], budget_bytes: int) -> list[list[int]]:
    """Indices of ``shapes`` cut into groups processed together: largest boxes first; a group
    takes the next box while its padded stack (every box padded to the group's largest extent
    per axis) stays within ``GROUP_SLACK`` × its own volume and ``budget_bytes``."""
    vol = [math.prod(s) for s in shapes]
    order = sorted(range(len(shapes)), key=lambda i: -vol[i])
    groups: list[list[int]] = []
    cur: list[int] = []
    cur_max: tuple[int, ...] = ()
    cur_sum = 0
    for i in order:
        s = shapes[i]
        if cur:
            grown = tuple(max(a, b) for a, b in zip(cur_max, s))
            padded = math.prod(grown) * (len(cur) + 1)
            if padded <= GROUP_SLACK * (cur_sum + vol[i]) and padded * BYTES_PER_VOXEL <= budget_bytes:
                cur.append(i)
                cur_max, cur_sum = grown, cur_sum + vol[i]
                continue
            groups.append(cur)
        cur, cur_max, cur_sum = [i], tuple(s), vol[i]
    if cur:
        groups.append(cur)
    return groups


def numpy_linear_percentile(lo: float, hi: float, n: int, q: float) -> float:
    """``np.percentile(d, q)`` (linear method) from the two order statistics it reads.

    ``lo``/``hi`` are the sorted values at the indexes :func:`percentile_ranks` gives; the
    arithmetic is NumPy's (virtual index ``(n − 1)·q/100``, ``_lerp``), so the result is the
    same float64 number."""
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        return float(lo)
    prev = math.floor(v)
    t = v - prev
    diff = hi - lo
    if t >= 0.5:
        return float(hi - diff * (1 - t))
    return float(lo + diff * t)


def percentile_ranks(n: int, q: float) -> tuple[int, int]:
    """The 0-based order statistics ``np.percentile(d, q)`` interpolates between (``len(d) = n``)."""
    v = (n - 1) * (q / 100)
    if v >= n - 1:
        return n - 1, n - 1
    prev = math.floor(v)
    return prev, prev + 1


def _stack(p: torch.Tensor, t: torch.Tensor, items: list[Item], one_hot: bool,
           shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-padded ``(B, *(shape + 2))`` boolean stacks of each class's cropped masks."""
    b = len(items)
    full = (b,) + tuple(s + 2 for s in shape)
    ps = torch.zeros(full, dtype=torch.bool, device=p.device)
    ts = torch.zeros(full, dtype=torch.bool, device=p.device)
    for i, (_, cls, box) in enumerate(items):
        dst = (i,) + tuple(slice(1, 1 + (sl.stop - sl.start)) for sl in box)
        if one_hot:
            ps[dst] = p[cls][box].bool()
            ts[dst] = t[cls][box].bool()
        else:
            ps[dst] = p[box] == cls
            ts[dst] = t[box] == cls
    return ps, ts


def _sqrt(x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded float64 square roots: CUDA's ``sqrt`` is; on the CPU NumPy's is used."""
    if x.device.type == "cuda":
        return x.sqrt()
    return torch.from_numpy(np.sqrt(x.cpu().numpy())).to(x.device)


def _segment_order(values: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """``values`` sorted ascending within each segment (segments kept in order)."""
    o1 = torch.argsort(values, stable=True)
    o2 = torch.argsort(seg[o1], stable=True)
    return values[o1[o2]]


class _Direction:
    """Per-class statistics of one direction's distances, gathered on the device."""

    def __init__(self, d: torch.Tensor, counts: np.ndarray, tol: float | None) -> None:
        dev = d.device
        self.counts = counts
        lengths = torch.from_numpy(counts).to(dev)
        self.sums = torch.segment_reduce(d, "sum", lengths=lengths)
        self.seg = torch.repeat_interleave(torch.arange(len(counts), device=dev), lengths,
                                           output_size=int(counts.sum()))
        self.within = (torch.bincount(self.seg[d <= tol], minlength=len(counts))
                       if tol is not None else None)
        self.d = d
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])


def _device_stats(d_pt: torch.Tensor, d_tp: torch.Tensor, n_p: np.ndarray, n_t: np.ndarray,
                  conv: SegConvention, metrics: Sequence[str], percentile: float | None,
                  tolerance: float, directed: bool) -> list[dict[str, float]]:
    """Metric values per class from the distances of a group (edge surfaces, unit weights)."""
    want_nsd = "nsd" in metrics
    fwd = _Direction(d_pt, n_p, tolerance if want_nsd else None)
    bwd = _Direction(d_tp, n_t, tolerance if want_nsd else None)
    b = len(n_p)
    qs = sorted({(percentile if m == "hausdorff" else (95.0 if percentile is None else percentile))
                 for m in metrics if m in ("hausdorff", "hd95")} - {None}, key=float)
    want_max = "hausdorff" in metrics and percentile is None
    pooled = conv.percentile_rule == "pooled" and not directed
    # the order statistics to read: (array, flat index) in one gather per sorted array
    picks: dict[str, list[int]] = {"fwd": [], "bwd": [], "pool": []}
    plan: list[dict] = [{} for _ in range(b)]
    srt_fwd = _segment_order(fwd.d, fwd.seg) if (qs or want_max) else None
    srt_bwd = _segment_order(bwd.d, bwd.seg) if (qs or want_max) and not directed else None
    srt_pool = None
    if qs and pooled:
        both = torch.cat([fwd.d, bwd.d])
        srt_pool = _segment_order(both, torch.cat([fwd.seg, bwd.seg]))
        pool_counts = n_p + n_t
        pool_starts = np.concatenate([[0], np.cumsum(pool_counts)[:-1]])
    for i in range(b):
        if want_max:
            plan[i]["max"] = [("fwd", len(picks["fwd"]))]
            picks["fwd"].append(fwd.starts[i] + n_p[i] - 1)
            if not directed:
                plan[i]["max"].append(("bwd", len(picks["bwd"])))
                picks["bwd"].append(bwd.starts[i] + n_t[i] - 1)
        for q in qs:
            if pooled:
                n = int(pool_counts[i])
                lo, hi = percentile_ranks(n, q)
                plan[i][q] = [("pool", len(picks["pool"]), n)]
                picks["pool"] += [pool_starts[i] + lo, pool_starts[i] + hi]
                continue
            plan[i][q] = []
            for key, st, cnt in (("fwd", fwd.starts, n_p), ("bwd", bwd.starts, n_t)):
                if key == "bwd" and directed:
                    continue
                n = int(cnt[i])
                lo, hi = percentile_ranks(n, q)
                plan[i][q].append((key, len(picks[key]), n))
                picks[key] += [st[i] + lo, st[i] + hi]
    parts = [fwd.sums, bwd.sums]
    if fwd.within is not None:
        parts += [fwd.within.double(), bwd.within.double()]
    for key, srt in (("fwd", srt_fwd), ("bwd", srt_bwd), ("pool", srt_pool)):
        if picks[key]:
            idx = torch.as_tensor(np.asarray(picks[key], dtype=np.int64), device=fwd.d.device)
            parts.append(srt[idx])  # type: ignore[index]
    host = torch.cat(parts).cpu().numpy()  # the group's only device → host copy of results
    sums_p, sums_t = host[:b], host[b : 2 * b]
    pos = 2 * b
    within_p = within_t = None
    if fwd.within is not None:
        within_p, within_t = host[pos : pos + b], host[pos + b : pos + 2 * b]
        pos += 2 * b
    got: dict[str, np.ndarray] = {}
    for key in ("fwd", "bwd", "pool"):
        if picks[key]:
            got[key] = host[pos : pos + len(picks[key])]
            pos += len(picks[key])

    def pct(entry: tuple[str, int, int], q: float) -> float:
        key, k, n = entry
        return numpy_linear_percentile(got[key][k], got[key][k + 1], n, q)

    out: list[dict[str, float]] = []
    for i in range(b):
        vals: dict[str, float] = {}
        npi, nti = float(n_p[i]), float(n_t[i])
        mean_p = float(sums_p[i] / npi)
        mean_t = float(sums_t[i] / nti)
        for m in metrics:
            if m in ("hausdorff", "hd95"):
                q = percentile if m == "hausdorff" else (95.0 if percentile is None else percentile)
                if q is None:
                    vals[m] = float(max(got[k][j] for k, j in plan[i]["max"]))
                    continue
                vals[m] = max(pct(e, q) for e in plan[i][q])
            elif m == "assd":
                if directed:
                    vals[m] = mean_p
                elif conv.assd_rule == "mean_of_means":
                    vals[m] = 0.5 * (mean_p + mean_t)
                else:
                    vals[m] = float((sums_p[i] + sums_t[i]) / (npi + nti))
            elif m == "masd":
                vals[m] = mean_p if directed else 0.5 * (mean_p + mean_t)
            elif m == "nsd":
                vals[m] = float(within_p[i] + within_t[i]) / (npi + nti)  # type: ignore[index]
        out.append(vals)
    return out


def case_distance_metrics(
    p: torch.Tensor, t: torch.Tensor, items: list[Item], spacing: tuple[float, ...],
    conv: SegConvention, metrics: Sequence[str], *, one_hot: bool, percentile: float | None,
    tolerance: float, directed: bool, chunk_bytes: int | None = None,
) -> dict[int, dict[str, float]]:
    """Distance metrics (mm; NSD a fraction) of every ``(column, class, box)`` item of one case,
    keyed by column. ``p``/``t`` are the case's label maps (or one-hot stacks) on their device;
    every item's masks are non-empty in both."""
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if p.device.type != "cpu" else CPU_CHUNK_BYTES
    budget = max(4 * chunk_bytes, 64 << 20)
    shapes = [tuple(sl.stop - sl.start for sl in box) for _, _, box in items]
    results: dict[int, dict[str, float]] = {}
    for group in plan_groups(shapes, budget):
        sub = [items[i] for i in group]
        shape = tuple(max(shapes[i][k] for i in group) for k in range(len(shapes[group[0]])))
        results.update(_group_metrics(p, t, sub, shape, spacing, conv, metrics, one_hot=one_hot,
                                      percentile=percentile, tolerance=tolerance,
                                      directed=directed, chunk_bytes=chunk_bytes))
    return results


def _group_metrics(p, t, items, shape, spacing, conv, metrics, *, one_hot, percentile, tolerance,
                   directed, chunk_bytes) -> dict[int, dict[str, float]]:
    ps, ts = _stack(p, t, items, one_hot, shape)
    b = len(items)
    if conv.surface == "edge":
        sp, st = _edges(ps, lead=1), _edges(ts, lead=1)
        wp = wt = None
    else:
        cp, ct = _neighbour_codes(ps, lead=1), _neighbour_codes(ts, lead=1)
        full = 2 ** (2 ** len(shape)) - 1
        sp, st = (cp != 0) & (cp != full), (ct != 0) & (ct != full)
        table = torch.from_numpy(_surfel_table(tuple(float(s) for s in spacing))).to(p.device)
        wp, wt = table[cp[sp].long()], table[ct[st].long()]
        del cp, ct
    del ps, ts
    dev = sp.device
    coords = [torch.arange(n, dtype=torch.float64, device=dev) * float(s)
              for n, s in zip(sp.shape[1:], spacing)]
    g = squared_edt(torch.cat([st, sp]), coords, chunk_bytes=chunk_bytes)
    d2_pt, d2_tp = g[:b][sp], g[b:][st]
    del g
    counts = torch.stack([sp.flatten(1).sum(1), st.flatten(1).sum(1)]).cpu().numpy()
    n_p, n_t = counts[0], counts[1]
    if wp is None:
        stats = _device_stats(_sqrt(d2_pt), _sqrt(d2_tp), n_p, n_t, conv, metrics, percentile,
                              tolerance, directed)
        return {j: v for (j, _, _), v in zip(items, stats)}
    parts = [d2_pt, d2_tp] + ([wp, wt] if wp is not None else [])
    host = torch.cat(parts).cpu().numpy()
    d_pt_all, d_tp_all = np.sqrt(host[: n_p.sum()]), np.sqrt(host[n_p.sum(): n_p.sum() + n_t.sum()])
    off = n_p.sum() + n_t.sum()
    w_pt_all = host[off : off + n_p.sum()] if wp is not None else None
    w_tp_all = host[off + n_p.sum():] if wp is not None else None
    sp_starts = np.concatenate([[0], np.cumsum(n_p)])
    st_starts = np.concatenate([[0], np.cumsum(n_t)])
    out: dict[int, dict[str, float]] = {}
    for i, (j, _, _) in enumerate(items):
        a, z = sp_starts[i], sp_starts[i + 1]
        c, e = st_starts[i], st_starts[i + 1]
        sd = SurfaceDistances(
            d_pt_all[a:z], w_pt_all[a:z] if w_pt_all is not None else np.ones(z - a),
            d_tp_all[c:e], w_tp_all[c:e] if w_tp_all is not None else np.ones(e - c),
        )
        out[j] = {m: distance_metric_value(sd, m, conv, percentile=percentile, tolerance=tolerance,
                                           directed=directed) for m in metrics}
    return out
