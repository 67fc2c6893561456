"""Image classification (multi-label or multi-class)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

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

    def __init__(self, *, multilabel: bool = True) -> None:
        self.multilabel = multilabel

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

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        probs = outputs["probs"]
        if not bool(torch.isfinite(probs).all()):  # fails this batch; the runner isolates the sample
            raise ValueError("model returned NaN or inf scores")
        return probs, torch.as_tensor(batch["label"]).to(probs.device)

    def metric_kwargs(self, classes: Sequence[str] | None) -> dict[str, Any]:
        return {"class_names": list(classes)} if classes else {}

    def sample_records(
        self, batch: dict[str, Any], outputs: dict[str, Any], classes: Sequence[str] | None
    ) -> list[dict[str, Any]]:
        probs = outputs["probs"].detach().float().cpu()
        labels = torch.as_tensor(batch["label"]).cpu()
        k = probs.shape[1]
        names = list(classes) if classes and len(classes) == k else [str(i) for i in range(k)]
        rows = []
        for i, sid in enumerate(batch["id"]):
            for j, cname in enumerate(names):
                if self.multilabel:
                    y = float(labels[i, j])
                elif labels[i].isnan() if labels.is_floating_point() else False:
                    y = float("nan")  # unlabelled
                else:
                    y = float(int(labels[i]) == j)
                rows.append({"id": sid, "class": cname, "score": float(probs[i, j]), "label": y})
        return rows

    def plots(self, results: Any, out_dir: Path) -> list[Path]:
        from medimg_bench.engine.report import plot_roc

        path = plot_roc(results.samples, out_dir / "roc.png", title=results.name)
        return [path] if path else []
