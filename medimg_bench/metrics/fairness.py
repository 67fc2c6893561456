"""Subgroup (fairness) analysis of any metric: per-group values, gaps, equity-scaled score, FNR gap.

``groups`` holds one label per sample (sex, age bin, site, race ... taken from the sample
``meta`` with :func:`groups_from_meta`). ``metric_fn(pred, target)`` is any function returning a
scalar (``auroc``, ``accuracy``, a mean Dice ...); it is called on the samples of each group.

Small groups: a group with fewer than ``min_group_size`` samples, or whose metric is undefined
(NaN, e.g. AUROC of a group with one class), raises a ``ValueError`` naming the group
(``small_groups="raise"``, the default), or gets NaN and is left out of the gap, ratio and
equity-scaled score with a warning (``small_groups="nan"``).

Equity-scaled metric (FairSeg, Tian et al. ICLR 2024): ``ES = overall / (1 + Σ_g |m_g - overall|)``
for a higher-is-better metric; it equals the metric when every group scores the same.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "FairnessResult",
    "groups_from_meta",
    "age_bins",
    "per_group",
    "equity_scaled",
    "fairness_report",
    "false_negative_rate",
    "fnr_gap",
    "fairness_ci",
    "FAIRNESS_CI_NAMES",
]

FAIRNESS_CI_NAMES = ("overall", "gap", "ratio", "equity_scaled")


@dataclass(frozen=True)
class FairnessResult:
    """Overall and per-group values of one metric, with the disparities between groups.

    ``gap`` = max - min over groups, ``ratio`` = min / max, ``equity_scaled`` (None for a
    lower-is-better metric), ``worst_group``/``best_group`` by ``higher_is_better``.
    """

    overall: float
    per_group: dict[Any, float]
    counts: dict[Any, int]
    gap: float
    ratio: float
    equity_scaled: float | None
    worst_group: Any
    best_group: Any
    higher_is_better: bool


def groups_from_meta(meta: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    """The ``key`` attribute of each sample's meta as an object array; ``ValueError`` naming the
    first samples (by ``id``/``patient_id`` when present) that lack it."""
    missing = [i for i, m in enumerate(meta) if m.get(key) is None or _is_nan(m.get(key))]
    if missing:
        names = [str(meta[i].get("id", meta[i].get("patient_id", f"#{i}"))) for i in missing[:5]]
        raise ValueError(f"{len(missing)} sample(s) have no {key!r} in meta, e.g. {names}")
    return np.array([m[key] for m in meta], dtype=object)


def _is_nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def age_bins(ages: Any, *, edges: Sequence[float] = (0, 20, 40, 60, 80)) -> np.ndarray:
    """Age group labels ``"lo-hi"`` for ``lo <= age < hi`` and ``"last+"`` above the last edge.

    ``ages`` in years; NaN or an age below the first edge raises ``ValueError``.
    """
    a = ages.detach().cpu().numpy() if isinstance(ages, torch.Tensor) else np.asarray(ages, dtype=np.float64)
    a = a.astype(np.float64)
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 1 or (np.diff(e) <= 0).any():
        raise ValueError(f"edges must be strictly increasing, got {list(edges)}")
    bad = ~np.isfinite(a) | (a < e[0])
    if bad.any():
        raise ValueError(f"ages at index {np.flatnonzero(bad)[:5].tolist()} are missing or below {e[0]:g}")
    labels = [f"{lo:g}-{hi:g}" for lo, hi in zip(e[:-1], e[1:])] + [f"{e[-1]:g}+"]
    return np.array(labels, dtype=object)[np.searchsorted(e, a, side="right") - 1]


def _take(x: Any, idx: np.ndarray) -> Any:
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return x[torch.as_tensor(idx, device=x.device)]
    return np.asarray(x)[idx]


def _length(x: Any) -> int:
    return x.shape[0] if isinstance(x, torch.Tensor | np.ndarray) else len(x)


def _scalar(value: Any, *, what: str) -> float:
    if isinstance(value, float | int | np.floating | np.integer):
        return float(value)
    v = value.detach().cpu().double() if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value, dtype=np.float64))
    if v.numel() != 1:
        raise ValueError(f"{what}: metric_fn must return a scalar, got shape {tuple(v.shape)}")
    return float(v.reshape(()))


def _group_index(groups: Any, n: int) -> dict[Any, np.ndarray]:
    g = groups.detach().cpu().numpy() if isinstance(groups, torch.Tensor) else np.asarray(groups, dtype=object)
    if g.shape[0] != n:
        raise ValueError(f"groups has {g.shape[0]} labels for {n} samples")
    missing = [i for i, x in enumerate(g.tolist()) if x is None or _is_nan(x)]
    if missing:
        raise ValueError(f"groups has missing labels (None/NaN) at index {missing[:5]}")
    labels = g.tolist()
    out: dict[Any, list[int]] = {}
    for i, lab in enumerate(labels):
        out.setdefault(lab, []).append(i)
    return {k: np.asarray(out[k]) for k in sorted(out, key=str)}


def per_group(
    metric_fn: Callable[..., Any],
    pred: Any,
    target: Any,
    groups: Any,
    *,
    min_group_size: int = 1,
    small_groups: str = "raise",
) -> tuple[dict[Any, float], dict[Any, int]]:
    """``metric_fn`` on the samples of each group: ``({group: value}, {group: n_samples})``."""
    if small_groups not in ("raise", "nan"):
        raise ValueError(f"small_groups must be 'raise' or 'nan', got {small_groups!r}")
    n = _length(pred)
    if target is not None and _length(target) != n:
        raise ValueError(f"pred and target lengths differ: {n} vs {_length(target)}")
    index = _group_index(groups, n)
    values: dict[Any, float] = {}
    counts = {k: int(v.size) for k, v in index.items()}
    for g, idx in index.items():
        if idx.size < min_group_size:
            if small_groups == "raise":
                raise ValueError(f"group {g!r} has {idx.size} sample(s); the statistic needs {min_group_size}")
            values[g] = math.nan
            continue
        p, t = _take(pred, idx), _take(target, idx)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = _scalar(metric_fn(p) if target is None else metric_fn(p, t), what=f"group {g!r}")
        if math.isnan(v) and small_groups == "raise":
            raise ValueError(
                f"metric undefined (NaN) for group {g!r} ({idx.size} samples), e.g. a single class present"
            )
        values[g] = v
    nan_groups = [g for g, v in values.items() if math.isnan(v)]
    if nan_groups:
        warnings.warn(f"metric undefined for group(s) {nan_groups}; left out of the gaps", stacklevel=2)
    return values, counts


def equity_scaled(overall: float, group_values: Mapping[Any, float] | Sequence[float]) -> float:
    """FairSeg's equity-scaled score ``overall / (1 + Σ_g |m_g - overall|)`` (NaN groups skipped)."""
    vals = np.asarray(list(group_values.values()) if isinstance(group_values, Mapping) else group_values, dtype=np.float64)
    vals = vals[~np.isnan(vals)]
    return float(overall / (1.0 + np.abs(vals - overall).sum()))


def _report(overall: float, values: dict[Any, float], counts: dict[Any, int], higher_is_better: bool) -> FairnessResult:
    defined = {g: v for g, v in values.items() if not math.isnan(v)}
    if not defined:
        raise ValueError("the metric is undefined for every group")
    lo_g = min(defined, key=defined.get)
    hi_g = max(defined, key=defined.get)
    lo, hi = defined[lo_g], defined[hi_g]
    return FairnessResult(
        overall=overall,
        per_group=values,
        counts=counts,
        gap=hi - lo,
        ratio=lo / hi if hi != 0 else math.nan,
        equity_scaled=equity_scaled(overall, defined) if higher_is_better else None,
        worst_group=lo_g if higher_is_better else hi_g,
        best_group=hi_g if higher_is_better else lo_g,
        higher_is_better=higher_is_better,
    )


def fairness_report(
    metric_fn: Callable[..., Any],
    pred: Any,
    target: Any,
    groups: Any,
    *,
    min_group_size: int = 1,
    small_groups: str = "raise",
    higher_is_better: bool = True,
) -> FairnessResult:
    """Overall value, per-group values, gap, ratio and equity-scaled score of ``metric_fn``."""
    values, counts = per_group(
        metric_fn, pred, target, groups, min_group_size=min_group_size, small_groups=small_groups
    )
    overall = _scalar(metric_fn(pred) if target is None else metric_fn(pred, target), what="overall")
    return _report(overall, values, counts, higher_is_better)


def _binary(pred: Any, target: Any, threshold: float | None) -> tuple[np.ndarray, np.ndarray]:
    p = pred.detach().cpu().double().numpy() if isinstance(pred, torch.Tensor) else np.asarray(pred, dtype=np.float64)
    t = target.detach().cpu().double().numpy() if isinstance(target, torch.Tensor) else np.asarray(target, dtype=np.float64)
    if p.ndim != 1 or t.ndim != 1:
        raise ValueError(f"expected (N,) scores and labels, got {p.shape} and {t.shape}")
    if p.shape[0] != t.shape[0]:
        raise ValueError(f"pred and target lengths differ: {p.shape[0]} vs {t.shape[0]}")
    if not np.isfinite(p).all():
        raise ValueError("pred has NaN or inf values")
    if not np.isin(t, (0.0, 1.0)).all():
        raise ValueError("target must be 0/1 labels")
    if threshold is None:
        if not np.isin(p, (0.0, 1.0)).all():
            raise ValueError("pred must be 0/1 decisions when threshold is None")
        decision = p == 1
    else:
        decision = p >= threshold
    return decision, t == 1


def false_negative_rate(pred: Any, target: Any, *, threshold: float | None = 0.5) -> float:
    """Fraction of positives predicted negative, ``FN / (TP + FN)`` (score >= ``threshold`` is
    positive; ``threshold=None``: ``pred`` holds 0/1 decisions). NaN without positives."""
    decision, positive = _binary(pred, target, threshold)
    n_pos = positive.sum()
    return float((~decision & positive).sum() / n_pos) if n_pos else math.nan


def fnr_gap(
    pred: Any,
    target: Any,
    groups: Any,
    *,
    threshold: float | None = 0.5,
    min_positives: int = 1,
    small_groups: str = "raise",
) -> FairnessResult:
    """Underdiagnosis: false-negative rate per group and its gap (Seyyed-Kalantari et al. 2021).

    ``target`` = 1 for a sample with a finding ("not No Finding"); the group with the highest FNR
    is ``worst_group``. A group with fewer than ``min_positives`` positives raises ``ValueError``
    naming it (or is NaN with ``small_groups="nan"``).
    """
    decision, positive = _binary(pred, target, threshold)
    if small_groups not in ("raise", "nan"):
        raise ValueError(f"small_groups must be 'raise' or 'nan', got {small_groups!r}")
    index = _group_index(groups, decision.shape[0])
    values: dict[Any, float] = {}
    counts: dict[Any, int] = {}
    for g, idx in index.items():
        n_pos = int(positive[idx].sum())
        counts[g] = n_pos
        if n_pos < max(min_positives, 1):
            if small_groups == "raise":
                raise ValueError(f"group {g!r} has {n_pos} positive(s); the FNR needs {max(min_positives, 1)}")
            values[g] = math.nan
            continue
        values[g] = float((~decision[idx] & positive[idx]).sum() / n_pos)
    overall = float((~decision & positive).sum() / positive.sum()) if positive.any() else math.nan
    return _report(overall, values, counts, higher_is_better=False)


def fairness_ci(
    metric_fn: Callable[..., Any],
    pred: Any,
    target: Any,
    groups: Any,
    *,
    clusters: Any = None,
    min_group_size: int = 1,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Any:
    """Bootstrap CI of ``[overall, gap, ratio, equity_scaled]`` (``FAIRNESS_CI_NAMES``).

    Samples are resampled with replacement (whole ``clusters``, e.g. patient ids, when given,
    so a patient's images stay together); a resample in which some group is missing, too small
    or has an undefined metric is NaN and ignored. Returns ``stats.BootstrapResult`` with
    arrays of shape ``(4,)``.
    """
    from medimg_bench.metrics.stats import bootstrap_ci

    n = _length(pred)
    if target is not None and _length(target) != n:
        raise ValueError(f"pred and target lengths differ: {n} vs {_length(target)}")
    index = _group_index(groups, n)
    codes = np.empty(n, dtype=np.int64)
    names = list(index)
    for c, g in enumerate(names):
        codes[index[g]] = c
    # the full-data value raises on small groups like fairness_report
    fairness_report(metric_fn, pred, target, groups, min_group_size=min_group_size)

    def stat(idx: torch.Tensor) -> torch.Tensor:
        i = idx.cpu().numpy()
        g = codes[i]
        if np.unique(g).size < len(names):
            return torch.full((4,), math.nan, dtype=torch.float64)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = fairness_report(
                    metric_fn, _take(pred, i), _take(target, i), g, min_group_size=min_group_size
                )
        except ValueError:
            return torch.full((4,), math.nan, dtype=torch.float64)
        return torch.tensor([r.overall, r.gap, r.ratio, r.equity_scaled], dtype=torch.float64)

    return bootstrap_ci(
        stat,
        torch.arange(n),
        n_resamples=n_resamples,
        confidence=confidence,
        groups=clusters,
        seed=seed,
    )
