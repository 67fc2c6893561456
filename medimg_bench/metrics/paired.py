"""Paired tests for two models on the same samples: McNemar's exact test for accuracy-type
(0/1) outcomes and Holm's step-down correction for several comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["mcnemar_test", "holm"]


def mcnemar_test(correct_a: Any, correct_b: Any) -> dict[str, float]:
    """McNemar's exact (binomial) test on paired 0/1 outcomes. Returns ``b`` (a right, b wrong),
    ``c`` (a wrong, b right), the accuracy difference ``a − b`` and the two-sided ``p_value``
    (equal to ``statsmodels``' ``mcnemar(exact=True)``)."""
    from scipy.stats import binomtest

    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"mcnemar_test: paired 1-D outcomes needed, got shapes {a.shape} and {b.shape}")
    n01 = int((a & ~b).sum())
    n10 = int((~a & b).sum())
    p = 1.0 if n01 + n10 == 0 else float(binomtest(n01, n01 + n10, 0.5).pvalue)
    return {"b": float(n01), "c": float(n10), "difference": float(a.mean() - b.mean()), "p_value": p}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (same order as given; NaN stays NaN)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        out[idx] = running
    return out.tolist()
