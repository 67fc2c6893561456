"""Subgroup breakdowns of a run's metrics (sex, age bin, site…) with gaps and FairSeg's
equity-scaled score, written to ``summary.json`` under ``"subgroups"``."""

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

__all__ = ["subgroup_labels", "subgroup_summary"]


def subgroup_labels(manifest: pd.DataFrame, attribute: str, *, age_edges: Sequence[float] = (0, 40, 60, 80)) -> dict[str, str]:
    """``{sample id: group}`` for ``attribute`` from the manifest; ``age`` is binned by
    ``age_edges`` (years). Samples without a value are left out."""
    if attribute not in manifest.columns:
        raise ValueError(f"subgroup attribute {attribute!r} is not a manifest column (have {list(manifest.columns)})")
    col = manifest[["id", attribute]].dropna()
    values = col[attribute]
    if attribute == "age":
        values = pd.Series(age_bins(values.to_numpy(dtype=float), edges=age_edges), index=col.index)
    return dict(zip(col["id"].astype(str), values.astype(str)))


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


def subgroup_summary(
    metrics: Mapping[str, Metric], groups: Mapping[str, str], *, min_group_size: int = 2
) -> dict[str, Any]:
    """For each metric, its macro value (mean over classes) overall and per group, the gap
    (max − min), ratio (min / max) and equity-scaled score. Groups smaller than
    ``min_group_size`` or where the metric is undefined are NaN and left out of the gaps."""
    from medimg_bench.engine.summary import higher_is_better, metric_value_tables

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
