"""Resampling statistics: bootstrap confidence intervals (optionally clustered by patient),
paired bootstrap comparisons of two models and DeLong's test for two correlated AUROCs.

Bootstraps are vectorised over resamples: each block of resamples is a matrix of cluster counts
(how many times each patient, or sample, is drawn), and a metric with a fast path evaluates the
whole block at once. Per-sample means (``metric="mean"`` or :func:`nanmean`) use per-cluster
sums; the bound ``functional`` of a stateful dataset-level metric with ``cluster_weighted``
(AUROC, AUPRC, sensitivity/specificity/F1/accuracy, sensitivity at specificity, ECE) builds a
matrix of per-cluster contributions once and takes one matrix product per block
(``metrics/_resample.py``); a metric with ``weighted_functional`` gets sample weights; any other
callable is called once per resample on the resampled rows. The random stream (and so the
intervals for a seed) does not depend on which path runs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics._resample import mark_counts, shared_plans

__all__ = [
    "BootstrapResult",
    "PairedBootstrapResult",
    "DeLongResult",
    "bootstrap_ci",
    "bootstrap_cis",
    "paired_bootstrap",
    "delong_test",
    "nanmean",
    "bootstrap_counts",
]

_JACKKNIFE_MAX = 1000  # above this many clusters BCa uses a grouped jackknife of 1000 blocks
_CHUNK_ELEMENTS = 4_000_000  # resamples × samples per weight block (float64: 32 MB)
_EVAL_ELEMENTS = 2**23  # resamples × clusters per block of counts handed to the metrics (64 MB)


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimate and confidence interval (arrays of the metric's output shape).

    ``n_valid`` counts, per output, the resamples where the metric was defined (not NaN);
    ``std_error`` is the standard deviation of the bootstrap distribution.
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    confidence: float
    n_resamples: int
    method: str
    n_valid: np.ndarray | None = None
    std_error: np.ndarray | None = None


@dataclass(frozen=True)
class PairedBootstrapResult:
    """Two models on the same resamples: estimates, their difference ``a − b`` and its CI.

    ``p_value`` is two-sided for "no difference", from the bootstrap distribution of the
    difference shifted to the null: ``(1 + #{|d*_b − d̂| ≥ |d̂|}) / (1 + B)``.
    """

    estimate_a: np.ndarray
    estimate_b: np.ndarray
    difference: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    confidence: float
    n_resamples: int
    method: str


@dataclass(frozen=True)
class DeLongResult:
    """DeLong's test: AUROCs, their difference ``a − b``, its CI, z and the two-sided p-value."""

    auc_a: float
    auc_b: float
    difference: float
    low: float
    high: float
    z: float
    p_value: float
    covariance: np.ndarray  # 2×2 covariance of (auc_a, auc_b)
    confidence: float


# -- statistics that accept sample weights -------------------------------------------------------
def nanmean(values: Any) -> torch.Tensor:
    """Mean over rows ignoring NaN: ``(N, C)`` per-sample values → ``(C,)`` (NaN if all NaN).

    Passed to :func:`bootstrap_ci` it takes the vectorised path (a weights × values product).
    """
    v = torch.as_tensor(values)
    return v.double().nanmean(0)


def _to_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


class _Statistic:
    """A statistic of the samples: the full-data value and values for blocks of weights."""

    def __init__(self, metric: Any, pred: Any, target: Any) -> None:
        self.pred, self.target = pred, target
        self.n = int(pred.shape[0])
        self.kind = "loop"
        self.weighted: Callable[[torch.Tensor], torch.Tensor] | None = None
        if (isinstance(metric, str) and metric == "mean") or metric is nanmean:
            if target is not None:
                raise ValueError("metric='mean' averages per-sample values; pass target=None")
            v = torch.as_tensor(pred).double()
            v2 = v.reshape(v.shape[0], -1)
            filled, present = v2.nan_to_num(), (~v2.isnan()).double()
            self.shape = v.shape[1:]
            self.kind = "mean"
            self.weighted = lambda w: ((w @ filled) / (w @ present)).reshape(w.shape[0], *self.shape)
            self.metric: Callable[..., Any] = nanmean
            return
        if isinstance(metric, str):
            raise ValueError(f"unknown metric {metric!r}; pass a callable or 'mean'")
        self.metric = metric
        owner = getattr(metric, "__self__", None)
        fast = getattr(metric, "weighted", None) or (
            getattr(owner, "weighted_functional", None) if getattr(metric, "__name__", "") == "functional" else None
        )
        if fast is not None and target is not None:
            self.kind = "weighted"
            self.weighted = lambda w: fast(pred, target, w)
        if getattr(metric, "__name__", "") == "functional" and target is not None:
            self._cluster_factory = getattr(owner, "cluster_weighted", None)

    _cluster_factory: Callable[..., Any] | None = None
    _cluster_fn: Callable[[torch.Tensor], torch.Tensor] | None = None
    _cluster: np.ndarray | None = None
    _n_clusters = 0

    def bind(self, cluster: np.ndarray, n_clusters: int) -> None:
        """Prepare values for cluster counts: the metric's cluster-level fast path when it has
        one (``cluster_weighted``), per-cluster sums for means, else sample weights."""
        if self._cluster is cluster:
            return
        self._cluster, self._n_clusters = cluster, n_clusters
        if self.kind == "mean":
            v = torch.as_tensor(self.pred).double()
            v2 = v.reshape(v.shape[0], -1)
            idx = torch.as_tensor(cluster, dtype=torch.long)
            zeros = torch.zeros(n_clusters, v2.shape[1], dtype=torch.float64)
            filled = zeros.index_add(0, idx, v2.nan_to_num())
            present = zeros.index_add(0, idx, (~v2.isnan()).double())
            self._cluster_fn = lambda c: ((c @ filled) / (c @ present)).reshape(c.shape[0], *self.shape)
        elif self._cluster_factory is not None:
            self._cluster_fn = self._cluster_factory(self.pred, self.target, cluster, n_clusters)

    def at_clusters(self, counts: np.ndarray | torch.Tensor) -> np.ndarray:
        """Values for cluster weights ``counts`` (b, G) → (b, *output shape)."""
        if self._cluster_fn is None:
            return self.at(np.asarray(counts)[:, self._cluster])
        c = _counts_tensor(counts)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return _to_numpy(self._cluster_fn(c))

    def full(self) -> np.ndarray:
        if getattr(self._cluster_fn, "estimates", False):
            # the full data is the resample drawing every cluster once: no second pass over it
            ones = mark_counts(torch.ones(1, self._n_clusters, dtype=torch.float64))
            return self.at_clusters(ones)[0]
        out = self.metric(self.pred) if self.target is None else self.metric(self.pred, self.target)
        return _to_numpy(out)

    def at(self, weights: np.ndarray) -> np.ndarray:
        """Values for integer sample weights (b, N) → (b, *output shape)."""
        if self.weighted is not None:
            device = self.pred.device if isinstance(self.pred, torch.Tensor) else "cpu"
            w = torch.as_tensor(weights, dtype=torch.float64, device=device)
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                return _to_numpy(self.weighted(w))
        rows = []
        for row in weights:
            idx = torch.as_tensor(np.repeat(np.arange(self.n), row.astype(np.int64)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = _take(self.pred, idx)
                out = self.metric(p) if self.target is None else self.metric(p, _take(self.target, idx))
            rows.append(_to_numpy(out))
        return np.stack(rows)


class _WithMean(_Statistic):
    """Appends, per resample, the NaN-ignoring mean of the statistic's outputs (a macro mean)."""

    def __init__(self, inner: _Statistic) -> None:
        self.inner, self.n = inner, inner.n

    @staticmethod
    def _append(x: np.ndarray, axis_from: int) -> np.ndarray:
        flat = x.reshape(*x.shape[:axis_from], -1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(flat, axis=-1, keepdims=True)
        return np.concatenate([flat, mean], axis=-1)

    def full(self) -> np.ndarray:
        return self._append(np.atleast_1d(self.inner.full()), 0)

    def at(self, weights: np.ndarray) -> np.ndarray:
        return self._append(self.inner.at(weights).reshape(weights.shape[0], -1), 1)

    def bind(self, cluster: np.ndarray, n_clusters: int) -> None:
        self.inner.bind(cluster, n_clusters)

    def at_clusters(self, counts: np.ndarray | torch.Tensor) -> np.ndarray:
        return self._append(self.inner.at_clusters(counts).reshape(counts.shape[0], -1), 1)


def _counts_tensor(counts: np.ndarray | torch.Tensor) -> torch.Tensor:
    if isinstance(counts, torch.Tensor):
        return counts
    return torch.from_numpy(np.ascontiguousarray(counts, dtype=np.float64))


def _take(x: Any, idx: torch.Tensor) -> Any:
    if isinstance(x, torch.Tensor):
        return x[idx.to(x.device)]
    return np.asarray(x)[idx.numpy()]


# -- resampling ----------------------------------------------------------------------------------
def _clusters(groups: Any, n: int) -> tuple[np.ndarray, int]:
    """Cluster index of each sample (0..G-1) and G; one cluster per sample without groups."""
    if groups is None:
        return np.arange(n), n
    g = np.asarray(groups.cpu() if isinstance(groups, torch.Tensor) else groups)
    if g.shape[0] != n:
        raise ValueError(f"groups has {g.shape[0]} entries for {n} samples")
    _, inverse = np.unique(g.astype(str), return_inverse=True)
    return inverse.reshape(-1), int(inverse.max()) + 1


def bootstrap_counts(n_clusters: int, n_resamples: int, *, seed: int = 0, block: int | None = None) -> Iterator[np.ndarray]:
    """Yield blocks (b, n_clusters) of bootstrap counts: how often each cluster is drawn.

    Each row is one resample of ``n_clusters`` draws with replacement; the stream depends only
    on ``seed``, ``n_clusters`` and ``block`` (default: 4e6 / n_clusters rows per block).
    """
    rng = np.random.default_rng(seed)
    block = block or max(1, _CHUNK_ELEMENTS // max(1, n_clusters))
    done = 0
    while done < n_resamples:
        b = min(block, n_resamples - done)
        draws = rng.integers(0, n_clusters, size=(b, n_clusters))
        flat = draws + (np.arange(b) * n_clusters)[:, None]
        yield np.bincount(flat.ravel(), minlength=b * n_clusters).reshape(b, n_clusters)
        done += b


def _distributions(stats: list[_Statistic], cluster: np.ndarray, n_clusters: int, n_resamples: int,
                   seed: int) -> list[np.ndarray]:
    """Every statistic on the same resamples: one stream of counts, blocks of several draws."""
    # the draw block fixes the random stream: keep it, so intervals do not change with the code;
    # evaluation blocks join consecutive draw blocks (fewer, larger products)
    draw = max(1, _CHUNK_ELEMENTS // max(1, stats[0].n, n_clusters))
    joined = max(draw, _EVAL_ELEMENTS // max(1, n_clusters))
    out: list[list[np.ndarray]] = [[] for _ in stats]
    pending: list[np.ndarray] = []

    def flush() -> None:
        block = np.empty((sum(len(c) for c in pending), n_clusters))
        np.concatenate(pending, out=block, casting="unsafe")  # int64 → float64 in the copy
        counts = mark_counts(torch.from_numpy(block))
        pending.clear()
        for i, stat in enumerate(stats):  # the same tensor object: shared plans see one block
            out[i].append(stat.at_clusters(counts))

    with shared_plans():
        for stat in stats:
            stat.bind(cluster, n_clusters)
        for counts in bootstrap_counts(n_clusters, n_resamples, seed=seed, block=draw):
            pending.append(counts)
            if sum(len(c) for c in pending) >= joined:
                flush()
        if pending:
            flush()
    return [np.concatenate(o) for o in out]


def _jackknife(stat: _Statistic, cluster: np.ndarray, n_clusters: int, seed: int) -> np.ndarray:
    """Leave-one-cluster-out values (grouped into ``_JACKKNIFE_MAX`` blocks when larger)."""
    if n_clusters <= _JACKKNIFE_MAX:
        block_of = np.arange(n_clusters)
        n_blocks = n_clusters
    else:
        block_of = np.random.default_rng(seed + 1).permutation(n_clusters) % _JACKKNIFE_MAX
        n_blocks = _JACKKNIFE_MAX
    stat.bind(cluster, n_clusters)
    rows = max(1, _CHUNK_ELEMENTS // max(1, stat.n))
    out = []
    for start in range(0, n_blocks, rows):
        ids = np.arange(start, min(n_blocks, start + rows))
        out.append(stat.at_clusters((block_of[None, :] != ids[:, None]).astype(np.float64)))
    return np.concatenate(out)


def _nanquantile(arr: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-output quantiles ``q`` (same shape as one output) of ``arr`` (B, *shape)."""
    flat = arr.reshape(arr.shape[0], -1)
    qf = np.broadcast_to(q, arr.shape[1:]).reshape(-1)
    out = np.full(flat.shape[1], np.nan)
    clean = ~np.isnan(flat).any(0) & ~np.isnan(qf)
    # columns without NaN that share a level: one call (the same numbers as one per column)
    for level in np.unique(qf[clean]):
        cols = np.flatnonzero(clean & (qf == level))
        out[cols] = np.quantile(flat[:, cols], level, axis=0)
    for j in np.flatnonzero(~clean):
        col = flat[:, j]
        col = col[~np.isnan(col)]
        if col.size and not np.isnan(qf[j]):
            out[j] = np.quantile(col, qf[j])
    return out.reshape(arr.shape[1:])


def _interval(
    arr: np.ndarray, estimate: np.ndarray, confidence: float, method: str, jack: Callable[[], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    alpha = (1 - confidence) / 2
    if method == "percentile":
        lo_q = np.full(arr.shape[1:], alpha)
        hi_q = np.full(arr.shape[1:], 1 - alpha)
        return _nanquantile(arr, lo_q), _nanquantile(arr, hi_q)
    # BCa (Efron 1987): bias correction z0 from the share of resamples below the estimate (ties
    # count ½) and acceleration a from the jackknife skewness
    normal = NormalDist()
    valid = ~np.isnan(arr)
    n_valid = valid.sum(0)
    below = ((arr < estimate) & valid).sum(0) + 0.5 * ((arr == estimate) & valid).sum(0)
    theta_j = jack()
    u = np.nanmean(theta_j, axis=0) - theta_j
    with np.errstate(all="ignore"):
        accel = np.nansum(u**3, axis=0) / (6 * np.nansum(u**2, axis=0) ** 1.5)
    accel = np.nan_to_num(accel)
    lo_q = np.full(arr.shape[1:], np.nan)
    hi_q = np.full(arr.shape[1:], np.nan)
    for j in np.ndindex(*arr.shape[1:]):
        if n_valid[j] == 0 or np.isnan(estimate[j]):
            continue
        share = below[j] / n_valid[j]
        if share <= 0 or share >= 1:  # every resample on one side: BCa undefined
            continue
        z0 = normal.inv_cdf(share)
        for target, z in ((lo_q, normal.inv_cdf(alpha)), (hi_q, normal.inv_cdf(1 - alpha))):
            target[j] = normal.cdf(z0 + (z0 + z) / (1 - accel[j] * (z0 + z)))
    return _nanquantile(arr, lo_q), _nanquantile(arr, hi_q)


def _check(confidence: float, method: str, n_resamples: int) -> None:
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def _lengths(pred: Any, target: Any) -> int:
    n = int(pred.shape[0]) if hasattr(pred, "shape") else len(pred)
    if target is not None:
        m = int(target.shape[0]) if hasattr(target, "shape") else len(target)
        if m != n:
            raise ValueError(f"pred and target lengths differ: {n} vs {m}")
    return n


def _as_array_like(x: Any) -> Any:
    if x is None or isinstance(x, torch.Tensor | np.ndarray):
        return x
    return np.asarray(x)


def bootstrap_ci(
    metric: Callable[..., Any] | str,
    pred: Any,
    target: Any = None,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    groups: Any = None,
    seed: int = 0,
    append_mean: bool = False,
) -> BootstrapResult:
    """Bootstrap CI of ``metric(pred, target)`` (or ``metric(pred)`` with ``target=None``).

    ``metric="mean"`` (or :func:`nanmean`) averages per-sample values ``(N, C)`` ignoring NaN.
    ``groups`` (one id per sample, e.g. patient ids) resamples whole groups (cluster bootstrap),
    so all images of a patient stay together. ``method="bca"`` adds Efron's bias correction and
    acceleration (jackknife over groups). Resamples where the metric is undefined (NaN) are left
    out per output; ``n_valid`` says how many remained.
    """
    return bootstrap_cis([(metric, pred, target)], n_resamples=n_resamples, confidence=confidence,
                         method=method, groups=groups, seed=seed, append_mean=append_mean)[0]


def bootstrap_cis(
    items: Sequence[tuple[Callable[..., Any] | str, Any, Any]],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    groups: Any = None,
    seed: int = 0,
    append_mean: bool = False,
) -> list[BootstrapResult]:
    """:func:`bootstrap_ci` of several ``(metric, pred, target)`` of the same samples in one pass.

    Every item sees the same resamples (one random stream, drawn once) and items built from the
    same data share their per-cluster statistics (AUROC and AUPRC of a run: one sort, one
    product); each result equals :func:`bootstrap_ci` of that item with the same options.
    """
    _check(confidence, method, n_resamples)
    if not items:
        return []
    prepared = [(m, _as_array_like(p), _as_array_like(t)) for m, p, t in items]
    n = _lengths(prepared[0][1], prepared[0][2])
    for _, p, t in prepared[1:]:
        if _lengths(p, t) != n:
            raise ValueError(f"bootstrap_cis needs the same samples for every item: {n} vs {_lengths(p, t)}")
    cluster, n_clusters = _clusters(groups, n)
    if n_clusters < 2:
        raise ValueError(f"bootstrap needs at least 2 {'groups' if groups is not None else 'samples'}, got {n_clusters}")
    stats: list[_Statistic] = []
    for m, p, t in prepared:
        stat = _Statistic(m, p, t)
        stats.append(_WithMean(stat) if append_mean else stat)
    arrays = _distributions(stats, cluster, n_clusters, n_resamples, seed)
    estimates = [stat.full() for stat in stats]  # after binding: from the same statistics
    out = []
    for stat, estimate, arr in zip(stats, estimates, arrays):
        low, high = _interval(arr, estimate, confidence, method,
                              lambda stat=stat: _jackknife(stat, cluster, n_clusters, seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            std = np.nanstd(arr, axis=0, ddof=1) if n_resamples > 1 else np.full(estimate.shape, np.nan)
        out.append(BootstrapResult(estimate, low, high, confidence, n_resamples, method,
                                   (~np.isnan(arr)).sum(0), std))
    return out


class _Difference(_Statistic):
    def __init__(self, a: _Statistic, b: _Statistic) -> None:
        self.a, self.b, self.n = a, b, a.n

    def full(self) -> np.ndarray:
        return self.a.full() - self.b.full()

    def at(self, weights: np.ndarray) -> np.ndarray:
        return self.a.at(weights) - self.b.at(weights)

    def bind(self, cluster: np.ndarray, n_clusters: int) -> None:
        self.a.bind(cluster, n_clusters)
        self.b.bind(cluster, n_clusters)

    def at_clusters(self, counts: np.ndarray | torch.Tensor) -> np.ndarray:
        return self.a.at_clusters(counts) - self.b.at_clusters(counts)


def paired_bootstrap(
    metric: Callable[..., Any] | str,
    pred_a: Any,
    pred_b: Any,
    target: Any = None,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    groups: Any = None,
    seed: int = 0,
) -> PairedBootstrapResult:
    """Compare two models on the same resamples: CI and two-sided p-value of ``a − b``.

    Both models see identical resamples (of samples, or of ``groups``), so the correlation
    between their errors is kept, as in a paired test.
    """
    _check(confidence, method, n_resamples)
    pred_a, pred_b, target = _as_array_like(pred_a), _as_array_like(pred_b), _as_array_like(target)
    n = _lengths(pred_a, target)
    if _lengths(pred_b, None) != n:
        raise ValueError(f"pred_a and pred_b lengths differ: {n} vs {_lengths(pred_b, None)}")
    cluster, n_clusters = _clusters(groups, n)
    if n_clusters < 2:
        raise ValueError(f"bootstrap needs at least 2 {'groups' if groups is not None else 'samples'}, got {n_clusters}")
    sa, sb = _Statistic(metric, pred_a, target), _Statistic(metric, pred_b, target)
    diff = _Difference(sa, sb)
    est_a, est_b = sa.full(), sb.full()
    d_hat = est_a - est_b
    arr = _distributions([diff], cluster, n_clusters, n_resamples, seed)[0]
    low, high = _interval(arr, d_hat, confidence, method, lambda: _jackknife(diff, cluster, n_clusters, seed))
    valid = ~np.isnan(arr)
    extreme = (np.abs(arr - d_hat) >= np.abs(d_hat) - 1e-15) & valid
    p = (1 + extreme.sum(0)) / (1 + valid.sum(0))
    return PairedBootstrapResult(est_a, est_b, d_hat, low, high, np.minimum(p, 1.0), confidence, n_resamples, method)


# -- DeLong --------------------------------------------------------------------------------------
def _midranks(x: np.ndarray) -> np.ndarray:
    """Mid-ranks (1-based, ties averaged) of each column of ``x`` (n, k)."""
    order = np.argsort(x, axis=0, kind="stable")
    xs = np.take_along_axis(x, order, axis=0)
    n = x.shape[0]
    ranks = np.empty_like(x, dtype=np.float64)
    for j in range(x.shape[1]):
        col = xs[:, j]
        start = np.r_[0, np.flatnonzero(col[1:] != col[:-1]) + 1]
        stop = np.r_[start[1:], n]
        mid = (start + stop + 1) / 2.0
        ranks[order[:, j], j] = np.repeat(mid, stop - start)
    return ranks


def delong_test(pred_a: Any, pred_b: Any, target: Any, *, confidence: float = 0.95) -> DeLongResult:
    """DeLong's test for two correlated AUROCs on the same samples (fast form, Sun & Xu 2014).

    ``pred_a``/``pred_b``: binary scores ``(N,)``; ``target``: 0/1 ``(N,)`` (NaN rows dropped).
    Returns the AUROCs, ``a − b``, its normal-theory CI, z and the two-sided p-value.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    a, b, y = _to_numpy(pred_a), _to_numpy(pred_b), _to_numpy(target)
    if a.ndim != 1 or b.ndim != 1 or y.ndim != 1:
        raise ValueError("delong_test takes binary scores (N,) and targets (N,)")
    if not (a.shape == b.shape == y.shape):
        raise ValueError(f"lengths differ: pred_a {a.shape[0]}, pred_b {b.shape[0]}, target {y.shape[0]}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("pred contains NaN or inf scores")
    keep = ~np.isnan(y)
    a, b, y = a[keep], b[keep], y[keep]
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"target has value {y[~np.isin(y, (0, 1))][0]} that is not a class; expected 0, 1 or NaN")
    pos, neg = y == 1, y == 0
    m, n = int(pos.sum()), int(neg.sum())
    if m < 2 or n < 2:
        raise ValueError(f"delong_test needs at least 2 positives and 2 negatives, got {m} and {n}")
    scores = np.stack([a, b], axis=1)
    x, z = scores[pos], scores[neg]
    tx, ty, tz = _midranks(x), _midranks(z), _midranks(scores)
    tz_pos, tz_neg = tz[pos], tz[neg]
    aucs = (tz_pos.sum(0) / m - (m + 1) / 2) / n
    v10 = (tz_pos - tx) / n  # placement of each positive among the negatives
    v01 = 1 - (tz_neg - ty) / m  # share of positives above each negative
    cov = np.atleast_2d(np.cov(v10, rowvar=False)) / m + np.atleast_2d(np.cov(v01, rowvar=False)) / n
    diff = float(aucs[0] - aucs[1])
    var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    normal = NormalDist()
    half = normal.inv_cdf(0.5 + confidence / 2) * math.sqrt(max(var, 0.0))
    if var <= 0:
        zval = 0.0 if diff == 0 else math.copysign(math.inf, diff)
        p = 1.0 if diff == 0 else 0.0
    else:
        zval = diff / math.sqrt(var)
        p = math.erfc(abs(zval) / math.sqrt(2))
    return DeLongResult(float(aucs[0]), float(aucs[1]), diff, diff - half, diff + half, zval, p, cov, confidence)
