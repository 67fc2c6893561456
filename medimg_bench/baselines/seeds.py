"""Verdicts over training seeds: one run per seed, the mean judged against the published value
with an interval that covers both the spread between seeds and test-set sampling.

The rule (docs/baselines.md, "Verdicts over seeds"): for a metric measured by ``k`` runs that
differ only in their seed, with values ``v_1..v_k`` and per-run 95 % bootstrap intervals
``[lo_i, hi_i]`` (patients of the one test set resampled),

* ``mean`` = the mean of ``v_i``, ``sd`` its sample standard deviation (``ddof=1``);
* seed term ``h_seed = t_{0.975, k-1} * sd / sqrt(k)``: the 95 % t interval of the mean of k
  runs (0 with one seed: the spread is then not measured, and said so);
* test term, lower / upper: the mean over seeds of ``v_i - lo_i`` / ``hi_i - v_i``. Every seed
  is scored on the same test images, so averaging seeds does not shrink test-set sampling; the
  mean of the per-run half-widths is an upper bound for the mean of the runs (exact for
  standard deviations: that of a mean of correlated terms is at most the mean of theirs), so
  no joint resampling of every run's predictions is needed;
* interval ``[mean - sqrt(h_seed^2 + test_lo^2), mean + sqrt(h_seed^2 + test_hi^2)]``: the two
  sources are independent (training randomness, test-set sampling), so their half-widths add
  in quadrature.

The interval is clipped to the metric's range where its summary records one (AUROC, accuracy:
[0, 1]; ``ci_clipped`` says so): with few seeds the t quantile is large (12.7 for two seeds) and
the raw interval can pass the metric's bounds. No published value lies outside them, so
clipping never changes a verdict.

``reproduced`` when the published value lies in that interval (``rule: ci``), or within the
card's tolerance of the mean (``rule: abs_tol``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["combine_seeds", "seed_interval"]


def seed_interval(values: Sequence[float], lows: Sequence[float], highs: Sequence[float], *,
                  confidence: float = 0.95) -> dict[str, float | None]:
    """``mean``, ``sd`` (None for one seed), the seed and test half-widths and the combined
    interval ``ci_low``/``ci_high`` of per-seed ``values`` with their bootstrap intervals (see
    the module docstring). NaN values or bounds make the interval NaN."""
    k = len(values)
    if k == 0 or not (k == len(lows) == len(highs)):
        raise ValueError(f"seed_interval: need one value and one interval per seed, got "
                         f"{len(values)} values, {len(lows)} lows, {len(highs)} highs")
    mean = math.fsum(values) / k
    sd = statistics.stdev(values) if k > 1 else None
    h_seed = 0.0
    if sd is not None:
        from scipy.stats import t

        h_seed = float(t.ppf(0.5 + confidence / 2, k - 1)) * sd / math.sqrt(k)
    test_lo = math.fsum(v - lo for v, lo in zip(values, lows)) / k
    test_hi = math.fsum(hi - v for v, hi in zip(values, highs)) / k
    return {"mean": mean, "sd": sd, "h_seed": h_seed, "h_test_low": test_lo, "h_test_high": test_hi,
            "ci_low": mean - math.hypot(h_seed, test_lo), "ci_high": mean + math.hypot(h_seed, test_hi)}


def _entry(e: Any) -> tuple[float, float, float] | None:
    if not isinstance(e, Mapping):
        return None
    v, lo, hi = e.get("value", e.get("mean")), e.get("ci_low"), e.get("ci_high")
    if v is None or lo is None or hi is None:
        return None
    return float(v), float(lo), float(hi)


def _clip(low: float, high: float, bounds: Sequence[float | None] | None) -> tuple[float, float, bool]:
    """``low``/``high`` within ``bounds`` (None or a None side: unbounded) and whether either moved."""
    lo_b, hi_b = (list(bounds) + [None, None])[:2] if bounds is not None else (None, None)
    new_lo = low if lo_b is None or low >= lo_b else float(lo_b)
    new_hi = high if hi_b is None or high <= hi_b else float(hi_b)
    return new_lo, new_hi, (new_lo, new_hi) != (low, high)


def _combine_entry(entries: Sequence[Any], seeds: Sequence[int],
                   bounds: Sequence[float | None] | None = None) -> dict[str, Any] | None:
    got = [_entry(e) for e in entries]
    if any(g is None for g in got):
        return None
    vals, lows, highs = (list(x) for x in zip(*got))
    iv = seed_interval(vals, lows, highs)
    low, high, clipped = _clip(iv["ci_low"], iv["ci_high"], bounds)
    return {"value": iv["mean"], "ci_low": low, "ci_high": high, "ci_clipped": clipped, "sd": iv["sd"],
            "h_seed": iv["h_seed"], "h_test": [iv["h_test_low"], iv["h_test_high"]],
            "per_seed": [{"seed": s, "value": v, "ci_low": lo, "ci_high": hi}
                         for s, v, lo, hi in zip(seeds, vals, lows, highs)]}


def combine_seeds(summaries: Sequence[Mapping[str, Any]], seeds: Sequence[int]) -> dict[str, Any]:
    """A ``summary.json``-shaped dict whose every metric value (macro ``mean`` and ``per_class``)
    is the mean over the seeds' summaries with the combined interval (clipped to the metric's
    recorded ``range``), plus ``sd``, ``h_seed``, ``h_test``, ``ci_clipped`` and ``per_seed``.
    Entries missing from any seed are left out."""
    if len(summaries) != len(seeds) or not summaries:
        raise ValueError(f"combine_seeds: {len(summaries)} summaries for {len(seeds)} seeds")
    out: dict[str, Any] = {"metrics": {}, "seeds": list(seeds)}
    names = set.intersection(*(set(s.get("metrics", {})) for s in summaries))
    for name in sorted(names):
        ms = [s["metrics"][name] for s in summaries]
        bounds = ms[0].get("range")
        entry: dict[str, Any] = {"per_class": {}, "range": bounds}
        mean = _combine_entry([m.get("mean") for m in ms], seeds, bounds)
        if mean is not None:
            entry["mean"] = mean
        classes = set.intersection(*(set(m.get("per_class") or {}) for m in ms))
        for cls in sorted(classes):
            pc = ms[0]["per_class"][cls]
            c = _combine_entry([m["per_class"][cls] for m in ms], seeds,
                               pc.get("range", bounds) if isinstance(pc, Mapping) else bounds)
            if c is not None:
                entry["per_class"][cls] = c
        out["metrics"][name] = entry
    return out
