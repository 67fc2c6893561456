"""Image classification (multi-label or multi-class)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.registry import register_task
from medimg_bench.tasks.base import Task

__all__ = ["ClassificationTask"]


@register_task("classification", tags=("classification",))
class ClassificationTask(Task):
    """Scores per class; multi-label targets are multi-hot floats (NaN = unlabelled), multi-class
    targets are integer class indices."""

    name = "classification"
    default_metrics = {"auroc": {}}

    def __init__(self, *, multilabel: bool | None = None) -> None:
        #: what the user asked for (None: the dataset decides); ``multilabel`` is what applies
        self._multilabel_option = None if multilabel is None else bool(multilabel)
        self.multilabel = True if multilabel is None else bool(multilabel)

    def bind_dataset(self, dataset: Any) -> None:
        """Take single- vs multi-label from ``dataset`` (its ``multilabel``) unless the user set
        it; a setting that contradicts the dataset is an error naming both. A dataset that does
        not say keeps the multi-label default."""
        known = getattr(dataset, "multilabel", None)
        if known is None:
            return
        if self._multilabel_option is not None and self._multilabel_option != bool(known):
            name = getattr(dataset, "name", type(dataset).__name__)
            kind = "multi-label (a vector of 0/1 per sample)" if known else "single-label (one class index per sample)"
            raise ValueError(
                f"task.options.multilabel={str(self._multilabel_option).lower()} contradicts dataset {name!r}, which is "
                f"{kind}: leave task.options.multilabel unset to follow the dataset, or set it to "
                f"{str(bool(known)).lower()}")
        self.multilabel = bool(known)

    def loss(self, logits: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        target = torch.as_tensor(batch["label"]).to(logits.device)
        if not self.multilabel:  # NaN = unlabelled: ignored, as in the metrics
            target = torch.where(target.isnan(), -100, target) if target.is_floating_point() else target
            return torch.nn.functional.cross_entropy(logits, target.long(), ignore_index=-100)
        target = target.float()
        known = ~target.isnan()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, torch.nan_to_num(target), reduction="none"
        )
        return (loss * known).sum() / known.sum().clamp_min(1)

    def metric_kwargs(self, classes: Sequence[str] | None) -> dict[str, Any]:
        return {"class_names": list(classes)} if classes else {}

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        probs = outputs["probs"]
        if not bool(torch.isfinite(probs).all()):  # fails this batch; the runner isolates the sample
            err = ValueError("model returned NaN or inf scores")
            err.stage = "predict"  # type: ignore[attr-defined]  # the model's fault, not the target's
            raise err
        return probs, torch.as_tensor(batch["label"]).to(probs.device, non_blocking=True)

    def sample_records(
        self, batch: dict[str, Any], outputs: dict[str, Any], classes: Sequence[str] | None
    ) -> dict[str, Any]:
        """Columns for the batch, one row per sample × class: ``id``, ``class``, ``score``,
        ``label`` (1/0, NaN = unlabelled), built with array operations."""
        probs = outputs["probs"].detach().float().cpu()
        labels = torch.as_tensor(batch["label"]).cpu()
        b, k = probs.shape
        names = list(classes) if classes and len(classes) == k else [str(i) for i in range(k)]
        if self.multilabel:
            y = labels.reshape(b, k).numpy().astype(np.float64)
        else:  # one-hot of the class index; NaN rows for unlabelled samples
            lab = labels.reshape(b).double()
            y = (lab[:, None] == torch.arange(k, dtype=torch.float64)[None, :]).double()
            if labels.is_floating_point():
                y[lab.isnan()] = float("nan")
            y = y.numpy()
        ids = np.empty(b, dtype=object)
        ids[:] = list(batch["id"])
        return {
            # each id k times: a broadcast copied by reshape (np.repeat on objects is 8x slower)
            "id": np.broadcast_to(ids[:, None], (b, k)).reshape(-1),
            "class": np.tile(np.asarray(names, dtype=object), b),
            "score": probs.numpy().astype(np.float64).reshape(-1),
            "label": y.reshape(-1),
        }

    def plots(self, results: Any, out_dir: Path) -> list[Path]:
        from medimg_bench.tasks.plots import plot_roc

        path = plot_roc(results.samples, out_dir / "roc.png", title=results.name)
        return [path] if path else []
