"""The stateful metric of structured (JSON) answers: ``moaks`` keeps one scored reply per question
(:func:`~medimg_bench.metrics.text.moaks.score_answer`) and gives per-question columns whose means
(with the patient-clustered bootstrap CI of the summary) are:

* ``grade_accuracy`` — the share of the question's reference grades the reply got right;
* ``exact_match`` — every grade of the question right;
* ``parse_failed`` — the reply is no JSON object under the parse rule (its grades count as wrong);
* ``complete`` — the reply gives every item the question's template asks, as an integer in range;
* ``box_iou`` and ``acc@t`` for each threshold — questions whose reference has a 3D box.

A column is NaN for questions it does not cover (no reference, no template, no box) and left out
when no question covers it. ``summary.json`` also gets ``grade_accuracy_micro`` (right grades
over all grades) and the parse-failure count (``summary_notes``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch

from medimg_bench.metrics.grounding import GROUNDING_THRESHOLDS
from medimg_bench.metrics.text._columns import ReplyColumns
from medimg_bench.registry import register_metric

__all__ = ["MOAKSScores"]

_BASE = ("grade_accuracy", "exact_match", "parse_failed", "complete", "box_iou")


@register_metric("moaks", tags=("vqa", "text", "structured", "grounding"))
class MOAKSScores(ReplyColumns):
    """``update(scored, n_items)``: ``scored`` a list of dicts from
    :func:`~medimg_bench.metrics.text.moaks.score_answer`, ``n_items`` the number of reference
    grades of each question (0 without a reference). Option: ``thresholds`` for ``acc@t``.
    Every column is better higher except ``parse_failed``."""

    name = "moaks"
    higher_is_better = True
    directions = MappingProxyType({"parse_failed": False})

    def __init__(self, *, class_names: Sequence[str] | None = None,
                 thresholds: Sequence[float] = GROUNDING_THRESHOLDS) -> None:
        super().__init__(class_names=None)
        if not thresholds or any(not 0 < float(t) <= 1 for t in thresholds):
            raise ValueError(f"{self.name}: thresholds must be in (0, 1], got {list(thresholds)}")
        self.thresholds = tuple(float(t) for t in thresholds)
        self.add_state("rows", [], dist_reduce_fx="cat")
        self.add_state("counts", [], dist_reduce_fx="cat")  # per question: right grades, grades

    @property
    def columns(self) -> tuple[str, ...]:
        return (*_BASE, *(f"acc@{t:g}" for t in self.thresholds))

    def _row(self, s: Mapping[str, Any]) -> list[float]:
        nan = float("nan")
        iou = float(s.get("box_iou", nan))
        return [float(s.get("grade_accuracy", nan)), float(s.get("exact_match", nan)),
                float(s["parse_failed"]), float(s.get("complete", nan)), iou,
                *((nan if iou != iou else float(iou >= t)) for t in self.thresholds)]

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, Mapping) or len(preds) != len(targets):
            raise ValueError(f"{self.name}: expected a list of scored replies and one grade count per reply")
        for s in preds:
            if not isinstance(s, Mapping) or "parse_failed" not in s:
                raise ValueError(f"{self.name}: a scored reply must come from score_answer, got {s!r}")
        rows = [self._row(s) for s in preds]
        counts = [[float(s.get("n_correct", 0)), float(n)] for s, n in zip(preds, targets)]
        self._add_ids(ids, len(rows))
        self.rows.append(torch.tensor(rows, dtype=torch.float64).reshape(-1, len(self.columns)))
        self.counts.append(torch.tensor(counts, dtype=torch.float64).reshape(-1, 2))

    def _table(self) -> torch.Tensor:
        if not self.rows:
            return torch.empty(0, len(self.columns), dtype=torch.float64)
        return torch.cat(self.rows)

    def summary_notes(self) -> dict[str, Any]:
        """``moaks``: micro grade accuracy (right grades / all reference grades), the grade and
        question counts and how many replies failed to parse."""
        counts = torch.cat(self.counts) if self.counts else torch.zeros(0, 2, dtype=torch.float64)
        right, total = float(counts[:, 0].sum()), float(counts[:, 1].sum())
        table = self._table()
        return {"moaks": {
            "grade_accuracy_micro": round(right / total, 6) if total else None,
            "n_grades": int(total), "n_questions": int(table.shape[0]),
            "n_questions_with_reference": int((counts[:, 1] > 0).sum()),
            "n_parse_failures": int(table[:, 2].sum()) if table.numel() else 0,
        }}

    def values(self) -> tuple[list[str], torch.Tensor]:
        return list(self.ids), self._table()
