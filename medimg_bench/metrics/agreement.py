"""Agreement between measurements (Cobb angle, tube-to-carina distance, volumes ...).

``pred`` is the model's measurement and ``target`` the reference, one value per sample, in the
measurement's own unit (degrees, mm ...). Differences are ``pred - target`` (positive bias: the
model over-measures). ICC follows Shrout & Fleiss (1979) / McGraw & Wong (1996) two-way ANOVA.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics._utils import as_tensor
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = [
    "BlandAltman",
    "mae",
    "rmse",
    "bias",
    "bland_altman",
    "icc",
    "pearson",
    "spearman",
    "agreement_summary",
    "AGREEMENT_STATS",
    "Agreement",
]

AGREEMENT_STATS = (
    "mae", "rmse", "bias", "loa_low", "loa_high", "icc2_1", "icc3_1", "pearson", "spearman",
)


def _vectors(pred: Any, target: Any, *, min_n: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    p = as_tensor(pred, name="pred").double()
    t = as_tensor(target, name="target").double().to(p.device)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if p.ndim != 1 or t.ndim != 1:
        raise ValueError(f"expected one measurement per sample (N,), got {tuple(p.shape)} and {tuple(t.shape)}")
    if p.shape[0] != t.shape[0]:
        raise ValueError(f"pred and target lengths differ: {p.shape[0]} vs {t.shape[0]}")
    for name, x in (("pred", p), ("target", t)):
        bad = ~torch.isfinite(x)
        if bad.any():
            raise ValueError(f"{name} has NaN or inf values at index {bad.nonzero().flatten()[:10].tolist()}")
    if p.shape[0] < min_n:
        what = "empty input" if p.shape[0] == 0 else f"got {p.shape[0]}"
        raise ValueError(f"needs at least {min_n} samples ({what})")
    return p, t


def mae(pred: Any, target: Any) -> torch.Tensor:
    """Mean absolute error, in the measurement's unit (scalar float64)."""
    p, t = _vectors(pred, target)
    return (p - t).abs().mean()


def rmse(pred: Any, target: Any) -> torch.Tensor:
    """Root mean squared error, in the measurement's unit (scalar float64)."""
    p, t = _vectors(pred, target)
    return (p - t).square().mean().sqrt()


def bias(pred: Any, target: Any) -> torch.Tensor:
    """Mean difference ``mean(pred - target)`` (scalar float64)."""
    p, t = _vectors(pred, target)
    return (p - t).mean()


@dataclass(frozen=True)
class BlandAltman:
    """Bland–Altman analysis: bias, SD of the differences (ddof=1) and the limits of agreement."""

    bias: float
    sd: float
    loa_low: float
    loa_high: float
    n: int


def bland_altman(pred: Any, target: Any, *, z: float = 1.96) -> BlandAltman:
    """Bias ``mean(d)`` and limits of agreement ``bias ± z·SD(d)`` of ``d = pred - target``.

    SD uses ``N - 1`` (Bland & Altman 1986); needs at least 2 samples.
    """
    p, t = _vectors(pred, target, min_n=2)
    d = p - t
    b = d.mean().item()
    sd = d.std(correction=1).item()
    return BlandAltman(bias=b, sd=sd, loa_low=b - z * sd, loa_high=b + z * sd, n=int(d.numel()))


def _ratings(pred: Any, target: Any) -> torch.Tensor:
    if target is None:
        x = as_tensor(pred, name="ratings").double()
        if x.ndim != 2 or x.shape[1] < 2:
            raise ValueError(f"ratings must be (n_subjects, k_raters) with k >= 2, got {tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("ratings have NaN or inf values")
    else:
        p, t = _vectors(pred, target)
        x = torch.stack([t, p], 1)
    if x.shape[0] < 2:
        raise ValueError(f"ICC needs at least 2 subjects, got {x.shape[0]}")
    return x


def icc(pred: Any, target: Any = None, *, form: str = "2,1") -> torch.Tensor:
    """Intraclass correlation, single rater: ``form="2,1"`` (two-way random, absolute agreement)
    or ``"3,1"`` (two-way mixed, consistency). Scalar float64.

    ``pred``/``target``: one measurement each per subject; or ``pred`` alone as an
    ``(n_subjects, k_raters)`` matrix with ``target=None``. NaN (with a warning) when the
    denominator is zero (all ratings equal).
    """
    if form not in ("2,1", "3,1"):
        raise ValueError(f"form must be '2,1' or '3,1', got {form!r}")
    x = _ratings(pred, target)
    n, k = x.shape
    grand = x.mean()
    row = x.mean(1, keepdim=True)
    col = x.mean(0, keepdim=True)
    ms_rows = k * (row - grand).square().sum() / (n - 1)
    ms_cols = n * (col - grand).square().sum() / (k - 1)
    ms_err = (x - row - col + grand).square().sum() / ((n - 1) * (k - 1))
    if form == "2,1":
        den = ms_rows + (k - 1) * ms_err + k * (ms_cols - ms_err) / n
    else:
        den = ms_rows + (k - 1) * ms_err
    if den == 0:
        warnings.warn(f"ICC({form}) undefined: all ratings are equal", stacklevel=2)
        return torch.tensor(math.nan, dtype=torch.float64, device=x.device)
    return (ms_rows - ms_err) / den


def pearson(pred: Any, target: Any) -> torch.Tensor:
    """Pearson correlation (scalar float64); NaN with a warning when an input is constant."""
    p, t = _vectors(pred, target, min_n=2)
    pc, tc = p - p.mean(), t - t.mean()
    den = pc.norm() * tc.norm()
    if den == 0:
        warnings.warn("Pearson correlation undefined: an input is constant", stacklevel=2)
        return torch.tensor(math.nan, dtype=torch.float64, device=p.device)
    return ((pc * tc).sum() / den).clamp(-1.0, 1.0)


def _average_ranks(x: torch.Tensor) -> torch.Tensor:
    order = torch.argsort(x, stable=True)
    _, inverse, counts = torch.unique_consecutive(x[order], return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    ranks = torch.empty_like(x)
    ranks[order] = (ends - (counts.double() - 1) / 2)[inverse]
    return ranks


def spearman(pred: Any, target: Any) -> torch.Tensor:
    """Spearman rank correlation (Pearson of average ranks; ties averaged as scipy)."""
    p, t = _vectors(pred, target, min_n=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = pearson(_average_ranks(p), _average_ranks(t))
    if out.isnan():
        warnings.warn("Spearman correlation undefined: an input is constant", stacklevel=2)
    return out


def agreement_summary(pred: Any, target: Any) -> dict[str, float]:
    """All agreement statistics (names in ``AGREEMENT_STATS``) as plain floats."""
    ba = bland_altman(pred, target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {
            "mae": mae(pred, target).item(),
            "rmse": rmse(pred, target).item(),
            "bias": ba.bias,
            "loa_low": ba.loa_low,
            "loa_high": ba.loa_high,
            "icc2_1": icc(pred, target, form="2,1").item(),
            "icc3_1": icc(pred, target, form="3,1").item(),
            "pearson": pearson(pred, target).item(),
            "spearman": spearman(pred, target).item(),
        }


@register_metric("agreement", tags=("measurement", "regression"))
class Agreement(Metric):
    """Stateful agreement statistics over all samples (a dataset-level metric).

    ``compute``/``functional`` return a ``(9,)`` tensor in the order of ``AGREEMENT_STATS``
    (also the default ``class_names``); per-sample absolute errors are kept in :meth:`values`.
    """

    name = "agreement"
    per_sample = False
    input_kind = "measurements"
    higher_is_better = None
    #: the statistics (its classes): errors lower, agreement higher; bias and limits signed
    directions = MappingProxyType({"mae": False, "rmse": False, "bias": None, "loa_low": None, "loa_high": None,
                                   "icc2_1": True, "icc3_1": True, "pearson": True, "spearman": True})
    value_ranges = MappingProxyType({"mae": (0.0, math.inf), "rmse": (0.0, math.inf), "icc2_1": (-1.0, 1.0),
                                     "icc3_1": (-1.0, 1.0), "pearson": (-1.0, 1.0), "spearman": (-1.0, 1.0)})

    def __init__(self, *, class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=class_names or AGREEMENT_STATS)
        self.add_state("preds", [], dist_reduce_fx="cat")
        self.add_state("targets", [], dist_reduce_fx="cat")

    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:
        p, t = _vectors(preds, targets)
        self._add_ids(ids, p.shape[0])
        self.preds.append(p.detach())
        self.targets.append(t.detach())

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.preds:
            raise ValueError("agreement: no samples seen")
        return torch.cat(self.preds), torch.cat(self.targets)

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        stats = agreement_summary(preds, targets)
        return torch.tensor([stats[k] for k in AGREEMENT_STATS], dtype=torch.float64)

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        """Bootstrap fast path: every statistic from weighted moment sums (per-cluster sums, one
        product per block; shifted by the full-data means so the sums stay well conditioned) and
        Spearman from weighted average ranks; equal to recomputing on the resampled rows up to
        floating-point rounding."""
        p, t = _vectors(preds, targets, min_n=2)
        pn, tn = p.cpu().numpy(), t.cpu().numpy()
        return _agreement_cluster_fn(pn, tn, np.asarray(cluster, dtype=np.int64), n_clusters)

    def values(self) -> tuple[list[str], torch.Tensor]:
        """Absolute error per sample, ``(N, 1)``."""
        p, t = self.state_arrays()
        return list(self.ids), (p - t).abs()[:, None]

    def compute(self) -> torch.Tensor:
        return self.functional(*self.state_arrays())


def _weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks (ties averaged, as scipy) of ``x`` (N,) in each resample of sample weights
    ``w`` (b, N): a sample drawn ``k`` times stands for ``k`` tied copies."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    group = np.concatenate([[0], np.cumsum(xs[1:] != xs[:-1])])
    ws = w[:, order]
    n_groups = int(group[-1]) + 1
    tot = np.zeros((w.shape[0], n_groups))
    np.add.at(tot.T, group, ws.T)
    below = np.cumsum(tot, axis=1) - tot
    ranks = np.empty_like(ws)
    ranks[:, order] = (below + (tot + 1) / 2)[:, group]
    return ranks


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    sw = w.sum(1)
    xc = x - (w * x).sum(1, keepdims=True) / sw[:, None]
    yc = y - (w * y).sum(1, keepdims=True) / sw[:, None]
    den = np.sqrt((w * xc * xc).sum(1) * (w * yc * yc).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, np.clip((w * xc * yc).sum(1) / den, -1.0, 1.0), np.nan)


def _agreement_cluster_fn(p: np.ndarray, t: np.ndarray, cluster: np.ndarray, n_clusters: int) -> Any:
    """Cluster counts (b, G) → the ``AGREEMENT_STATS`` (b, 9) of each resample."""
    mp, mt = p.mean(), t.mean()
    a, b = p - mp, t - mt  # centred on the full data
    md = mp - mt
    d = a - b  # = (p - t) - md
    cols = np.stack([np.ones_like(p), np.abs(p - t), (p - t) ** 2, a, b, a * a, b * b, a * b, d, d * d], 1)
    sums = np.zeros((n_clusters, cols.shape[1]))
    np.add.at(sums, cluster, cols)

    def fn(counts: torch.Tensor) -> torch.Tensor:
        c = counts.detach().cpu().numpy().astype(np.float64)
        s1, s_abs, s_sq, sa, sb, saa, sbb, sab, sd, sdd = (c @ sums).T
        with np.errstate(invalid="ignore", divide="ignore"):
            bias_c = sd / s1
            bias = bias_c + md
            sd_d = np.sqrt(np.maximum(sdd - s1 * bias_c**2, 0.0) / (s1 - 1))
            s_row, s_row2 = (sa + sb) / 2, (saa + 2 * sab + sbb) / 4
            ms_rows = 2 * (s_row2 - s_row**2 / s1) / (s1 - 1)
            ms_err = sd_d**2 / 2
            ms_cols = s1 * bias**2 / 2
            den2 = ms_rows + ms_err + 2 * (ms_cols - ms_err) / s1
            den3 = ms_rows + ms_err
            icc2 = np.where(den2 != 0, (ms_rows - ms_err) / den2, np.nan)
            icc3 = np.where(den3 != 0, (ms_rows - ms_err) / den3, np.nan)
            var_a, var_b = saa - sa**2 / s1, sbb - sb**2 / s1
            den_r = np.sqrt(np.maximum(var_a, 0) * np.maximum(var_b, 0))
            r = np.where(den_r > 0, np.clip((sab - sa * sb / s1) / den_r, -1.0, 1.0), np.nan)
        w = c[:, cluster]
        rho = _weighted_pearson(_weighted_ranks(p, w), _weighted_ranks(t, w), w)
        out = np.stack([s_abs / s1, np.sqrt(s_sq / s1), bias, bias - 1.96 * sd_d, bias + 1.96 * sd_d,
                        icc2, icc3, r, rho], 1)
        return torch.from_numpy(out)

    return fn
