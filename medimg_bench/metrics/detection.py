"""Lesion detection: FROC curve and the competition performance metric (CPM) of LUNA16.

Inputs are per scan. ``pred[i]`` is an ``(M, D + 1)`` array of candidates ``(coords..., score)``
and ``target[i]`` an ``(K, D + 1)`` array of reference findings ``(coords..., diameter)``; the
coordinates are world coordinates in mm (any axis order, the same for both; ``D`` = 3 for CT,
2 for radiographs) and the diameter is in mm. ``excluded[i]`` lists findings (same layout) whose
hits are ignored: neither true nor false positives (LUNA16's ``annotations_excluded.csv``).

The hit rule is LUNA16's (``noduleCADEvaluationLUNA16.py``):

* a candidate hits a finding when its squared distance to the centre is smaller than
  ``(diameter / 2)²`` (strictly inside the radius); a negative diameter means unknown and uses
  ``default_diameter`` (5 mm, the script's value for excluded findings recorded as -1);
* a finding hit by several candidates counts once, with its highest-scoring candidate; the other
  hits are not false positives; a candidate inside two findings counts for both;
* a candidate hitting an excluded finding (and no included one) is dropped;
* every other candidate is a false positive of its scan.

FROC: for every score threshold, sensitivity = detected findings / all findings and FP rate =
false positives / number of scans (scans without findings count). CPM = mean sensitivity at
1/8, 1/4, 1/2, 1, 2, 4, 8 FP per scan, linearly interpolated on the FROC points as ``np.interp``
(beyond the last point the curve stays flat).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.stats import BootstrapResult
from medimg_bench.registry import register_metric

__all__ = [
    "LUNA16_FP_RATES",
    "FROCResult",
    "FROCBootstrap",
    "match_candidates",
    "froc",
    "cpm",
    "froc_bootstrap",
    "FROCCPM",
]

LUNA16_FP_RATES: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class FROCResult:
    """FROC points (FP per scan ascending, sensitivity in [0, 1], score threshold) and the CPM."""

    fps: np.ndarray
    sensitivity: np.ndarray
    thresholds: np.ndarray
    fp_rates: tuple[float, ...]
    sensitivity_at: np.ndarray
    cpm: float
    n_scans: int
    n_findings: int
    n_detected: int
    n_false_positives: int


@dataclass(frozen=True)
class FROCBootstrap:
    """Bootstrap over scans: CIs of the CPM (scalar arrays) and of the sensitivity at each rate."""

    cpm: BootstrapResult
    sensitivity: BootstrapResult
    fp_rates: tuple[float, ...]


def _array(x: Any, *, name: str, ncols: int | None) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return np.zeros((0, ncols or 0))
    if a.ndim != 2 or a.shape[1] < 2 or (ncols is not None and a.shape[1] != ncols):
        want = f"(n, {ncols})" if ncols else "(n, D + 1)"
        raise ValueError(f"{name}: expected an array {want} of (coords..., value), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: has NaN or inf values")
    return a


def match_candidates(
    candidates: Any,
    findings: Any,
    *,
    excluded: Any = None,
    default_diameter: float = 5.0,
    scan: str = "scan",
) -> np.ndarray:
    """Apply the hit rule to one scan; returns FROC entries ``(n, 2)`` = ``(score, is_finding)``.

    One row per included finding (its best hitting candidate's score, ``-inf`` when missed) and
    one per false-positive candidate (``is_finding`` = 0). ``scan`` names the scan in errors.
    """
    f = _array(findings, name=f"{scan}: target findings", ncols=None)
    c = _array(candidates, name=f"{scan}: candidates", ncols=None)
    ncols = f.shape[1] if f.shape[0] else c.shape[1] if c.shape[0] else 0
    if f.shape[0] and c.shape[0] and f.shape[1] != c.shape[1]:
        raise ValueError(
            f"{scan}: candidates have {c.shape[1] - 1} coordinates, findings {f.shape[1] - 1}"
        )
    e = _array(excluded, name=f"{scan}: excluded findings", ncols=ncols or None) if excluded is not None else None
    d = ncols - 1
    scores = c[:, d] if c.shape[0] else np.zeros(0)

    def hits(ref: np.ndarray) -> np.ndarray:  # (K, M) bool
        if ref.shape[0] == 0 or c.shape[0] == 0:
            return np.zeros((ref.shape[0], c.shape[0]), dtype=bool)
        diam = np.where(ref[:, d] < 0, default_diameter, ref[:, d])
        d2 = ((ref[:, None, :d] - c[None, :, :d]) ** 2).sum(-1)
        return d2 < (diam[:, None] / 2.0) ** 2

    hit = hits(f)
    finding_scores = np.where(hit, scores[None, :], -np.inf).max(1) if c.shape[0] else np.full(f.shape[0], -np.inf)
    used = hit.any(0)
    if e is not None and e.shape[0]:
        used |= hits(e).any(0)
    fp_scores = scores[~used]
    return np.concatenate(
        [
            np.stack([finding_scores, np.ones(f.shape[0])], 1),
            np.stack([fp_scores, np.zeros(fp_scores.shape[0])], 1),
        ]
    )


def _per_scan(pred: Any, target: Any, excluded: Any) -> tuple[list[Any], list[Any], list[Any], list[str]]:
    if isinstance(target, Mapping):
        names = [str(k) for k in target]
        if not isinstance(pred, Mapping):
            raise ValueError("target is a mapping scan -> findings, so pred must be one too")
        unknown = sorted(set(map(str, pred)) - set(names))
        if unknown:
            raise ValueError(f"pred has candidates for scans not in target: {unknown[:5]}")
        pred_by = {str(k): v for k, v in pred.items()}
        excl_by = {str(k): v for k, v in (excluded or {}).items()}
        preds = [pred_by.get(n, np.zeros((0, 0))) for n in names]
        excl = [excl_by.get(n) for n in names]
        return preds, [target[k] for k in target], excl, names
    if len(pred) != len(target):
        raise ValueError(f"pred and target lengths differ: {len(pred)} vs {len(target)} scans")
    if excluded is not None and len(excluded) != len(target):
        raise ValueError(f"excluded has {len(excluded)} scans, target {len(target)}")
    excl = list(excluded) if excluded is not None else [None] * len(target)
    return list(pred), list(target), excl, [f"scan {i}" for i in range(len(target))]


def _entries(pred: Any, target: Any, excluded: Any, default_diameter: float) -> list[np.ndarray]:
    preds, targets, excl, names = _per_scan(pred, target, excluded)
    if not targets:
        raise ValueError("no scans")
    return [
        match_candidates(p, t, excluded=e, default_diameter=default_diameter, scan=n)
        for p, t, e, n in zip(preds, targets, excl, names)
    ]


def _curve_weighted(
    entries: list[np.ndarray], weights: np.ndarray, fp_rates: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FROC for ``R`` weightings of the scans at once.

    ``weights``: ``(R, S)`` number of times each scan is drawn. Returns thresholds ``(G,)``,
    fps ``(R, G + 1)``, sensitivity ``(R, G + 1)`` (first point: threshold +inf) and the
    sensitivity at ``fp_rates`` ``(R, len(fp_rates))``.
    """
    n_scans = weights.sum(1, keepdims=True).astype(np.float64)
    sizes = np.array([len(e) for e in entries])
    flat = np.concatenate(entries) if sizes.sum() else np.zeros((0, 2))
    scan_of = np.repeat(np.arange(len(entries)), sizes)
    n_findings = (weights[:, scan_of] * flat[:, 1]).sum(1, keepdims=True)
    keep = np.isfinite(flat[:, 0])  # missed findings only enter the denominator
    flat, scan_of = flat[keep], scan_of[keep]
    order = np.argsort(-flat[:, 0], kind="stable")
    flat, scan_of = flat[order], scan_of[order]
    w = weights[:, scan_of].astype(np.float64)
    cum_tp = np.cumsum(w * flat[:, 1], axis=1)
    cum_fp = np.cumsum(w * (1 - flat[:, 1]), axis=1)
    # one point per distinct score: the last entry of each run of equal scores
    last = np.flatnonzero(np.r_[np.diff(flat[:, 0]) != 0, True]) if len(flat) else np.zeros(0, int)
    zeros = np.zeros((weights.shape[0], 1))
    fps = np.concatenate([zeros, cum_fp[:, last]], 1) / n_scans
    with np.errstate(invalid="ignore", divide="ignore"):
        sens = np.concatenate([zeros, cum_tp[:, last]], 1) / n_findings
    return flat[last, 0], fps, sens, _interp_rows(fps, sens, np.asarray(fp_rates, dtype=np.float64))


def _interp_rows(fps: np.ndarray, sens: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.interp(x, fps[r], sens[r])`` for every row ``r`` (rows of ``fps`` non-decreasing)."""
    out = np.empty((fps.shape[0], x.shape[0]))
    g = fps.shape[1]
    rows = np.arange(fps.shape[0])
    for i, xi in enumerate(x):
        j = np.clip((fps <= xi).sum(1) - 1, 0, g - 1)  # last point at or left of xi
        j1 = np.minimum(j + 1, g - 1)
        x0, x1 = fps[rows, j], fps[rows, j1]
        y0, y1 = sens[rows, j], sens[rows, j1]
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where((x1 > x0) & (xi > x0), (xi - x0) / (x1 - x0), 0.0)
        out[:, i] = y0 + t * (y1 - y0)
    return out


def froc(
    pred: Any,
    target: Any,
    *,
    excluded: Any = None,
    fp_rates: Sequence[float] = LUNA16_FP_RATES,
    default_diameter: float = 5.0,
) -> FROCResult:
    """FROC curve and CPM over scans (LUNA16 hit rule; see the module docstring).

    ``pred``/``target``/``excluded``: sequences with one array per scan, or mappings
    scan id -> array (then the scans are ``target``'s keys; give scans without findings an
    empty array so that their false positives count). The CPM is NaN when there are no findings.
    """
    entries = _entries(pred, target, excluded, default_diameter)
    weights = np.ones((1, len(entries)), dtype=np.int64)
    thr, fps, sens, at = _curve_weighted(entries, weights, fp_rates)
    flat = np.concatenate(entries)
    n_findings = int(flat[:, 1].sum())
    return FROCResult(
        fps=fps[0],
        sensitivity=sens[0],
        thresholds=np.r_[np.inf, thr],
        fp_rates=tuple(float(r) for r in fp_rates),
        sensitivity_at=at[0],
        cpm=float(at[0].mean()),
        n_scans=len(entries),
        n_findings=n_findings,
        n_detected=int((np.isfinite(flat[:, 0]) & (flat[:, 1] == 1)).sum()),
        n_false_positives=int((flat[:, 1] == 0).sum()),
    )


def cpm(pred: Any, target: Any, **kwargs: Any) -> float:
    """Competition performance metric: mean sensitivity at the FP rates (see :func:`froc`)."""
    return froc(pred, target, **kwargs).cpm


def froc_bootstrap(
    pred: Any,
    target: Any,
    *,
    excluded: Any = None,
    fp_rates: Sequence[float] = LUNA16_FP_RATES,
    default_diameter: float = 5.0,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    chunk: int = 64,
) -> FROCBootstrap:
    """Percentile bootstrap CI of the CPM and of the sensitivity at each FP rate.

    Scans are resampled with replacement (each drawn scan brings its findings and candidates);
    all resamples of a chunk are evaluated at once. The estimate is the value on the full data
    (LUNA16's script instead reports the bootstrap mean curve). Resamples without findings are
    ignored.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    entries = _entries(pred, target, excluded, default_diameter)
    s = len(entries)
    _, _, _, full = _curve_weighted(entries, np.ones((1, s), dtype=np.int64), fp_rates)
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, n_resamples, chunk):
        r = min(chunk, n_resamples - start)
        draws = rng.integers(0, s, size=(r, s))
        weights = np.zeros((r, s), dtype=np.int64)
        np.add.at(weights, (np.repeat(np.arange(r), s), draws.reshape(-1)), 1)
        parts.append(_curve_weighted(entries, weights, fp_rates)[3])
    at = np.concatenate(parts)
    cpms = at.mean(1)
    alpha = (1 - confidence) / 2

    def result(est: np.ndarray, samples: np.ndarray) -> BootstrapResult:
        with np.errstate(all="ignore"):
            low = np.nanquantile(samples, alpha, axis=0)
            high = np.nanquantile(samples, 1 - alpha, axis=0)
        return BootstrapResult(est, low, high, confidence, n_resamples, "percentile")

    return FROCBootstrap(
        cpm=result(np.asarray(full[0].mean()), cpms),
        sensitivity=result(full[0], at),
        fp_rates=tuple(float(x) for x in fp_rates),
    )


@register_metric("froc_cpm", tags=("detection",))
class FROCCPM(Metric):
    """Stateful FROC/CPM over scans (dataset-level).

    ``update(preds, targets, meta)``: ``preds``/``targets`` are sequences with one array per scan
    (layout of :func:`froc`); ``meta[i]["excluded"]``, when present, lists that scan's excluded
    findings. Only the matched entries of each scan are kept, one item per scan id, so the
    distributed gather counts each scan once. ``compute`` returns ``[cpm, sens@rate...]``;
    ``state_arrays`` returns scan indices, so a bootstrap over its rows resamples scans.
    """

    name = "froc_cpm"
    per_sample = False
    input_kind = "detections"
    higher_is_better = True
    value_range = (0.0, 1.0)  # sensitivities

    def __init__(
        self,
        *,
        fp_rates: Sequence[float] = LUNA16_FP_RATES,
        default_diameter: float = 5.0,
        class_names: Sequence[str] | None = None,
    ) -> None:
        self.fp_rates = tuple(float(r) for r in fp_rates)
        names = class_names or ["cpm", *[f"sensitivity@{r:g}fp" for r in self.fp_rates]]
        super().__init__(class_names=names)
        self.default_diameter = default_diameter
        self.add_state("entries", [], dist_reduce_fx="cat")

    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:
        if len(preds) != len(targets):
            raise ValueError(f"froc_cpm: pred and target lengths differ: {len(preds)} vs {len(targets)} scans")
        if meta is not None and len(meta) != len(targets):
            raise ValueError(f"froc_cpm: {len(meta)} meta dicts for {len(targets)} scans")
        start = len(self.ids)
        new = []
        for i, (p, t) in enumerate(zip(preds, targets)):
            excl = meta[i].get("excluded") if meta is not None else None
            scan = str(ids[i]) if ids is not None and i < len(ids) else f"scan {start + i}"
            new.append(torch.from_numpy(
                match_candidates(p, t, excluded=excl, default_diameter=self.default_diameter, scan=scan)
            ))
        self._add_ids(ids, len(new))
        self.entries.extend(new)

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.arange(len(self.entries))
        return idx, idx

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``[cpm, sensitivity at each FP rate]`` for the scans indexed by ``preds``."""
        idx = torch.as_tensor(preds).long().cpu().numpy()
        if idx.size == 0:
            raise ValueError("froc_cpm: no scans")
        counts = np.bincount(idx, minlength=len(self.entries))[None, :]
        entries = [e.numpy() for e in self.entries]
        at = _curve_weighted(entries, counts, self.fp_rates)[3][0]
        return torch.from_numpy(np.r_[at.mean(), at])

    def compute(self) -> torch.Tensor:
        if not self.entries:
            raise ValueError("froc_cpm: compute() called before any update() (no scans)")
        return self.functional(*self.state_arrays())

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        """Bootstrap fast path: the scans' weights for a block of cluster counts, then the
        weighted FROC of all resamples at once (as :func:`froc_bootstrap`)."""
        idx = torch.as_tensor(preds).long().cpu().numpy()
        cl = np.asarray(cluster, dtype=np.int64)
        entries = [e.numpy() for e in self.entries]

        def fn(counts: torch.Tensor) -> torch.Tensor:
            c = counts.detach().cpu().numpy().astype(np.int64)
            weights = np.zeros((c.shape[0], len(entries)), dtype=np.int64)
            np.add.at(weights.T, idx, c[:, cl].T)  # rows resampled → draws of each scan
            at = _curve_weighted(entries, weights, self.fp_rates)[3]
            return torch.from_numpy(np.concatenate([at.mean(1, keepdims=True), at], 1))

        return fn
