"""Aggregates for a run: per class and macro, with bootstrap confidence intervals clustered by
patient, and counts of empty/missed structures for segmentation."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.stats import bootstrap_ci

__all__ = ["summarize", "metric_value_tables"]


def metric_value_tables(metric: Metric) -> dict[str, tuple[list[str], torch.Tensor]]:
    """Per-sample values of a metric as ``{column: (ids, (N, C) tensor)}``; a combined metric
    (one with ``metric_values()``) yields one entry per metric it computes."""
    if hasattr(metric, "metric_values"):
        return dict(metric.metric_values())
    return {metric.name: metric.values()}


def _f(x: Any) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def _class_names(metric: Metric, n: int) -> list[str]:
    names = metric.class_names
    return list(names) if names and len(names) == n else [str(i) for i in range(n)]


def summarize(
    metrics: Mapping[str, Metric],
    samples: pd.DataFrame,
    *,
    patients: Mapping[str, str] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """The ``summary.json`` content: for each metric, per class (and the macro mean over classes)
    the point value with a bootstrap CI; per-sample metrics also get median, std and counts."""
    patients = patients or {}
    out: dict[str, Any] = {"confidence": confidence, "n_resamples": n_resamples, "metrics": {}}
    for key, metric in metrics.items():
        if metric.per_sample:
            for column, (ids, values) in metric_value_tables(metric).items():
                name = column if column != metric.name else key
                out["metrics"][name] = _per_sample_summary(
                    metric, ids, values, patients, n_resamples, confidence, seed, column=column
                )
        else:
            out["metrics"][key] = _dataset_summary(metric, patients, n_resamples, confidence, seed)
        notes = getattr(metric, "summary_notes", None)
        if callable(notes):  # a metric's own top-level facts (VQA: answers withheld)
            out.update(notes())
    status = samples["status"] if "status" in samples.columns else pd.Series(dtype=str)
    ids_failed = sorted(set(samples.loc[status == "failed", "id"])) if len(status) else []
    out["n_samples"] = int(samples["id"].nunique()) if len(samples) else 0
    out["n_failed"] = len(ids_failed)
    out["failed_ids"] = ids_failed
    if {"target_voxels", "pred_voxels", "class"} <= set(samples.columns):
        ok = samples[samples["status"] == "ok"]
        t0, p0 = ok["target_voxels"] == 0, ok["pred_voxels"] == 0
        out["cases"] = {
            str(c): {
                "absent": int((t0 & p0)[ok["class"] == c].sum()),
                "missed": int((t0 ^ p0)[ok["class"] == c].sum()),
                "present": int((~t0 & ~p0)[ok["class"] == c].sum()),
            }
            for c in ok["class"].unique()
        }
    return out


def _groups(ids: list[str], patients: Mapping[str, str]) -> list[str] | None:
    if not patients:
        return None
    return [patients.get(i, i) for i in ids]


def higher_is_better(metric: Metric, column: str | None = None) -> bool | None:
    """Direction of a metric, or of one column of a combined metric (None: signed/undirected)."""
    of = getattr(metric, "higher_is_better_of", None)
    if column is not None and callable(of):
        return of(column)
    return metric.higher_is_better


def value_bounds(metric: Metric, column: str | None = None) -> list[float | None]:
    """``[low, high]`` of a metric's (or column's) values for ``summary.json``; None = unbounded."""
    lo, hi = metric.range_of(column) if column is not None else metric.value_range
    return [None if math.isinf(lo) else lo, None if math.isinf(hi) else hi]


@dataclass
class _Interval:
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    note: str | None = None


def _bootstrap(
    metric_fn: Any, pred: Any, target: Any, groups: list[str] | None,
    n_resamples: int, confidence: float, seed: int,
) -> _Interval:
    """Per-class values plus their macro mean, with bootstrap CIs; with fewer than two
    patients (or samples) there is nothing to resample: point values and no interval."""
    n_clusters = len(set(groups)) if groups is not None else int(pred.shape[0])
    if n_clusters >= 2 and n_resamples > 0:
        ci = bootstrap_ci(metric_fn, pred, target, n_resamples=n_resamples, confidence=confidence,
                          groups=groups, seed=seed, append_mean=True)
        return _Interval(np.atleast_1d(ci.estimate), np.atleast_1d(ci.low), np.atleast_1d(ci.high))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(metric_fn, str):  # "mean"
            per_class = torch.as_tensor(pred).double().nanmean(0)
        else:
            per_class = torch.as_tensor(metric_fn(pred, target)).double().reshape(-1).cpu()
        est = torch.cat([per_class.cpu(), per_class.nanmean().reshape(1).cpu()]).numpy()
    nan = np.full_like(est, np.nan)
    return _Interval(est, nan, nan, note=f"no confidence interval: {n_clusters} patient(s) to resample")


def _per_sample_summary(
    metric: Metric,
    ids: list[str],
    values: torch.Tensor,
    patients: Mapping[str, str],
    n_resamples: int,
    confidence: float,
    seed: int,
    *,
    column: str | None = None,
) -> dict[str, Any]:
    v = values.detach().double().cpu()
    names = _class_names(metric, v.shape[1] if v.ndim == 2 else 1)
    res: dict[str, Any] = {"kind": "per_sample", "higher_is_better": higher_is_better(metric, column),
                           "range": value_bounds(metric, column), "per_class": {}}
    if v.numel() == 0:
        return res

    # "mean" keeps bootstrap_ci on its vectorised path (resample weights × values)
    ci = _bootstrap("mean", v, None, _groups(ids, patients), n_resamples, confidence, seed)
    if ci.note:
        res["note"] = ci.note
    for j, cname in enumerate(names):
        col = v[:, j]
        valid = col[~col.isnan()]
        res["per_class"][cname] = {
            "mean": _f(ci.estimate[j]),
            "ci_low": _f(ci.low[j]),
            "ci_high": _f(ci.high[j]),
            "median": _f(valid.median()) if len(valid) else None,
            "std": _f(valid.std()) if len(valid) > 1 else None,
            "n": int(len(valid)),
            "n_nan": int(col.isnan().sum()),
        }
    res["mean"] = {"value": _f(ci.estimate[-1]), "ci_low": _f(ci.low[-1]), "ci_high": _f(ci.high[-1])}
    return res


def _dataset_summary(
    metric: Metric, patients: Mapping[str, str], n_resamples: int, confidence: float, seed: int
) -> dict[str, Any]:
    res: dict[str, Any] = {"kind": "dataset", "higher_is_better": metric.higher_is_better,
                           "range": value_bounds(metric), "per_class": {}}
    if not metric.ids:
        return res
    preds, targets = metric.state_arrays()

    # the bound ``functional`` lets bootstrap_ci use a metric's weighted fast path (AUROC, AUPRC)
    ci = _bootstrap(metric.functional, preds, targets, _groups(list(metric.ids), patients),
                    n_resamples, confidence, seed)
    if ci.note:
        res["note"] = ci.note
    est = np.atleast_1d(ci.estimate)
    names = _class_names(metric, len(est) - 1)
    t = torch.as_tensor(targets)
    if t.ndim == 2 and t.shape[1] == len(names) and t.is_floating_point():
        counts = (~t.isnan()).sum(0).tolist()  # labelled samples per class (NaN = unlabelled)
    else:
        counts = [int(t.shape[0])] * len(names)
    for j, cname in enumerate(names):
        res["per_class"][cname] = {"value": _f(est[j]), "ci_low": _f(ci.low[j]), "ci_high": _f(ci.high[j]),
                                   "n": int(counts[j])}
        if cname in metric.directions:  # a statistic with its own direction (agreement's mae)
            res["per_class"][cname]["higher_is_better"] = metric.directions[cname]
        if cname in metric.value_ranges:
            res["per_class"][cname]["range"] = value_bounds(metric, cname)
    res["mean"] = {"value": _f(est[-1]), "ci_low": _f(ci.low[-1]), "ci_high": _f(ci.high[-1])}
    return res
