"""Task figures ``medimg-bench compare`` recomputes from two runs' per-sample records: what a
generative task keeps in ``summary.json`` beside its metrics (3DReasonKnee's micro grade accuracy,
CXReasonBench's printed scores), each compared with the paired patient bootstrap on the same
resamples as the metrics."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TaskFigures", "task_figures", "saved_value"]


@dataclass(frozen=True)
class TaskFigures:
    """How one task's summary figures are rebuilt: ``names`` (row name, dotted path in
    ``summary.json``), the record ``columns`` needed, ``stack`` (the paired rows of run ``"a"`` or
    ``"b"`` → a numeric matrix, one row per sample) and ``statistic`` (matrix → one value per name)."""

    block: str
    names: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]
    stack: Callable[[Any, str], np.ndarray]
    statistic: Callable[[np.ndarray], np.ndarray]


def saved_value(summary: Mapping[str, Any], path: str) -> float | None:
    """The value at a dotted ``path`` of a run's ``summary.json`` (None where absent or null)."""
    node: Any = summary
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return None if node is None else float(node)


# -- 3DReasonKnee: right grades over all reference grades --------------------------------------------
def _moaks_stack(rows: Any, run: str) -> np.ndarray:
    right, total = [], []
    for text in rows[f"correct_items_{run}"]:
        items = json.loads(text) if isinstance(text, str) else {}
        right.append(float(sum(items.values())))
        total.append(float(len(items)))
    return np.column_stack([right, total]) if right else np.zeros((0, 2))


def _micro(m: np.ndarray) -> np.ndarray:
    total = m[:, 1].sum()
    return np.asarray([m[:, 0].sum() / total if total else np.nan])


# -- CXReasonBench: the printed scores of both paths -------------------------------------------------
def _cxr_stack(rows: Any, run: str) -> np.ndarray:
    from medimg_bench.metrics.text.cxreasonbench import ALL_TASKS, CASE_COLUMNS

    def column(name: str) -> np.ndarray:
        if name == "task_index":
            return np.asarray([ALL_TASKS.index(t) for t in rows[f"diagnostic_task_{run}"]], dtype=float)
        if name == "has_custom":  # the case's stages include the custom criteria
            return np.asarray(["path1/stage1.5" in json.loads(r) for r in rows[f"reference_{run}"]], dtype=float)
        if name == "guidance":
            return rows[f"guidance_{run}"].astype(bool).to_numpy(float)
        return rows[f"stage_{name}_{run}"].to_numpy(float)

    return np.column_stack([column(c) for c in CASE_COLUMNS]) if len(rows) else np.zeros((0, len(CASE_COLUMNS)))


def _cxr_figures(m: np.ndarray) -> np.ndarray:
    from medimg_bench.metrics.text.cxreasonbench import printed_figures

    return printed_figures(m)


def _cxr_names() -> tuple[tuple[str, str], ...]:
    from medimg_bench.metrics.text.cxreasonbench import PRINTED

    return tuple((f"{path}.{name}", f"cxreasonbench.{path}.printed.{name}") for path, names in PRINTED for name in names)


def _cxr_columns() -> tuple[str, ...]:
    from medimg_bench.metrics.text.cxreasonbench import CASE_COLUMNS

    skip = ("task_index", "has_custom", "guidance")
    return ("diagnostic_task", "reference", "guidance", *(f"stage_{c}" for c in CASE_COLUMNS if c not in skip))


def task_figures(task: str) -> TaskFigures | None:
    """The summary figures compare recomputes for runs of ``task`` (None: it has none)."""
    if task == "moaks_vqa":
        return TaskFigures("moaks", (("grade_accuracy_micro", "moaks.grade_accuracy_micro"),), ("correct_items",),
                           _moaks_stack, _micro)
    if task == "cxreasonbench_reasoning":
        return TaskFigures("cxreasonbench", _cxr_names(), _cxr_columns(), _cxr_stack, _cxr_figures)
    return None
