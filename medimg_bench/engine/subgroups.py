"""Subgroup breakdowns of a run's metrics (sex, age bin, site…) with gaps and FairSeg's
equity-scaled score, written to ``summary.json`` under ``"subgroups"``. Per-sample metrics (VQA
accuracy, Dice…) also get a bootstrap CI per group, clustered by patient (the manifest's
``patient_id``; for VQA the image), from the same resampling code as the overall CIs."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.fairness import age_bins, fairness_report
from medimg_bench.tasks.tables import subgroup_table  # noqa: F401  (re-exported)

__all__ = ["subgroup_labels", "subgroup_summary", "subgroup_table", "GroupLabels"]


class GroupLabels(dict):
    """``{sample id: group}`` that also carries ``patients`` (``{sample id: patient id}``, from
    the same manifest), so per-group CIs can resample patients."""

    patients: dict[str, str]

    def __init__(self, labels: Mapping[str, str], patients: Mapping[str, str] | None = None) -> None:
        super().__init__(labels)
        self.patients = dict(patients or {})


def subgroup_labels(manifest: pd.DataFrame, attribute: str, *, age_edges: Sequence[float] = (0, 40, 60, 80)) -> dict[str, str]:
    """``{sample id: group}`` for ``attribute`` from the manifest; ``age`` is binned by
    ``age_edges`` (years). Samples without a value are left out."""
    if attribute not in manifest.columns:
        raise ValueError(f"subgroup attribute {attribute!r} is not a manifest column (have {list(manifest.columns)})")
    col = manifest[["id", attribute]].dropna()
    values = col[attribute]
    if attribute == "age":
        values = pd.Series(age_bins(values.to_numpy(dtype=float), edges=age_edges), index=col.index)
    labels = dict(zip(col["id"].astype(str), values.astype(str)))
    patients = (dict(zip(manifest["id"].astype(str), manifest["patient_id"].astype(str)))
                if "patient_id" in manifest.columns else {})
    return GroupLabels(labels, patients)


def _macro(x: torch.Tensor) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = x.double().reshape(-1)
        return float(v.nanmean()) if v.numel() else math.nan


def _result(report: Any) -> dict[str, Any]:
    def f(x: Any) -> Any:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)

    return {
        "overall": f(report.overall),
        "per_group": {str(g): {"value": f(v), "n": int(report.counts[g])} for g, v in report.per_group.items()},
        "gap": f(report.gap),
        "ratio": f(report.ratio),
        "equity_scaled": f(report.equity_scaled),
        "worst_group": None if report.worst_group is None else str(report.worst_group),
    }


def _group_cis(
    report: Any, v: torch.Tensor, ids: list[str], g: np.ndarray, patients: Mapping[str, str],
    min_group_size: int, n_resamples: int, confidence: float, seed: int,
) -> dict[str, tuple[float, float, str | None]]:
    """Per group: (low, high, note) of the bootstrap CI of the group's macro mean, resampling
    the group's patients (each sample its own patient when it has none)."""
    from medimg_bench.engine.summary import bootstrap

    out: dict[str, tuple[float, float, str | None]] = {}
    for group in report.per_group:
        idx = np.flatnonzero(g == group)
        if idx.size < min_group_size or math.isnan(report.per_group[group]):
            continue
        clusters = [patients.get(ids[i], ids[i]) for i in idx]
        ci = bootstrap("mean", v[idx], None, clusters, n_resamples, confidence, seed)
        out[str(group)] = (float(ci.low[-1]), float(ci.high[-1]), ci.note)
    return out


def subgroup_summary(
    metrics: Mapping[str, Metric], groups: Mapping[str, str], *, min_group_size: int = 2,
    patients: Mapping[str, str] | None = None, n_resamples: int = 1000, confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """For each metric, its macro value (mean over classes) overall and per group, the gap
    (max − min), ratio (min / max) and equity-scaled score. Groups smaller than
    ``min_group_size`` or where the metric is undefined are NaN and left out of the gaps.
    Per-sample metrics also get ``ci_low`` / ``ci_high`` per group: a percentile bootstrap of
    the group's mean (``n_resamples``, ``confidence``, ``seed``) resampling ``patients`` (default:
    the ``patients`` that :func:`subgroup_labels` attached to ``groups``; samples without one
    are their own cluster)."""
    from medimg_bench.engine.summary import higher_is_better, metric_value_tables

    if patients is None:
        patients = getattr(groups, "patients", None) or {}

    out: dict[str, Any] = {}
    for key, metric in metrics.items():
        higher = metric.higher_is_better if metric.higher_is_better is not None else True
        if metric.per_sample:
            for column, (ids, values) in metric_value_tables(metric).items():
                name = column if column != metric.name else key
                keep = [i for i, sid in enumerate(ids) if sid in groups]
                if not keep:
                    continue
                v = values.detach().double().cpu()[keep]
                g = np.array([groups[ids[i]] for i in keep], dtype=object)
                better = higher_is_better(metric, column)
                if better is None:  # signed metric (volume difference): gaps only, no direction
                    better = True

                def fn(x: torch.Tensor) -> float:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        return _macro(x.nanmean(0))

                try:
                    report = fairness_report(fn, v, None, g, min_group_size=min_group_size,
                                             small_groups="nan", higher_is_better=better)
                except ValueError as exc:  # e.g. every group too small: say so, keep the run
                    out[name] = {"undefined": str(exc)}
                    continue
                out[name] = _result(report)
                if n_resamples > 0:
                    cis = _group_cis(report, v, [ids[i] for i in keep], g, patients, min_group_size,
                                     n_resamples, confidence, seed)
                    for group, entry in out[name]["per_group"].items():
                        low, high, note = cis.get(group, (math.nan, math.nan, None))
                        entry["ci_low"] = None if math.isnan(low) else round(low, 6)
                        entry["ci_high"] = None if math.isnan(high) else round(high, 6)
                        if note:
                            entry["note"] = note
                    out[name]["confidence"] = confidence
        else:
            if not metric.ids:
                continue
            preds, targets = metric.state_arrays()
            keep = [i for i, sid in enumerate(metric.ids) if sid in groups]
            if not keep:
                continue
            idx = torch.as_tensor(keep, device=preds.device)
            g = np.array([groups[metric.ids[i]] for i in keep], dtype=object)
            try:
                report = fairness_report(
                    lambda p, t, m=metric: _macro(torch.as_tensor(m.functional(p, t))),
                    preds[idx], targets[idx], g, min_group_size=min_group_size, small_groups="nan",
                    higher_is_better=higher,
                )
            except ValueError as exc:  # e.g. every group too small: say so, keep the run
                out[key] = {"undefined": str(exc)}
                continue
            out[key] = _result(report)
    return out
