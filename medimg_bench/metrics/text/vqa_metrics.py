"""The stateful VQA metric for the engine: ``vqa`` keeps one scored answer per question and gives
per-question columns whose means (with the patient/image-clustered bootstrap CI of the summary)
are ``accuracy``, ``accuracy_closed``, ``accuracy_open``, ``accuracy_mcq``, ``unparsed_rate``
and, for open questions, ``exact_match``, ``token_recall``, ``token_f1``, ``bleu1``; with
CircularEval also ``accuracy_circular``. A column is NaN for questions it does not cover.
``accuracy_closed`` / ``accuracy_open`` follow the scoring profile's own closed/open partition
(the scored answer's ``split``). Under a harness profile it also keeps each answer's share of the
figures that harness prints; ``summary.json["harness"]`` gets their values under the harness's
names (see :data:`~medimg_bench.metrics.text.vqa_profiles.PROFILES`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = ["VQAScores", "VQA_COLUMNS"]

VQA_COLUMNS = ("accuracy", "accuracy_closed", "accuracy_open", "accuracy_mcq", "accuracy_circular",
               "unparsed_rate", "exact_match", "token_recall", "token_f1", "bleu1")


@register_metric("vqa", tags=("vqa", "text"))
class VQAScores(Metric):
    """``update(scored, answer_types)``: ``scored`` is a list of dicts from
    :func:`~medimg_bench.metrics.text.vqa.score_vqa_answer` (plus ``circular_correct`` when
    CircularEval ran), ``answer_types`` the questions' ``closed`` / ``open`` / ``mcq``."""

    name = "vqa"
    per_sample = True
    higher_is_better = True
    directions = MappingProxyType({"unparsed_rate": False})  # a share of unparsed answers
    value_range = (0.0, 1.0)  # every column is a share or a token overlap
    input_kind = "text"

    def higher_is_better_of(self, name: str) -> bool:
        """Every column is better higher except ``unparsed_rate`` (the share of answers no rule parsed)."""
        return name != "unparsed_rate"

    def __init__(self, *, class_names: Sequence[str] | None = None, profile: str = "medimg_bench",
                 judge_categories: Sequence[str] | None = None, judge_repeats: int = 1) -> None:
        from medimg_bench.metrics.text.vqa_profiles import PROFILES

        super().__init__(class_names=None)
        if profile not in PROFILES:
            raise ValueError(f"{self.name}: unknown scoring profile {profile!r}; available: {list(PROFILES)}")
        self.profile = PROFILES[profile]
        self.add_state("rows", [], dist_reduce_fx="cat")
        self.add_state("harness", [], dist_reduce_fx="cat")  # one column per figure of the profile
        self.add_state("withheld", [], dist_reduce_fx="cat")  # 1.0 where the answer is withheld
        # the open-answer judge (scoring.judge.rubric): per question its score and the second
        # judge's, and the verdict of each repeat / of the second judge (-1: not judged)
        self.judge_categories = list(judge_categories) if judge_categories else None
        self.judge_repeats = int(judge_repeats)
        if self.judge_categories is not None:
            self.add_state("judged", [], dist_reduce_fx="cat")
            self.add_state("judge_labels", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, Mapping) or isinstance(targets, str):
            raise ValueError(f"{self.name}: expected a list of scored answers and a list of answer types")
        if len(preds) != len(targets):
            raise ValueError(f"{self.name}: {len(preds)} scored answers but {len(targets)} answer types")
        rows, withheld = [], []
        nan = float("nan")
        for s, kind in zip(preds, targets):
            withheld.append(float(bool(s.get("withheld", False))))
            if kind not in ("closed", "open", "mcq"):
                raise ValueError(f"{self.name}: unknown answer type {kind!r}")
            c = float(s["correct"]) if not s.get("withheld") else nan
            split = s.get("split") or kind  # the profile's own closed/open partition
            rows.append([
                c,
                c if split == "closed" else nan,
                c if split == "open" else nan,
                c if split == "mcq" else nan,
                float(s.get("circular_correct", nan)),
                float(s["unparsed"]),
                float(s.get("exact", nan)), float(s.get("recall", nan)),
                float(s.get("f1", nan)), float(s.get("bleu1", nan)),
            ])
        figures = self.profile.figures
        harness = [[nan if s.get("withheld") else float(s.get("harness", {}).get(f, nan)) for f in figures]
                   for s in preds]
        self._add_ids(ids, len(rows))
        self.rows.append(torch.tensor(rows, dtype=torch.float64).reshape(-1, len(VQA_COLUMNS)))
        if self.judge_categories is not None:
            k = self.judge_repeats
            self.judged.append(torch.tensor([[float(s.get("judge_score", nan)), float(s.get("judge2_score", nan))]
                                             for s in preds], dtype=torch.float64).reshape(-1, 2))
            labels = [list(s.get("judge_labels") or [-1] * k) + [int(s.get("judge2_label", -1))] for s in preds]
            if any(len(lab) != k + 1 for lab in labels):
                raise ValueError(f"{self.name}: expected {k} open-answer verdicts per judged question")
            self.judge_labels.append(torch.tensor(labels, dtype=torch.int64).reshape(-1, k + 1))
        self.harness.append(torch.tensor(harness, dtype=torch.float64).reshape(len(preds), len(figures)))
        self.withheld.append(torch.tensor(withheld, dtype=torch.float64))

    def harness_figures(self) -> dict[str, Any]:
        """The profile's harness figures as that harness prints them (``{}`` for ours): the mean
        of each figure over the answers it covers (fractions; LLaVA-Med prints them x100), their
        counts, and the implementation reproduced. A figure no answer covers is ``None``."""
        figures = self.profile.figures
        if not figures:
            return {}
        table = torch.cat(self.harness) if self.harness else torch.empty(0, len(figures), dtype=torch.float64)
        values, counts = {}, {}
        for j, name in enumerate(figures):
            col = table[:, j]
            col = col[~col.isnan()]
            counts[name] = int(col.numel())
            values[name] = round(float(col.mean()), 6) if col.numel() else None
        out = {"profile": self.profile.name, "implementation": self.profile.implementation,
               "figures": values, "n": counts}
        if "open accuracy" in figures and counts["open accuracy"] == 0 and counts.get("recall"):
            out["note"] = ("'open accuracy' needs the candidate answer list LLaVA-Med reads "
                           "(train_open_answers.json): set scoring.candidates")
        return out

    def judge_agreement(self) -> dict[str, Any] | None:
        """``summary.json["judge_agreement"]`` (see :func:`~medimg_bench.metrics.text.open_judge.
        judge_agreement`) over the judged open questions; None without an open-answer judge."""
        from medimg_bench.metrics.text.open_judge import judge_agreement

        if self.judge_categories is None:
            return None
        k = self.judge_repeats
        labels = torch.cat(self.judge_labels) if self.judge_labels else torch.empty(0, k + 1, dtype=torch.int64)
        graded = labels[:, 0] >= 0
        lab = labels[graded].numpy()
        second = lab[:, k] if lab.shape[0] and (lab[:, k] >= 0).all() else None
        out = judge_agreement(lab[:, :k], self.judge_categories, second=second)
        judged = torch.cat(self.judged) if self.judged else torch.empty(0, 2, dtype=torch.float64)
        scores = judged[graded]
        out["judge_accuracy"] = round(float(scores[:, 0].mean()), 6) if scores.shape[0] else None
        if second is not None:
            out["judge2_accuracy"] = round(float(scores[:, 1].mean()), 6)
        return out

    def summary_notes(self) -> dict[str, Any]:
        """For ``summary.json``: the harness figures of the profile (``harness``, see
        :meth:`harness_figures`), the open-answer judge's agreement (``judge_agreement``, with a
        rubric) and, where answers are withheld (GMAI-MMBench TEST), how many and that those
        questions have no accuracy (their predictions are in ``submission.tsv``)."""
        harness = self.harness_figures()
        out: dict[str, Any] = {"harness": harness} if harness else {}
        agreement = self.judge_agreement()
        if agreement is not None:
            out["judge_agreement"] = agreement
        n = int(torch.cat(self.withheld).sum()) if self.withheld else 0
        if not n:
            return out
        total = len(self.ids)
        return {**out, "answers_withheld": {
            "n": n, "n_questions": total,
            "note": ("the answers of this split are withheld: no accuracy for these questions "
                     "(unparsed_rate still counts them); every question's parsed answer and raw "
                     "response are in submission.tsv for the official evaluation")
            if n == total else
            (f"{n} of {total} answers are withheld: accuracy covers the other {total - n}; "
             "predictions for all are in submission.tsv"),
        }}

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        table = torch.cat(self.rows) if self.rows else torch.empty(0, len(VQA_COLUMNS), dtype=torch.float64)
        columns = list(VQA_COLUMNS)
        if self.judge_categories is not None:  # judge_accuracy, judge2_accuracy (NaN: not judged)
            judged = torch.cat(self.judged) if self.judged else torch.empty(0, 2, dtype=torch.float64)
            table = torch.cat([table, judged], 1)
            columns += ["judge_accuracy", "judge2_accuracy"]
        ids = list(self.ids)
        out = {}
        for j, col in enumerate(columns):
            values = table[:, j : j + 1]
            if values.numel() and bool(values.isnan().all()):
                continue  # a column no question covers (e.g. no open questions) is left out
            out[col] = (ids, values)
        return out

    def values(self) -> tuple[list[str], torch.Tensor]:
        table = torch.cat(self.rows) if self.rows else torch.empty(0, len(VQA_COLUMNS), dtype=torch.float64)
        return list(self.ids), table

    def compute(self) -> torch.Tensor:
        return self.values()[1].nanmean(0)
