"""Accelerated MRI reconstruction: PSNR / SSIM / NMSE of the model's ``recon`` against the
dataset's ``target`` (fastMRI's conventions, ``metrics/reconstruction.py``), plus Dice (any
label-map metric) of a downstream segmentation (``labels`` in the model's outputs) against the
dataset's tissue ``mask`` where it has one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import METRICS, create_metric, register_task
from medimg_bench.tasks.base import Task

__all__ = ["ReconstructionTask"]

_ROUTED: dict[tuple[type, str], type] = {}


def _routed_class(cls: type, key: str) -> type:
    """A subclass of a metric class whose ``update`` takes its part (``key``) of the task's dict
    inputs, one sample at a time when volumes differ in shape."""
    if (cls, key) in _ROUTED:
        return _ROUTED[(cls, key)]

    def update(self: Metric, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *,
               ids: Sequence[str] | None = None) -> None:
        p, t = preds.get(key), targets.get(key)
        if p is None or t is None:
            what = "the model's 'labels'" if key == "label_maps" else "the model's 'recon'"
            raise ValueError(f"{self.name}: needs {what} and the dataset's "
                             f"{'tissue mask' if key == 'label_maps' else 'target'}; one is missing")
        if isinstance(p, torch.Tensor) and isinstance(t, torch.Tensor):
            return cls.update(self, p, t, meta, ids=ids)
        for i in range(len(p)):
            cls.update(self, p[i][None], t[i][None], None if meta is None else [meta[i]],
                       ids=None if ids is None else [ids[i]])
        return None

    routed = type(cls.__name__, (cls,), {"update": update, "concat_updates": False, "__module__": __name__})
    _ROUTED[(cls, key)] = routed
    return routed


def _crop(x: torch.Tensor, size: int) -> torch.Tensor:
    h, w = x.shape[-2:]
    if size > min(h, w):
        raise ValueError(f"crop=fastmri: cannot crop a {h}×{w} plane to {size}×{size}")
    top, left = (h - size) // 2, (w - size) // 2
    return x[..., top: top + size, left: left + size]


@register_task("reconstruction", tags=("reconstruction",))
class ReconstructionTask(Task):
    """``crop``: ``none`` (recon and target must have the same shape) or ``fastmri`` (both
    centre-cropped to target-width squares, as fastMRI's ``evaluate.py``)."""

    name = "reconstruction"
    default_metrics = {"psnr": {}, "ssim": {}, "nmse": {}}

    def __init__(self, *, crop: str = "none") -> None:
        if crop not in ("none", "fastmri"):
            raise ValueError(f"reconstruction: crop must be 'none' or 'fastmri', got {crop!r}")
        self.crop = crop

    def loss(self, outputs: Any, batch: dict[str, Any]) -> torch.Tensor:
        recon = outputs["recon"] if isinstance(outputs, Mapping) else outputs
        return torch.nn.functional.l1_loss(recon, torch.as_tensor(batch["target"]).to(recon.device))

    def build_metric(
        self, name: str, registry_name: str, options: dict[str, Any], classes: Sequence[str] | None
    ) -> Metric:
        kind = getattr(METRICS.get(registry_name), "input_kind", "images")
        if kind == "label_maps":
            if not classes:
                raise ValueError(f"reconstruction: metric {name!r} scores tissue masks; the dataset has no classes")
            include_bg = bool(options.pop("include_background", False))
            options = {"num_classes": len(classes), "include_background": include_bg,
                       "class_names": list(classes) if include_bg else list(classes)[1:], **options}
        elif kind != "images":
            raise ValueError(f"reconstruction: metric {name!r} takes {kind!r}, not images or label maps")
        metric = create_metric(registry_name, **options)
        metric.__class__ = _routed_class(type(metric), kind)
        return metric

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:
        if "recon" not in outputs:
            raise ValueError(f"reconstruction: the model returned {sorted(outputs)}, no 'recon'")
        recon, target = outputs["recon"], batch["target"]
        pairs = zip(recon, target) if isinstance(recon, list) or isinstance(target, list) else None
        if pairs is None:
            recon, target = torch.as_tensor(recon), torch.as_tensor(target).to(recon.device)
            recon, target = self._cropped(recon, target, batch)
        else:
            cropped = [self._cropped(torch.as_tensor(r), torch.as_tensor(t).to(torch.as_tensor(r).device), batch)
                       for r, t in pairs]
            recon, target = [c[0] for c in cropped], [c[1] for c in cropped]
        preds, targets = {"images": recon}, {"images": target}
        if outputs.get("labels") is not None and batch.get("mask") is not None:
            preds["label_maps"], targets["label_maps"] = outputs["labels"], batch["mask"]
        return preds, targets

    def _cropped(self, recon: torch.Tensor, target: torch.Tensor, batch: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        if self.crop == "fastmri":
            size = target.shape[-1]
            return _crop(recon, size), _crop(target, size)
        if recon.shape != target.shape:
            raise ValueError(f"reconstruction of shape {tuple(recon.shape)} for a target of {tuple(target.shape)} "
                             f"(samples {list(batch['id'])}); crop=fastmri crops both to target-width squares")
        return recon, target

    def sample_records(
        self, batch: dict[str, Any], outputs: dict[str, Any], classes: Sequence[str] | None
    ) -> dict[str, Any]:
        """One row per volume: its id, slices, the acceleration of its sampling mask, and the
        dataset's target as ``target_max`` / ``target_norm`` (its largest value and L2 norm, before
        any crop: what ``compare`` checks to know both runs had the same reference)."""
        metas = batch.get("meta") or [{}] * len(batch["id"])
        ids = np.empty(len(batch["id"]), dtype=object)
        ids[:] = list(batch["id"])
        target = [torch.as_tensor(t).detach() for t in batch["target"]]
        return {
            "id": ids,
            "slices": np.array([int(t.shape[0]) for t in target], dtype=np.int64),
            "acceleration": np.array([float((m or {}).get("acceleration", np.nan)) for m in metas]),
            "target_max": np.array([float(t.max()) for t in target], dtype=np.float64),
            "target_norm": np.array([float(torch.linalg.vector_norm(t.double())) for t in target], dtype=np.float64),
        }
