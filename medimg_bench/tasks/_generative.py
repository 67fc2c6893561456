"""Helpers shared by the generative tasks (vqa, report_generation, moaks_vqa, cxreasonbench_reasoning)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = ["sample_images", "as_uint8", "generation_settings", "own_metric_spec"]


def as_uint8(image: Any) -> Any:
    """An image for a vision-language model: float tensors/arrays in [0, 1] (the loaders'
    convention) become ``uint8`` 0–255 at the same resolution, channel-first kept; anything else
    (uint8, PIL) is passed as is (the adapters convert it)."""
    try:
        import torch

        if isinstance(image, torch.Tensor):
            image = image.detach().cpu().numpy()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(image, np.ndarray) and image.dtype.kind == "f" and image.size:
        lo, hi = float(np.nanmin(image)), float(np.nanmax(image))
        if lo >= 0.0 and hi <= 1.0 + 1e-6:
            return np.clip(np.rint(image * 255.0), 0, 255).astype(np.uint8)
    return image


def sample_images(batch: dict[str, Any], i: int) -> list[Any]:
    """The images of sample ``i`` of a collated batch, as a list (several for multi-image or
    multi-view samples; empty for text-only ones)."""
    image = batch.get("image")
    if image is None:
        return []
    one = image[i]
    return [as_uint8(x) for x in (list(one) if isinstance(one, (list, tuple)) else [one])]


def generation_settings(task: str, model: Any, max_new_tokens: int | None) -> Any:
    """The generative adapter's settings with the task's ``max_new_tokens`` (when set); a model
    without ``generate`` is refused, naming the task."""
    if not hasattr(model, "generate"):
        raise TypeError(f"task {task} needs a generative adapter (model.generate); got {type(model).__name__}")
    settings = model.settings
    if max_new_tokens is not None:
        settings = dataclasses.replace(settings, max_new_tokens=int(max_new_tokens))
    return settings


def own_metric_spec(spec: Any, metric: str) -> Any:
    """``spec`` when it names ``metric`` (as an entry's key or its ``metric:``), else None, so that
    the task's default metrics apply: the root config's default (classification) metrics do not."""
    if spec and not any(n == metric or (o or {}).get("metric") == metric for n, o in dict(spec).items()):
        return None
    return spec
