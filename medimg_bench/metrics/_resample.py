"""Cluster-level sufficient statistics for the bootstrap of dataset-level metrics.

A bootstrap resample is a vector of counts ``c`` (how often each patient/cluster is drawn).
Every quantity the classification metrics need from a resample is a sum of per-sample
contributions weighted by the count of the sample's cluster, so it is ``M @ c`` for a matrix
``M`` (rows: the sums needed, columns: clusters) built once from the scores:

* confusion counts (sensitivity, specificity, F1, accuracy ...): ``tp/fp/fn/tn`` per label
  (a dense ``4L × G`` product);
* ECE: per label and bin the sum of ``outcome − confidence`` (plus the count per bin for the
  maximum norm, per label for the l1 norm) — a dense product;
* ranking metrics (AUROC, AUPRC, sensitivity at specificity): each label's samples sorted once
  (descending) into tie groups; one entry per group holding a positive, with three weights: its
  positives, its negatives and the negatives in the run between it and the positive group above
  (thresholds inside such a run are dominated: same sensitivity, lower specificity), plus one
  entry for the negatives below every positive. Each weight is a sum of cluster counts over its
  samples (``embedding_bag``: gather-and-add of count rows, one bag per weight); cumulative sums
  over the entries are then every positive group's TP and FP for every resample at once, in
  tiles of labels of similar entry counts (padded) sized for the cache.

Counts are integers, so sums of counts are exact in float32 below 2**24: the products run in
float32 when the largest possible sum of a block is below that (checked per block), float64
otherwise; cumulative sums and everything after run in float64. AUROC is then exact integer
arithmetic up to its final division, AUPRC adds its terms in the same order as the per-resample
code; values equal those of the resampled data up to the last bit or so (tested against a plain
loop over resamples and against the code before this module was rewritten).

Within :func:`shared_plans` (the joint bootstrap of several metrics on one run), a plan built
from identical data is built once and computes, per block of resamples, everything every metric
asked of it: AUROC and AUPRC of one run share one sort and one product.

Everything runs on the scores' device (``embedding_bag`` / ``mm`` on CUDA or CPU).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

__all__: list[str] = []  # private module

ClusterFn = Callable[[torch.Tensor], torch.Tensor]

_DENSE_MAX_BYTES = 256 * 2**20
_EXACT_FLOAT32 = 2**24  # integers below this are exact in float32
_TILE_ELEMENTS = 2**18  # entries × resamples per tile of the ranking post-processing
_MIN_TILE_RESAMPLES = 32

_PLANS: contextvars.ContextVar[dict[str, list[tuple[tuple[Any, ...], Any]]] | None] = contextvars.ContextVar(
    "medimg_bench_resample_plans", default=None
)


@contextmanager
def shared_plans() -> Iterator[None]:
    """Within the block, plans built from identical inputs are built once (see module doc)."""
    token = _PLANS.set({})
    try:
        yield
    finally:
        _PLANS.reset(token)


_SAME_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
              torch.bfloat16: torch.int16}


def _same(a: Any, b: Any) -> bool:
    """Equal type, shape, dtype and values (floats bit for bit, so NaN equals NaN)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and a.device == b.device):
            return False
        bits = _SAME_BITS.get(a.dtype)
        if bits is not None:
            a, b = a.contiguous().view(bits), b.contiguous().view(bits)
        return bool(torch.equal(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f")))
    return type(a) is type(b) and a == b


def shared(kind: str, inputs: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()``, or the plan already built from equal ``inputs`` (same shapes, dtypes and
    values, NaN equal to NaN) for the same ``kind`` within :func:`shared_plans`."""
    cache = _PLANS.get()
    if cache is None:
        return build()
    entries = cache.setdefault(kind, [])
    for known, plan in entries:
        if len(known) == len(inputs) and all(_same(a, b) for a, b in zip(known, inputs)):
            return plan
    plan = build()
    entries.append((inputs, plan))
    return plan


_COUNTS_FLAG = "_medimg_bench_counts"  # set by mark_counts: the tensor holds whole numbers


def mark_counts(counts: torch.Tensor) -> torch.Tensor:
    """Mark ``counts`` as bootstrap counts (whole numbers), sparing the plans the check."""
    setattr(counts, _COUNTS_FLAG, True)
    return counts


def _integral(counts: torch.Tensor) -> bool:
    return getattr(counts, _COUNTS_FLAG, False) or bool(torch.equal(counts, counts.round()))


_TABLES = "_medimg_bench_tables"


def _columns(c: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``c.T`` as a contiguous (G, b) tensor of ``dtype``, made once per counts tensor and dtype
    (the plans of a joint bootstrap all read the same block)."""
    tables = c.__dict__.setdefault(_TABLES, {})
    if dtype not in tables:
        tables[dtype] = c.T.to(dtype, memory_format=torch.contiguous_format).contiguous()
    return tables[dtype]


class ClusterProduct:
    """``M`` (K × G) from per-sample contributions: ``rows`` (which sum), ``clusters`` and
    ``values`` (None: ones); ``__call__(counts (b, G))`` returns the sums ``(K, b)`` as float64
    on ``device``. Dense (``mm``) when that is cheaper, else one bag per row (``embedding_bag``)."""

    def __init__(
        self, rows: np.ndarray, clusters: np.ndarray, values: np.ndarray | None, *,
        n_rows: int, n_clusters: int, device: torch.device, integral: bool | None = None,
    ) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        clusters = np.asarray(clusters, dtype=np.int64)
        vals = np.ones(rows.shape[0]) if values is None else np.asarray(values, dtype=np.float64)
        self.shape = (n_rows, n_clusters)
        self.device = device
        # integer contributions: every sum is an integer bounded by counts @ bound
        if integral is None:
            integral = values is None or bool(np.array_equal(vals, np.round(vals)))
        self.integral = integral
        bound = np.bincount(clusters, weights=np.abs(vals), minlength=n_clusters)
        self.bound = torch.from_numpy(bound).to(device)
        nnz = rows.shape[0]
        # a dense product does ~K·G work at BLAS speed, a sparse one ~nnz at gather speed
        self.dense = 8 * n_rows * n_clusters <= _DENSE_MAX_BYTES and n_rows * n_clusters <= 16 * max(1, nnz)
        if self.dense:
            m = np.bincount(rows * n_clusters + clusters, weights=vals, minlength=n_rows * n_clusters)
            self.matrix = torch.from_numpy(m.reshape(n_rows, n_clusters)).to(device)
            self.matrix32 = self.matrix.float() if self.integral else None
        else:
            order = np.argsort(rows, kind="stable")
            self.cols = torch.from_numpy(clusters[order]).to(device)
            self.vals = None if values is None else torch.from_numpy(vals[order]).to(device)
            indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))])
            self.indptr = torch.from_numpy(indptr).to(device)

    def exact32(self, counts: torch.Tensor) -> bool:
        """Whether every sum for ``counts`` is an integer below 2**24 (float32 is then exact)."""
        if not self.integral or counts.shape[0] == 0:
            return False
        c = counts.to(self.device, torch.float64)
        return _integral(c) and float((c @ self.bound).max()) < _EXACT_FLOAT32

    def __call__(self, counts: torch.Tensor) -> torch.Tensor:
        c = counts.to(self.device, torch.float64)
        single = self.exact32(c)
        if self.dense:
            if single:
                return (self.matrix32 @ _columns(c, torch.float32)).double()  # type: ignore[operator]
            return self.matrix @ _columns(c, torch.float64)
        table = _columns(c, torch.float32 if single else torch.float64)
        vals = None if self.vals is None else self.vals.to(table.dtype)
        out = F.embedding_bag(self.cols, table, self.indptr, mode="sum", per_sample_weights=vals,
                              include_last_offset=True)
        return out.double()


def average_rows(values: torch.Tensor, support: torch.Tensor | None, average: str | None,
                 kind: str) -> torch.Tensor:
    """Row-wise form of ``classification.average_values``: ``values`` (b, L) → (b, L) or (b, 1)."""
    if average is None:
        return values[:, :1] if kind == "binary" else values
    defined = ~values.isnan()
    if average == "macro":
        wts = defined.to(torch.float64)
    else:
        wts = support.to(torch.float64) * defined  # type: ignore[union-attr]
    out = (values.nan_to_num() * wts).sum(1) / wts.sum(1)
    return torch.where(defined.any(1), out, float("nan"))[:, None]


def _cluster_of(cluster: np.ndarray, n: int, repeat: int = 1) -> np.ndarray:
    c = np.asarray(cluster, dtype=np.int64)
    if c.shape[0] != n:
        raise ValueError(f"cluster index has {c.shape[0]} entries for {n} samples")
    return np.repeat(c, repeat) if repeat > 1 else c


# -- confusion counts -----------------------------------------------------------------------------
def confusion_plan(hard: torch.Tensor, y: torch.Tensor, cluster: np.ndarray, n_clusters: int
                   ) -> Callable[[torch.Tensor], dict[str, torch.Tensor]]:
    """``counts (b, G)`` → weighted ``tp/fp/fn/tn`` as (b, L) tensors, from 0/1 decisions
    ``hard`` and 0/1/NaN labels ``y`` (N, L)."""
    h = hard.detach().cpu().numpy().astype(bool)
    yn = y.detach().cpu().numpy()
    n, n_labels = yn.shape
    labelled = ~np.isnan(yn)
    code = np.where(h, np.where(yn == 1, 0, 1), np.where(yn == 1, 2, 3))  # tp fp fn tn
    rows = (np.arange(n_labels)[None, :] * 4 + code)[labelled]
    cl = np.broadcast_to(_cluster_of(cluster, n)[:, None], (n, n_labels))[labelled]
    prod = ClusterProduct(rows, cl, None, n_rows=4 * n_labels, n_clusters=n_clusters,
                          device=hard.device)

    def counts_of(counts: torch.Tensor) -> dict[str, torch.Tensor]:
        r = prod(counts).reshape(n_labels, 4, -1)
        return {k: r[:, i].T for i, k in enumerate(("tp", "fp", "fn", "tn"))}

    return counts_of


# -- calibration ----------------------------------------------------------------------------------
def calibration_plan(conf: torch.Tensor, outcome: torch.Tensor, n_bins: int, cluster: np.ndarray,
                     n_clusters: int, *, per_bin_counts: bool
                     ) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``counts (b, G)`` → ``(gap, count)``: per (b, L, bins) the sum of ``outcome − confidence``
    and the count per bin (``per_bin_counts``) or per (b, L) the count of each label."""
    cn = conf.detach().cpu().numpy()
    on = outcome.detach().cpu().numpy()
    n, n_labels = cn.shape
    edges = np.linspace(0, 1, n_bins + 1)  # == torch.linspace in float64, bit for bit
    # searchsorted(side="right") == torch.bucketize(right=True), the rule of reliability_diagram
    bins = (np.searchsorted(edges, cn, side="right") - 1).clip(0, n_bins - 1)
    labelled = ~np.isnan(on)
    cell = (np.arange(n_labels)[None, :] * n_bins + bins)[labelled]
    cl = np.broadcast_to(_cluster_of(cluster, n)[:, None], (n, n_labels))[labelled]
    n_cells = n_labels * n_bins
    gaps = ClusterProduct(cell, cl, on[labelled] - cn[labelled], n_rows=n_cells, n_clusters=n_clusters,
                          device=conf.device, integral=False)
    # the counts are whole numbers: a product of their own (float32 while exact)
    count_rows = cell if per_bin_counts else np.broadcast_to(np.arange(n_labels), (n, n_labels))[labelled]
    counts_of = ClusterProduct(count_rows, cl, None, n_rows=n_cells if per_bin_counts else n_labels,
                               n_clusters=n_clusters, device=conf.device)

    def sums(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gap = gaps(counts).T.reshape(-1, n_labels, n_bins)
        count = counts_of(counts).T
        return gap, count.reshape(-1, n_labels, n_bins) if per_bin_counts else count

    return sums


# -- ranking --------------------------------------------------------------------------------------
_POS, _ABOVE, _TIED = 0, 1, 2  # the three weights of an entry


def _label_bags(s: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """One label's labelled samples sorted by descending score; per sample its entry and weight
    channel; the number of entries.

    Entry ``k < K`` is the ``k``-th tie group holding a positive (from the top): its positives
    (channel ``_POS``), its negatives (``_TIED``) and the negatives scored strictly between it and
    the positive group above (``_ABOVE``); entry ``K`` holds the negatives below every positive.
    Thresholds inside a run of negatives are dominated by the positive group above the run (same
    sensitivity, higher specificity), so the positive groups are all the operating points and
    cumulative sums the metrics need."""
    order = np.argsort(-s)  # the order inside a tie group does not matter
    ss, ps = s[order], pos[order]
    group = np.concatenate([[0], np.cumsum(ss[1:] != ss[:-1])])
    has_pos = np.bincount(group, weights=ps, minlength=int(group[-1]) + 1) > 0
    above = (np.cumsum(has_pos) - has_pos)[group]  # positive groups scored higher than the sample
    channel = np.where(ps, _POS, np.where(has_pos[group], _TIED, _ABOVE))
    return order, 3 * above + channel, int(has_pos.sum()) + 1


class _Tile:
    """Labels of similar entry counts, each padded to ``width`` entries: bag ``(t, e, k)`` holds
    the samples of entry ``e`` of tile label ``t`` in weight channel ``k``."""

    def __init__(self, labels: np.ndarray, width: int, cols: torch.Tensor, offsets: np.ndarray,
                 device: torch.device) -> None:
        self.labels = torch.from_numpy(labels).to(device)
        self.n_labels, self.width = len(labels), width
        self.cols, self.offsets = cols, torch.from_numpy(offsets).to(device)


def _tile_values(tile: _Tile, table: torch.Tensor, whats: list[Hashable]) -> dict[Hashable, torch.Tensor]:
    """Every requested output of the tile's labels for the resamples of ``table`` (G, b): (L_t, b).

    Entries run from the highest score down, so the cumulative sums of the positive and the
    negative (run above + tied) weights are each positive group's ``tp`` and ``fp``: AUPRC's
    precision directly, and AUROC's U = P·N − Σ p·(fp − ½·tied) (negatives strictly below each
    positive, ties ½) in exact integer arithmetic. Weights and their sums stay in the table's
    dtype (float32 holds them exactly, see :meth:`RankingPlan._compute`); products, quotients
    and their sums are float64."""
    b = table.shape[1]
    sums = F.embedding_bag(tile.cols, table, tile.offsets, mode="sum", include_last_offset=True)
    x = sums.view(tile.n_labels, tile.width, 3 * b)
    x[..., b : 2 * b] += x[..., 2 * b :]  # negatives of the entry: run above + tied
    cum = x[..., : 2 * b].cumsum(1)  # padding entries are empty: they repeat the label's totals
    p, tied, tp, fp = x[..., :b].double(), x[..., 2 * b :], cum[..., :b], cum[..., b:]
    ptot, ntot = tp[:, -1].to(torch.float64, copy=True), fp[:, -1].to(torch.float64, copy=True)
    out: dict[Hashable, torch.Tensor] = {"n_pos": ptot}
    if "auroc" in whats:
        u = ptot * ntot - torch.linalg.vecdot(p, torch.add(fp, tied, alpha=-0.5).double(), dim=1)
        den = ptot * ntot
        out["auroc"] = _nan_where(den > 0, u, den)
    if "auprc" in whats:
        prec = tp.to(torch.float64, copy=True).div_((tp + fp).clamp_min_(1))
        out["auprc"] = _nan_where(ptot > 0, torch.linalg.vecdot(p, prec, dim=1), ptot)
    for what in whats:
        if isinstance(what, tuple) and what[0] == "sens_at_spec":
            sens = tp.double() / (ptot + (ptot == 0))[:, None]
            spec = (ntot[:, None] - fp) / (ntot + (ntot == 0))[:, None]  # negatives below the entry
            best = torch.where(spec >= what[1] - 1e-12, sens, 0.0).amax(1)
            out[what] = torch.where((ptot > 0) & (ntot > 0), best, float("nan"))
    return out


def _nan_where(ok: torch.Tensor, num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    return torch.where(ok, num / (den + (den == 0)), float("nan"))


class RankingPlan:
    """Per label, the weights of each entry (a tie group holding a positive, with the run of
    negatives above it; see :func:`_label_bags`) from the highest score down, for any resample
    counts; from them AUROC, AUPRC and sensitivity at specificity of every label (:meth:`values`)."""

    def __init__(self, s: torch.Tensor, y: torch.Tensor, cluster: np.ndarray, n_clusters: int) -> None:
        sn = np.ascontiguousarray(s.detach().cpu().numpy().T)  # one row per label
        yn = np.ascontiguousarray(y.detach().cpu().numpy().T)
        n_labels, n = sn.shape
        cl_all = _cluster_of(cluster, n)
        self.device, self.n_labels = s.device, n_labels
        self.entries: list[tuple[np.ndarray, np.ndarray, int]] = []  # per label: clusters, bag, count
        for j in range(n_labels):
            idx = np.flatnonzero(~np.isnan(yn[j]))
            if idx.size == 0:
                self.entries.append((np.zeros(0, np.int64), np.zeros(0, np.int64), 0))
                continue
            order, bag, n_entries = _label_bags(sn[j, idx], yn[j, idx] == 1)
            self.entries.append((cl_all[idx[order]], bag, n_entries))
        # every entry sum is at most counts @ (samples per cluster)
        self.bound = torch.from_numpy(np.bincount(cl_all, minlength=n_clusters).astype(np.float64)).to(s.device)
        self._make_tiles()
        self.requests: set[Hashable] = set()
        self._memo_counts: torch.Tensor | None = None
        self._memo: dict[Hashable, torch.Tensor] = {}

    def _make_tiles(self) -> None:
        """Labels sorted by entry count, cut into runs of about ``_TILE_ELEMENTS`` entries ×
        resamples, each padded to its widest label."""
        sizes = np.array([max(1, e[2]) for e in self.entries])
        self.tile_resamples = max(_MIN_TILE_RESAMPLES, _TILE_ELEMENTS // max(1, int(sizes.sum())))
        budget = max(1, _TILE_ELEMENTS // self.tile_resamples)
        self.tiles: list[_Tile] = []
        by_size = np.argsort(sizes, kind="stable")
        a = 0
        while a < len(by_size):
            z = a + 1
            while z < len(by_size) and (z + 1 - a) * sizes[by_size[z]] <= budget:
                z += 1
            self.tiles.append(self._tile(by_size[a:z], int(sizes[by_size[z - 1]])))
            a = z

    def _tile(self, labels: np.ndarray, width: int) -> _Tile:
        cols, bags = [], []
        for t, j in enumerate(labels):
            cl, bag, _ = self.entries[j]
            # a counting sort: small keys sort by radix (within a bag the order does not matter)
            keep = np.argsort(bag.astype(np.uint16) if 3 * width < 2**16 else bag, kind="stable")
            cols.append(cl[keep])
            bags.append(bag[keep] + 3 * width * t)
        cols_a = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        counts = np.bincount(np.concatenate(bags), minlength=3 * width * len(labels)) if cols else \
            np.zeros(3 * width * len(labels), np.int64)
        # bag (t, e, k) → row (t·width + e)·3 + k; the view in _tile_values wants (t, e, k·b)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return _Tile(labels, width, torch.from_numpy(cols_a).to(self.device), offsets, self.device)

    def request(self, what: Hashable) -> None:
        """Announce an output (``"auroc"``, ``"auprc"``, ``("sens_at_spec", level)``) so one pass
        per block computes all of them."""
        self.requests.add(what)

    def values(self, counts: torch.Tensor, what: Hashable) -> tuple[torch.Tensor, torch.Tensor]:
        """``what`` per label and the positive weight per label, both (b, L), for ``counts``."""
        if self._memo_counts is not counts:
            self._memo_counts, self._memo = counts, {}
        if what not in self._memo:
            self._memo.update(self._compute(counts, sorted(self.requests | {what}, key=repr)))
        return self._memo[what], self._memo["n_pos"]

    def _compute(self, counts: torch.Tensor, whats: list[Hashable]) -> dict[Hashable, torch.Tensor]:
        c = counts.to(self.device, torch.float64)
        b = c.shape[0]
        weight = float((c @ self.bound).max()) if b else 0.0  # largest total weight of a resample
        # float32 holds every weight sum and fp − ½·tied exactly below 2**23
        single = _integral(c) and weight < _EXACT_FLOAT32 / 2
        table = _columns(c, torch.float32 if single else torch.float64)
        out = {w: c.new_full((b, self.n_labels), float("nan")) for w in [*whats, "n_pos"]}
        for r0 in range(0, b, self.tile_resamples):
            part = table[:, r0 : r0 + self.tile_resamples].contiguous()
            for tile in self.tiles:
                for w, v in _tile_values(tile, part, whats).items():
                    out[w][r0 : r0 + part.shape[1]].index_copy_(1, tile.labels, v.T)
        return out
