"""Semantic segmentation of 2D images or 3D volumes (label maps)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import create_metric, register_task
from medimg_bench.tasks.base import Task

__all__ = ["SegmentationTask"]


@register_task("segmentation", tags=("segmentation",))
class SegmentationTask(Task):
    """Label-map prediction; class 0 is background and is left out of metrics by default."""

    name = "segmentation"
    default_metrics = {"dice": {}}

    def __init__(self, *, include_background: bool = False, keep_worst: int = 8) -> None:
        from medimg_bench.tasks.worst import WorstSlices

        self.include_background = include_background
        self.worst = WorstSlices(k=keep_worst)  # the report's pictures (tasks/worst.py)

    def loss(self, logits: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:
        from monai.losses import DiceCELoss

        if not hasattr(self, "_loss"):
            self._loss = DiceCELoss(to_onehot_y=True, softmax=True)
        target = torch.as_tensor(batch["mask"]).to(logits.device)
        return self._loss(logits, target.unsqueeze(1))

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        # metrics of probability maps (sod_toolbox) get the model's "maps" (else its label maps)
        pred = outputs.get("maps", outputs["labels"]) if getattr(self, "score_maps", False) else outputs["labels"]
        if isinstance(pred, list) or isinstance(batch["mask"], list):  # images of different sizes
            return list(pred), [torch.as_tensor(m).to(p.device) for m, p in zip(batch["mask"], pred)]
        return pred, torch.as_tensor(batch["mask"]).to(pred.device, non_blocking=True)

    def build_metrics(
        self, spec: Mapping[str, Mapping[str, Any] | None] | None, classes: Sequence[str] | None
    ) -> dict[str, Metric]:
        metrics = super().build_metrics(spec, classes)
        kinds = {m.input_kind for m in metrics.values()}
        if "prob_maps" in kinds and len(kinds) > 1:
            raise ValueError("segmentation: metrics of probability maps (sod_toolbox) and of label maps "
                             f"({sorted(k for k in metrics if metrics[k].input_kind != 'prob_maps')}) cannot "
                             "share a run: score them in two runs")
        self.score_maps = "prob_maps" in kinds
        return metrics

    def build_metric(
        self, name: str, registry_name: str, options: dict[str, Any], classes: Sequence[str] | None
    ) -> Metric:
        """Per-class metrics over ``classes`` (background first, left out unless included)."""
        if not classes:
            raise ValueError("segmentation metrics need the dataset's class list, background first: set "
                             "dataset.options.classes, e.g. dataset.options.classes=[background,liver,tumour]")
        include_bg = bool(options.pop("include_background", self.include_background))
        names = list(classes) if include_bg else list(classes)[1:]
        return create_metric(
            registry_name,
            **{"num_classes": len(classes), "include_background": include_bg, "class_names": names, **options},
        )

    def sample_records(
        self, batch: dict[str, Any], outputs: dict[str, Any], classes: Sequence[str] | None
    ) -> dict[str, Any]:
        """Columns for the batch, one row per sample × class (background left out unless
        included): voxel counts of target and prediction and their volumes in mL."""
        pred = outputs["labels"]
        if isinstance(pred, list) or isinstance(batch["mask"], list):  # images of different sizes
            targets = [torch.as_tensor(m).to(p.device) for m, p in zip(batch["mask"], pred)]
            k = len(classes) if classes else int(max(max(int(p.max()), int(t.max())) for p, t in zip(pred, targets))) + 1
            b = len(pred)
            pc = torch.cat([_counts(p[None], k, 1) for p in pred]).cpu().numpy()
            tc = torch.cat([_counts(t[None], k, 1) for t in targets]).cpu().numpy()
        else:
            target = torch.as_tensor(batch["mask"]).to(pred.device, non_blocking=True)
            k = len(classes) if classes else int(max(pred.max(), target.max())) + 1
            b = pred.shape[0]
            pc = _counts(pred, k, b).cpu().numpy()
            tc = _counts(target, k, b).cpu().numpy()
        names = list(classes) if classes else [str(i) for i in range(k)]
        first = 0 if self.include_background else 1
        voxel_ml = np.empty(b, dtype=np.float64)
        for i in range(b):
            spacing = (batch["meta"][i] or {}).get("spacing")
            voxel_ml[i] = math.prod(float(s) for s in spacing) / 1000.0 if spacing else float("nan")
        ids = np.empty(b, dtype=object)
        ids[:] = list(batch["id"])
        tc, pc = tc[:, first:], pc[:, first:]
        self.worst.offer(batch, pred, target, names, first)
        return {
            "id": np.repeat(ids, k - first),
            "class": np.tile(np.asarray(names[first:], dtype=object), b),
            "target_voxels": tc.reshape(-1),
            "pred_voxels": pc.reshape(-1),
            "target_ml": (tc.astype(np.float64) * voxel_ml[:, None]).reshape(-1),
            "pred_ml": (pc.astype(np.float64) * voxel_ml[:, None]).reshape(-1),
        }

    def write_outputs(self, results: Any, run_dir: Path) -> list[Path]:
        """``worst/segmentation.npz`` + ``.json``: the worst cases' slices (tasks/worst.py)."""
        from medimg_bench.tasks.worst import WORST_DIR

        return self.worst.write(Path(run_dir) / WORST_DIR)

    def plots(self, results: Any, out_dir: Path) -> list[Path]:
        from medimg_bench.tasks.plots import plot_per_class

        written = []
        for column in results.per_sample_metric_columns():
            path = plot_per_class(results.samples, column, out_dir / f"per_class_{column}.png", title=results.name)
            if path:
                written.append(path)
        return written


def _counts(labels: torch.Tensor, k: int, b: int) -> torch.Tensor:
    """``(B, k)`` voxel counts of labels ``0..k-1`` per case in one ``bincount`` (labels outside
    the range are not counted)."""
    flat = labels.reshape(b, -1).long()
    offset = torch.arange(b, device=flat.device)[:, None] * k
    idx = torch.where((flat >= 0) & (flat < k), flat + offset, b * k)
    return torch.bincount(idx.reshape(-1), minlength=b * k + 1)[: b * k].reshape(b, k)
