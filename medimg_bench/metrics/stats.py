"""Resampling statistics: bootstrap confidence intervals (optionally clustered by patient)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["BootstrapResult", "bootstrap_ci"]


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimate and confidence interval (arrays of the metric's output shape)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    confidence: float
    n_resamples: int
    method: str


def _cluster_indices(groups: np.ndarray | None, n: int) -> list[np.ndarray]:
    if groups is None:
        return [np.array([i]) for i in range(n)]
    _, inverse = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    return np.split(order, bounds)


def bootstrap_ci(
    metric: Callable[..., Any],
    pred: Any,
    target: Any = None,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    groups: Any = None,
    seed: int = 0,
) -> BootstrapResult:
    """Percentile bootstrap CI of ``metric(pred, target)`` (or ``metric(pred)`` without target).

    ``groups`` (e.g. patient ids, one per sample) resamples whole groups, so all images of a
    patient stay together. Resamples where the metric is undefined (NaN) are ignored per output.
    """
    if method != "percentile":
        raise ValueError(f"method must be 'percentile', got {method!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    p = torch.as_tensor(pred) if not isinstance(pred, torch.Tensor) else pred
    t = None if target is None else (torch.as_tensor(target) if not isinstance(target, torch.Tensor) else target)
    n = p.shape[0]
    if t is not None and t.shape[0] != n:
        raise ValueError(f"pred and target lengths differ: {n} vs {t.shape[0]}")
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} samples")

    def call(idx: np.ndarray | None) -> np.ndarray:
        if idx is None:
            out = metric(p) if t is None else metric(p, t)
        else:
            ti = torch.as_tensor(idx, device=p.device)
            out = metric(p[ti]) if t is None else metric(p[ti], t[ti])
        return np.asarray(torch.as_tensor(out).detach().cpu().double())

    estimate = call(None)
    clusters = _cluster_indices(None if groups is None else np.asarray(groups), n)
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(n_resamples):
        pick = rng.integers(0, len(clusters), len(clusters))
        stats.append(call(np.concatenate([clusters[i] for i in pick])))
    arr = np.stack(stats)
    alpha = (1 - confidence) / 2
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            low = np.nanquantile(arr, alpha, axis=0)
            high = np.nanquantile(arr, 1 - alpha, axis=0)
    return BootstrapResult(estimate, low, high, confidence, n_resamples, method)
