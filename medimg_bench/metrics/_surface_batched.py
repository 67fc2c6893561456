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
from typing import Any, NamedTuple

import numpy as np
import torch

from medimg_bench.metrics import _minplus_triton
from medimg_bench.metrics._surface import (
    DistanceRules,
    SurfaceDistances,
    distance_metric_value,
    surfel_table,
)
from medimg_bench.metrics._surface_torch import (
    CHUNK_BYTES,
    CPU_CHUNK_BYTES,
    edges,
    first_axis_pass,
    min_plus,
    neighbour_codes,
    other_axes_passes,
)

__all__ = ["GROUP_SLACK", "Item", "distance_metrics", "plan_groups", "numpy_linear_percentile"]

#: Half-width (voxels) of the min-plus window along the axes after the first: a point whose
#: windowed distance is not provably exact (a seed beyond the window could be nearer) is searched
#: exactly over its whole plane of the first pass.
WINDOW = 16
#: Whether ``backend="torch"`` uses this path off the CPU (the benchmark compares it with the
#: per-class path by switching it off).
ENABLED = True
#: Set to a dict to collect device-synchronised seconds per step (benchmarks only).
TIMINGS: dict[str, float] | None = None
#: Use this path for torch-backend CPU tensors too (tests; the CPU default is the KD-tree).
FORCE = False
#: A group's padded volume may be at most this multiple of its classes' own box volumes.
GROUP_SLACK = 2.0
#: On a GPU a group may also waste this many padding voxels: fewer groups, fewer launches and
#: synchronisations (a group's fixed cost is a few ms; a padding voxel's well under a ns).
GPU_WASTE_VOXELS = 8_000_000
#: Device bytes per voxel of a group's padded box: the first pass and the transform (float64,
#: both surfaces) and the masks.
BYTES_PER_VOXEL = 40

class Item(NamedTuple):
    """One class of one case that needs distances: values come back under ``key``."""

    key: Any  # e.g. (case, column)
    pred: torch.Tensor  # the case's label map, or its one-hot stack
    target: torch.Tensor
    cls: int
    box: tuple[slice, ...]  # bounding box of pred | target for the class
    tolerance: float = 1.0  # NSD tolerance (mm) of the item's class


def plan_groups(shapes: Sequence[tuple[int, ...]], budget_bytes: int, *,
                waste_voxels: int = 0) -> list[list[int]]:
    """Indices of ``shapes`` cut into groups processed together: largest boxes first; a group
    takes the next box while its padded stack (every box padded to the group's largest extent
    per axis) stays within ``budget_bytes`` and wastes at most ``GROUP_SLACK`` × its own volume
    or ``waste_voxels`` voxels (a group costs a fixed overhead; padding costs per voxel)."""
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
            own = cur_sum + vol[i]
            cheap = padded <= GROUP_SLACK * own or padded - own <= waste_voxels
            if cheap and padded * BYTES_PER_VOXEL <= budget_bytes:
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


def _stack(items: list[Item], one_hot: bool, shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-padded ``(B, *(shape + 2))`` boolean stacks of each item's cropped masks."""
    b = len(items)
    full = (b,) + tuple(s + 2 for s in shape)
    dev = items[0].pred.device
    ps = torch.zeros(full, dtype=torch.bool, device=dev)
    ts = torch.zeros(full, dtype=torch.bool, device=dev)
    for i, it in enumerate(items):
        dst = (i,) + tuple(slice(1, 1 + (sl.stop - sl.start)) for sl in it.box)
        if one_hot:
            ps[dst] = it.pred[it.cls][it.box].bool()
            ts[dst] = it.target[it.cls][it.box].bool()
        else:
            ps[dst] = it.pred[it.box] == it.cls
            ts[dst] = it.target[it.box] == it.cls
    return ps, ts


class _Clock:
    """Adds device-synchronised step times to :data:`TIMINGS` when it is set."""

    def __init__(self, dev: torch.device) -> None:
        self.on = TIMINGS is not None
        self.dev = dev
        self.t = self._now()

    def _now(self) -> float:
        if not self.on:
            return 0.0
        import time

        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)
        return time.perf_counter()

    def __call__(self, step: str) -> None:
        if self.on:
            now = self._now()
            TIMINGS[step] = TIMINGS.get(step, 0.0) + now - self.t  # type: ignore[index]
            self.t = now


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


def _plan_picks(n_p: np.ndarray, n_t: np.ndarray, metrics: Sequence[str],
                rules: DistanceRules) -> tuple[dict[str, list[int]], list[dict]]:
    """Which order statistics the percentiles and maxima read: flat indexes into the sorted
    ``"dir"`` array (``2B`` segments: class ``i`` forwards is ``i``, backwards ``B + i``) or the
    ``"pool"`` array (``B`` segments holding both directions), and per class where each lands."""
    b = len(n_p)
    lengths = np.concatenate([n_p, n_t])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    qs = sorted({rules.quantile(m) for m in metrics if m in ("hausdorff", "hd95")} - {None}, key=float)
    want_max = "hausdorff" in metrics and rules.percentile is None
    pooled = rules.conv.percentile_rule == "pooled" and not rules.directed
    picks: dict[str, list[int]] = {"dir": [], "pool": []}
    plan: list[dict] = [{} for _ in range(b)]
    sides = (0,) if rules.directed else (0, 1)
    pool_starts = np.concatenate([[0], np.cumsum(n_p + n_t)[:-1]])
    for i in range(b):
        if want_max:
            plan[i]["max"] = []
            for side in sides:
                plan[i]["max"].append(len(picks["dir"]))
                picks["dir"].append(starts[side * b + i] + lengths[side * b + i] - 1)
        for q in qs:
            plan[i][q] = []
            runs = ([("pool", pool_starts[i], int(n_p[i] + n_t[i]))] if pooled else
                    [("dir", starts[side * b + i], int(lengths[side * b + i])) for side in sides])
            for key, start, n in runs:
                lo, hi = percentile_ranks(n, q)
                plan[i][q].append((key, len(picks[key]), n))
                picks[key] += [start + lo, start + hi]
    return picks, plan


def _device_reductions(d: torch.Tensor, lengths: np.ndarray, tols: np.ndarray, want_nsd: bool,
                       picks: dict[str, list[int]]) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """On the device: per segment the sum, the count within its class's tolerance and the picked
    order statistics; one copy to the host. Returns ``(sums, within, {"dir"|"pool": values})``."""
    dev, n_seg = d.device, len(lengths)
    b = n_seg // 2
    lens = torch.from_numpy(lengths).to(dev)
    seg = torch.repeat_interleave(torch.arange(n_seg, device=dev), lens, output_size=int(lengths.sum()))
    parts = [torch.segment_reduce(d, "sum", lengths=lens)]
    if want_nsd:
        tol_seg = torch.from_numpy(np.concatenate([tols, tols])).to(dev)[seg]
        parts.append(torch.bincount(seg[d <= tol_seg], minlength=n_seg).double())
    if picks["dir"]:
        parts.append(_segment_order(d, seg)[torch.as_tensor(np.asarray(picks["dir"]), device=dev)])
    if picks["pool"]:
        srt = _segment_order(d, torch.where(seg >= b, seg - b, seg))
        parts.append(srt[torch.as_tensor(np.asarray(picks["pool"]), device=dev)])
    host = torch.cat(parts).cpu().numpy()  # the group's only device → host copy of results
    pos = n_seg
    within = None
    if want_nsd:
        within, pos = host[pos : pos + n_seg], pos + n_seg
    got = {}
    for key in ("dir", "pool"):
        got[key] = host[pos : pos + len(picks[key])]
        pos += len(picks[key])
    return host[:n_seg], within, got


def _class_values(i: int, n_p: np.ndarray, n_t: np.ndarray, sums: np.ndarray,
                  within: np.ndarray | None, got: dict, plan: list[dict], metrics: Sequence[str],
                  rules: DistanceRules) -> dict[str, float]:
    """The metric values of class ``i`` from its sums, counts and order statistics (the
    KD-tree backend's formulas)."""
    b = len(n_p)
    npi, nti = float(n_p[i]), float(n_t[i])
    sum_p, sum_t = sums[i], sums[b + i]
    mean_p, mean_t = float(sum_p / npi), float(sum_t / nti)
    vals: dict[str, float] = {}
    for m in metrics:
        if m in ("hausdorff", "hd95"):
            q = rules.quantile(m)
            if q is None:
                vals[m] = float(max(got["dir"][k] for k in plan[i]["max"]))
            else:
                vals[m] = max(numpy_linear_percentile(got[key][k], got[key][k + 1], n, q)
                              for key, k, n in plan[i][q])
        elif m in ("assd", "masd") and rules.directed:
            vals[m] = mean_p
        elif m == "assd" and rules.conv.assd_rule != "mean_of_means":
            vals[m] = float((sum_p + sum_t) / (npi + nti))
        elif m in ("assd", "masd"):
            vals[m] = 0.5 * (mean_p + mean_t)
        elif m == "nsd" and rules.directed:
            vals[m] = float(within[i]) / npi  # type: ignore[index]
        elif m == "nsd":
            vals[m] = float(within[i] + within[b + i]) / (npi + nti)  # type: ignore[index]
    return vals


def _device_stats(d_pt: torch.Tensor, d_tp: torch.Tensor, n_p: np.ndarray, n_t: np.ndarray,
                  tols: np.ndarray, rules: DistanceRules, metrics: Sequence[str]) -> list[dict[str, float]]:
    """Metric values per class from the distances of a group (edge surfaces, unit weights).

    Both directions are one array of ``2B`` segments (class ``i`` forwards is segment ``i``,
    backwards ``B + i``): one segmented sort, one segmented sum, one count within each class's
    tolerance ``tols[i]``, and one gather of the order statistics the percentiles read, copied
    to the host at once."""
    picks, plan = _plan_picks(n_p, n_t, metrics, rules)
    sums, within, got = _device_reductions(torch.cat([d_pt, d_tp]), np.concatenate([n_p, n_t]),
                                           tols, "nsd" in metrics, picks)
    return [_class_values(i, n_p, n_t, sums, within, got, plan, metrics, rules) for i in range(len(n_p))]


def distance_metrics(
    items: list[Item], spacing: tuple[float, ...], rules: DistanceRules, metrics: Sequence[str], *,
    one_hot: bool, chunk_bytes: int | None = None,
) -> dict[Any, dict[str, float]]:
    """Distance metrics (mm; NSD a fraction at each item's ``tolerance``) of every item — classes
    of one or several cases with the same ``spacing`` — keyed by ``item.key``; every item's masks
    are non-empty in both. Euclidean distances only (``rules.p == 2``)."""
    if rules.p != 2.0:
        raise ValueError("the batched distance transforms measure Euclidean distances only")
    dev = items[0].pred.device
    if chunk_bytes is None:
        chunk_bytes = CHUNK_BYTES if dev.type != "cpu" else CPU_CHUNK_BYTES
    # groups are bigger than the chunks of the passes: fewer groups, fewer synchronisations
    budget = max((16 if dev.type == "cuda" else 4) * chunk_bytes, 64 << 20)
    shapes = [tuple(sl.stop - sl.start for sl in it.box) for it in items]
    results: dict[Any, dict[str, float]] = {}
    waste = GPU_WASTE_VOXELS if dev.type == "cuda" else 0
    for group in plan_groups(shapes, budget, waste_voxels=waste):
        sub = [items[i] for i in group]
        shape = tuple(max(shapes[i][k] for i in group) for k in range(len(shapes[group[0]])))
        results.update(_group_metrics(sub, shape, spacing, rules, metrics, one_hot=one_hot,
                                      chunk_bytes=chunk_bytes))
    return results


def _last_axis_at(g: torch.Tensor, q: torch.Tensor, offset: int, coord: torch.Tensor,
                  window: int | None, chunk_bytes: int) -> torch.Tensor:
    """The last min-plus pass of a ``(2B, n0, n1, n2)`` transform at the points ``q`` only:
    ``min_y g[item + offset, i0, i1, y] + (coord[i2] − coord[y])²`` over ``|y − i2| ≤ window``
    (or the whole axis), the same sums as the full pass."""
    n0, n1, n2 = g.shape[1:]
    out = torch.empty(q.shape[0], dtype=torch.float64, device=g.device)
    if q.shape[0] == 0:
        return out
    diff = coord[:, None] - coord[None, :]
    table = diff * diff
    span = torch.arange(n2, device=g.device) if window is None else torch.arange(-window, window + 1, device=g.device)
    flat = g.view(-1)
    step = max(1, chunk_bytes // (8 * 4 * span.numel()))
    for a in range(0, q.shape[0], step):
        qi = q[a : a + step]
        base = (((qi[:, 0] + offset) * n0 + qi[:, 1]) * n1 + qi[:, 2]) * n2
        x = qi[:, 3]
        y = span[None, :].expand(qi.shape[0], -1) if window is None else x[:, None] + span[None, :]
        yc = y.clamp(0, n2 - 1)
        vals = flat[base[:, None] + yc] + table[x[:, None], yc]
        if window is not None:
            vals = torch.where((y >= 0) & (y < n2), vals, math.inf)
        out[a : a + step] = vals.amin(1)
    return out


def _exact_far(qp, qt, b, g1, d2_pt, d2_tp, bound, coords, chunk_bytes, full_cost):
    """Replace the windowed transform's values that are not provably exact (at or above
    ``bound``, the squared distance of the nearest seed the window may have missed) by the exact
    minimum over the query's whole plane of the first pass ``g1`` (``g1[item, i0] + T1[i1] + …``,
    added in axis order like the passes) — or return ``None`` when that costs more than
    ``full_cost`` (the transform over whole axes), for the caller to redo it."""
    far_p, far_t = d2_pt >= bound, d2_tp >= bound
    n_far = int(far_p.sum() + far_t.sum())
    if n_far == 0:
        return d2_pt, d2_tp
    plane = math.prod(g1.shape[2:])
    if n_far * plane > full_cost:
        return None
    tables = []
    for c in coords[1:]:
        diff = c[:, None] - c[None, :]
        tables.append(diff * diff)
    for d2, far, q_all, offset in ((d2_pt, far_p, qp, 0), (d2_tp, far_t, qt, b)):
        pos = torch.nonzero(far).squeeze(1)
        if pos.numel() == 0:
            continue
        q = q_all[pos]  # (item, i0, i1, ...) in the same order as d2
        if len(tables) == 2 and _minplus_triton.available(g1):
            planes = (q[:, 0] + offset) * g1.shape[1] + q[:, 1]
            d2[pos] = _minplus_triton.plane_min(g1.view(-1, *g1.shape[2:]), planes, q[:, 2], q[:, 3],
                                                tables[0], tables[1])
            continue
        step = max(1, chunk_bytes // (8 * plane))
        for a in range(0, q.shape[0], step):
            qi = q[a : a + step]
            vals = g1[qi[:, 0] + offset, qi[:, 1]]  # the seeds of the other surface
            for k, table in enumerate(tables):
                shape = [qi.shape[0]] + [1] * len(tables)
                shape[1 + k] = table.shape[1]
                vals = vals + table[qi[:, 2 + k]].view(shape)
            d2[pos[a : a + step]] = vals.flatten(1).amin(1)
    return d2_pt, d2_tp


def _group_surfaces(items: list[Item], shape: tuple[int, ...], spacing: tuple[float, ...],
                    surface: str, one_hot: bool, clock: _Clock):
    """Surfaces of the group's stacked masks and their weights (``None``: edge surfaces, unit
    weights)."""
    ps, ts = _stack(items, one_hot, shape)
    clock("stack")
    if surface == "edge":
        return edges(ps, lead=1), edges(ts, lead=1), None, None
    cp, ct = neighbour_codes(ps, lead=1), neighbour_codes(ts, lead=1)
    full = 2 ** (2 ** len(shape)) - 1
    sp, st = (cp != 0) & (cp != full), (ct != 0) & (ct != full)
    table = torch.from_numpy(surfel_table(tuple(float(s) for s in spacing))).to(sp.device)
    return sp, st, table[cp[sp].long()], table[ct[st].long()]


def _group_squared_distances(sp: torch.Tensor, st: torch.Tensor, spacing: tuple[float, ...],
                             chunk_bytes: int, clock: _Clock) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared distances of each surface point of the ``(B, *box)`` stacks to the other surface
    of its item: windowed transforms, then the exact search for points the window may miss."""
    b, dev = sp.shape[0], sp.device
    coords = [torch.arange(n, dtype=torch.float64, device=dev) * float(s)
              for n, s in zip(sp.shape[1:], spacing)]
    win: list[int | None] = [None] + [WINDOW if 2 * WINDOW + 1 < n else None for n in sp.shape[2:]]
    g1 = first_axis_pass(torch.cat([st, sp]), coords[0])
    bounds = [((w + 1) * float(s)) ** 2 for w, s in zip(win[1:], spacing[1:]) if w is not None]
    clock("first pass")
    qp, qt = torch.nonzero(sp), torch.nonzero(st)  # (item, i0, ...): the order of g[:b][sp]
    g = g1.clone() if bounds else g1
    if sp.ndim == 4:
        # the middle axis over the whole stack, the last one only where it is read: at the points
        # of the other surface (a tenth of the volume's work for that pass, no readout copy)
        g = min_plus(g, 2, coords[1], chunk_bytes, win[1])
        d2_pt = _last_axis_at(g, qp, 0, coords[2], win[2], chunk_bytes)
        d2_tp = _last_axis_at(g, qt, b, coords[2], win[2], chunk_bytes)
    else:
        g = other_axes_passes(g, coords, chunk_bytes=chunk_bytes, window=win)
        d2_pt, d2_tp = g[:b][sp], g[b:][st]
    del g
    clock("min-plus passes")
    if bounds:
        # margin for the rounding of the excluded seeds' sums
        full_cost = g1.numel() * sum(g1.shape[2:])
        exact = _exact_far(qp, qt, b, g1, d2_pt, d2_tp, min(bounds) * (1 - 1e-9), coords,
                           chunk_bytes, full_cost)
        if exact is None:
            g = other_axes_passes(g1, coords, chunk_bytes=chunk_bytes)
            exact = g[:b][sp], g[b:][st]
            del g
        d2_pt, d2_tp = exact
    clock("far points")
    return d2_pt, d2_tp


def _group_metrics(items: list[Item], shape: tuple[int, ...], spacing: tuple[float, ...],
                   rules: DistanceRules, metrics: Sequence[str], *, one_hot: bool,
                   chunk_bytes: int) -> dict[Any, dict[str, float]]:
    clock = _Clock(items[0].pred.device)
    sp, st, wp, wt = _group_surfaces(items, shape, spacing, rules.conv.surface, one_hot, clock)
    clock("surfaces")
    d2_pt, d2_tp = _group_squared_distances(sp, st, spacing, chunk_bytes, clock)
    counts = torch.stack([sp.flatten(1).sum(1), st.flatten(1).sum(1)]).cpu().numpy()
    n_p, n_t = counts[0], counts[1]
    tols = np.asarray([it.tolerance for it in items], dtype=np.float64)
    if wp is None:
        stats = _device_stats(_sqrt(d2_pt), _sqrt(d2_tp), n_p, n_t, tols, rules, metrics)
        clock("statistics")
        return {it.key: v for it, v in zip(items, stats)}
    # surfel weights: distances and weights to the host, the KD-tree backend's metric code
    host = torch.cat([d2_pt, d2_tp, wp, wt]).cpu().numpy()
    a_p, a_t = int(n_p.sum()), int(n_t.sum())
    d_pt_all, d_tp_all = np.sqrt(host[:a_p]), np.sqrt(host[a_p : a_p + a_t])
    w_pt_all, w_tp_all = host[a_p + a_t : 2 * a_p + a_t], host[2 * a_p + a_t :]
    sp_starts = np.concatenate([[0], np.cumsum(n_p)])
    st_starts = np.concatenate([[0], np.cumsum(n_t)])
    out: dict[Any, dict[str, float]] = {}
    for i, it in enumerate(items):
        a, z = sp_starts[i], sp_starts[i + 1]
        c, e = st_starts[i], st_starts[i + 1]
        sd = SurfaceDistances(d_pt_all[a:z], w_pt_all[a:z], d_tp_all[c:e], w_tp_all[c:e])
        out[it.key] = {m: distance_metric_value(sd, m, rules, it.tolerance) for m in metrics}
    return out
