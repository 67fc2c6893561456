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
from medimg_bench.metrics.stats import bootstrap_cis

__all__ = ["summarize", "metric_value_tables", "exclusion_summary"]


def exclusion_summary(exclusions: Any) -> dict[str, Any]:
    """``{"n_excluded", "exclusions"}`` of ``summary.json``: the items the dataset's layout lists
    that are not samples (``dataset.exclusions``: ``{"id", "file", "reason"}`` each), counted
    and listed, so nothing leaves a test set unseen. ``exclusions`` may be a dataset or the list."""
    items = getattr(exclusions, "exclusions", exclusions) or []
    rows = [{"id": str(e.get("id", "")), "file": str(e.get("file") or ""), "reason": str(e.get("reason", ""))}
            for e in items]
    return {"n_excluded": len(rows), "exclusions": rows}


def metric_value_tables(metric: Metric) -> dict[str, tuple[list[str], torch.Tensor]]:
    """Per-sample values of a metric as ``{column: (ids, (N, C) tensor)}``
    (:meth:`Metric.metric_values`); a combined metric yields one entry per metric it computes."""
    return dict(metric.metric_values())


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
    dataset = _dataset_intervals({k: m for k, m in metrics.items() if not m.per_sample}, patients,
                                 n_resamples, confidence, seed)
    for key, metric in metrics.items():
        if metric.per_sample:
            for column, (ids, values) in metric_value_tables(metric).items():
                name = column if column != metric.name else key
                out["metrics"][name] = _per_sample_summary(
                    metric, ids, values, patients, n_resamples, confidence, seed, column=column
                )
        else:
            out["metrics"][key] = _dataset_summary(metric, *dataset.get(key, (None, None)))
        out.update(metric.summary_notes())  # a metric's own top-level facts (VQA: answers withheld)
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
    return metric.higher_is_better if column is None else metric.higher_is_better_of(column)


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


def bootstrap(
    metric_fn: Any, pred: Any, target: Any, groups: list[str] | None,
    n_resamples: int, confidence: float, seed: int,
) -> _Interval:
    """Per-class values plus their macro mean, with bootstrap CIs; with fewer than two
    patients (or samples) there is nothing to resample: point values and no interval."""
    return _bootstraps([(metric_fn, pred, target)], groups, n_resamples, confidence, seed)[0]


def _bootstraps(
    items: list[tuple[Any, Any, Any]], groups: list[str] | None, n_resamples: int, confidence: float, seed: int,
) -> list[_Interval]:
    """:func:`bootstrap` of several ``(metric_fn, pred, target)`` of the same samples, in one
    pass over the same resamples (``bootstrap_cis``)."""
    n_clusters = len(set(groups)) if groups is not None else int(items[0][1].shape[0])
    if n_clusters >= 2 and n_resamples > 0:
        cis = bootstrap_cis(items, n_resamples=n_resamples, confidence=confidence, groups=groups, seed=seed,
                            append_mean=True)
        return [_Interval(np.atleast_1d(c.estimate), np.atleast_1d(c.low), np.atleast_1d(c.high)) for c in cis]
    out = []
    for metric_fn, pred, target in items:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if isinstance(metric_fn, str):  # "mean"
                per_class = torch.as_tensor(pred).double().nanmean(0)
            else:
                per_class = torch.as_tensor(metric_fn(pred, target)).double().reshape(-1).cpu()
            est = torch.cat([per_class.cpu(), per_class.nanmean().reshape(1).cpu()]).numpy()
        nan = np.full_like(est, np.nan)
        out.append(_Interval(est, nan, nan, note=f"no confidence interval: {n_clusters} patient(s) to resample"))
    return out


def _dataset_intervals(
    metrics: Mapping[str, Metric], patients: Mapping[str, str], n_resamples: int, confidence: float, seed: int,
) -> dict[str, tuple[_Interval, Any]]:
    """Bootstrap CIs (and targets) of the dataset-level metrics: metrics of the same samples
    are resampled together, so AUROC, AUPRC, ... of a run share resamples and statistics."""
    by_ids: dict[tuple[str, ...], list[str]] = {}
    for key, metric in metrics.items():
        if metric.ids:
            by_ids.setdefault(tuple(metric.ids), []).append(key)
    out: dict[str, tuple[_Interval, Any]] = {}
    for ids, keys in by_ids.items():
        # the bound ``functional`` lets bootstrap_cis use a metric's cluster fast path
        arrays = [metrics[k].state_arrays() for k in keys]
        items = [(metrics[k].functional, p, t) for k, (p, t) in zip(keys, arrays)]
        cis = _bootstraps(items, _groups(list(ids), patients), n_resamples, confidence, seed)
        out.update({k: (ci, t) for k, ci, (_, t) in zip(keys, cis, arrays)})
    return out


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
    ci = bootstrap("mean", v, None, _groups(ids, patients), n_resamples, confidence, seed)
    if ci.note:
        res["note"] = ci.note
    for j, cname in enumerate(names):
        col = v[:, j]
        valid = col[~col.isnan()]
        res["per_class"][cname] = {
            "value": _f(ci.estimate[j]),  # the one key every metric entry has
            "mean": _f(ci.estimate[j]),  # alias kept for readers of older summaries
            "ci_low": _f(ci.low[j]),
            "ci_high": _f(ci.high[j]),
            "median": _f(valid.median()) if len(valid) else None,
            "std": _f(valid.std()) if len(valid) > 1 else None,
            "n": int(len(valid)),
            "n_nan": int(col.isnan().sum()),
        }
    res["mean"] = {"value": _f(ci.estimate[-1]), "ci_low": _f(ci.low[-1]), "ci_high": _f(ci.high[-1])}
    return res


def _dataset_summary(metric: Metric, ci: _Interval | None, targets: Any) -> dict[str, Any]:
    res: dict[str, Any] = {"kind": "dataset", "higher_is_better": metric.higher_is_better,
                           "range": value_bounds(metric), "per_class": {}}
    if ci is None:  # no sample
        return res
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
