"""Clinical factuality of generated reports from CheXpert-style labels: F1 over the 14 or the 5
competition observations, micro or macro, with the uncertain label mapped by a named convention.

Conventions (``uncertain=``):

* ``"positive"`` — the f1chexbert convention (``F1CheXbert.get_label(mode="rrg")``: positive and
  uncertain → 1, negative and not mentioned → 0; F1 from scikit-learn's
  ``classification_report``, a class without positives in either set scores 0). This is what the
  ``chexbert_5_micro_f1`` / ``chexbert_all_macro_f1`` numbers of the CheXbert-based papers use,
  with CheXbert as the labeler; here the offline labeler (``label_reports``) replaces CheXbert.
* ``"negative"`` — only definite positives count (U-Zeros).

Observation order for ``"14"`` follows f1chexbert (the 13 findings, then "No Finding").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.text.chexpert_labeler import (
    CHEXPERT_COMPETITION,
    CHEXPERT_OBSERVATIONS,
    label_reports,
)
from medimg_bench.registry import register_metric

__all__ = [
    "F1CHEXBERT_ORDER",
    "binarize_labels",
    "chexpert_f1",
    "factuality_scores",
    "ChexpertF1",
]

F1CHEXBERT_ORDER = tuple(o for o in CHEXPERT_OBSERVATIONS if o != "No Finding") + ("No Finding",)
_SETS = {"14": F1CHEXBERT_ORDER, "5": tuple(o for o in F1CHEXBERT_ORDER if o in CHEXPERT_COMPETITION)}


def _observations(observations: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(observations, str):
        if observations not in _SETS:
            raise ValueError(f"observations must be '14', '5' or a list of names, got {observations!r}")
        return _SETS[observations]
    unknown = [o for o in observations if o not in CHEXPERT_OBSERVATIONS]
    if unknown:
        raise ValueError(f"unknown observation(s) {unknown}; expected names from {list(CHEXPERT_OBSERVATIONS)}")
    return tuple(observations)


def binarize_labels(labels: Any, *, uncertain: str = "positive") -> np.ndarray:
    """1/0 matrix from labels 1 / 0 / -1 / NaN: positive → 1; uncertain → 1 (``"positive"``)
    or 0 (``"negative"``); negative and not mentioned → 0."""
    if uncertain not in ("positive", "negative"):
        raise ValueError(f"uncertain must be 'positive' or 'negative', got {uncertain!r}")
    a = np.asarray(labels, dtype=float)
    pos = a == 1.0
    if uncertain == "positive":
        pos |= a == -1.0
    return pos.astype(np.int64)


def _f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    denom = 2 * tp + fp + fn
    return np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)  # 0 when undefined, as sklearn


def chexpert_f1(
    generated_labels: Any,
    reference_labels: Any,
    *,
    observations: str | Sequence[str] = "5",
    average: str | None = "micro",
    uncertain: str = "positive",
) -> float | np.ndarray:
    """F1 of generated vs reference labels (DataFrames with observation columns, or arrays whose
    columns follow ``CHEXPERT_OBSERVATIONS``). ``average``: "micro", "macro" or None (one F1 per
    observation, in the order of ``observations``)."""
    obs = _observations(observations)
    g, r = _select(generated_labels, obs), _select(reference_labels, obs)
    if g.shape != r.shape:
        raise ValueError(f"generated labels {g.shape} and reference labels {r.shape} differ in shape")
    yp, yt = binarize_labels(g, uncertain=uncertain), binarize_labels(r, uncertain=uncertain)
    tp = (yp & yt).sum(0)
    fp = (yp & (1 - yt)).sum(0)
    fn = ((1 - yp) & yt).sum(0)
    if average is None:
        return _f1_from_counts(tp, fp, fn)
    if average == "macro":
        return float(_f1_from_counts(tp, fp, fn).mean())
    if average == "micro":
        return float(_f1_from_counts(tp.sum(), fp.sum(), fn.sum()))
    raise ValueError(f"average must be 'micro', 'macro' or None, got {average!r}")


def _select(labels: Any, obs: Sequence[str]) -> np.ndarray:
    if hasattr(labels, "columns"):
        missing = [o for o in obs if o not in labels.columns]
        if missing:
            raise ValueError(f"labels have no column(s) {missing}")
        return labels[list(obs)].to_numpy(dtype=float)
    a = np.asarray(labels, dtype=float)
    if a.ndim != 2 or a.shape[1] != len(CHEXPERT_OBSERVATIONS):
        raise ValueError(f"label arrays must be (N, {len(CHEXPERT_OBSERVATIONS)}), got {a.shape}")
    return a[:, [CHEXPERT_OBSERVATIONS.index(o) for o in obs]]


def factuality_scores(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    uncertain: str = "positive",
    labeler: Any = None,
) -> dict[str, float]:
    """``chexpert_5_micro_f1``, ``chexpert_5_macro_f1``, ``chexpert_14_micro_f1`` and
    ``chexpert_14_macro_f1`` of generated vs reference reports. ``labeler``: texts → label
    DataFrame; default the offline :func:`label_reports`, or e.g.
    ``functools.partial(chexbert_label_reports, checkpoint=..., bert_path=...)`` for CheXbert."""
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated reports but {len(references)} references")
    labeler = labeler or label_reports
    g, r = labeler(list(generated)), labeler(list(references))
    return {
        f"chexpert_{n}_{avg}_f1": chexpert_f1(g, r, observations=n, average=avg, uncertain=uncertain)
        for n in ("5", "14")
        for avg in ("micro", "macro")
    }


@register_metric("chexpert_f1", tags=("report", "text"))
class ChexpertF1(Metric):
    """Factuality F1 of generated reports against references (offline CheXpert-style labels).

    ``update(generated_texts, reference_texts)``. Per observation by default (the summary's mean
    is the macro F1); ``average="micro"`` gives one pooled value. The bootstrap resamples studies
    (patients) and calls :meth:`functional` on the label arrays kept."""

    name = "chexpert_f1"
    per_sample = False
    higher_is_better = True
    value_range = (0.0, 1.0)
    input_kind = "text"

    def __init__(
        self,
        *,
        observations: str | Sequence[str] = "14",
        average: str | None = None,
        uncertain: str = "positive",
        class_names: Sequence[str] | None = None,
    ) -> None:
        self.observations = _observations(observations)
        if average not in (None, "micro", "macro"):
            raise ValueError(f"average must be None, 'micro' or 'macro', got {average!r}")
        binarize_labels(np.zeros((0, 1)), uncertain=uncertain)  # validates the name
        names = list(self.observations) if average is None else [f"{average} ({len(self.observations)})"]
        super().__init__(class_names=names)
        self.average, self.uncertain = average, uncertain
        self.add_state("preds", [], dist_reduce_fx="cat")
        self.add_state("targets", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, str) or isinstance(targets, str):
            raise ValueError(f"{self.name}: expected lists of report texts, got a single string")
        if len(preds) != len(targets):
            raise ValueError(f"{self.name}: {len(preds)} generated reports but {len(targets)} references")
        g = _select(label_reports(list(preds)), self.observations)
        r = _select(label_reports(list(targets)), self.observations)
        self._add_ids(ids, len(g))
        self.preds.append(torch.tensor(g, dtype=torch.float64))
        self.targets.append(torch.tensor(r, dtype=torch.float64))

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.preds:
            raise ValueError(f"{self.name}: compute() called before any update()")
        return torch.cat(self.preds), torch.cat(self.targets)

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        g, r = np.asarray(preds, dtype=float), np.asarray(targets, dtype=float)
        yp, yt = binarize_labels(g, uncertain=self.uncertain), binarize_labels(r, uncertain=self.uncertain)
        tp, fp, fn = (yp & yt).sum(0), (yp & (1 - yt)).sum(0), ((1 - yp) & yt).sum(0)
        if self.average == "micro":
            out = _f1_from_counts(tp.sum(), fp.sum(), fn.sum()).reshape(1)
        elif self.average == "macro":
            out = np.asarray([_f1_from_counts(tp, fp, fn).mean()])
        else:
            out = _f1_from_counts(tp, fp, fn)
        return torch.as_tensor(out, dtype=torch.float64)

    def compute(self) -> torch.Tensor:
        return self.functional(*self.state_arrays())
