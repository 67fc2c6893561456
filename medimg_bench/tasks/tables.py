"""Tables a task writes beside the run's summary (``per_category.csv`` of a VQA run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = ["subgroup_table"]


def subgroup_table(summary: Mapping[str, Any]) -> pd.DataFrame:
    """``summary["subgroups"]`` as one row per attribute × metric × group: ``value``, ``ci_low``,
    ``ci_high``, ``n`` (what ``per_category.csv`` of a VQA run holds)."""
    rows = []
    for attribute, by_metric in (summary.get("subgroups") or {}).items():
        for metric, res in by_metric.items():
            for group, entry in (res.get("per_group") or {}).items():
                rows.append({"attribute": attribute, "metric": metric, "group": group,
                             "value": entry.get("value"), "ci_low": entry.get("ci_low"),
                             "ci_high": entry.get("ci_high"), "n": entry.get("n")})
    return pd.DataFrame(rows, columns=["attribute", "metric", "group", "value", "ci_low", "ci_high", "n"])
