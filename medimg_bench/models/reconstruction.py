"""Reconstruction adapters: the zero-filled baseline and any torch module (``recon`` outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter
from medimg_bench.registry import register_model

__all__ = ["ReconModule", "ZeroFilled", "zero_filled"]


class ZeroFilled(ModelAdapter):
    """The zero-filled baseline: the magnitude of the inverse FFT of the undersampled k-space,
    coils combined (the dataset computes it as ``image``); ``predict -> {"recon": (B, S, H, W)}``."""

    task = "reconstruction"

    def __init__(self) -> None:
        super().__init__(torch.nn.Identity())

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        image = batch["image"]
        if isinstance(image, list):
            return {"recon": [torch.as_tensor(x)[0] for x in image]}
        return {"recon": torch.as_tensor(image)[:, 0]}


class ReconModule(ModelAdapter):
    """Any ``torch.nn.Module`` mapping the zero-filled ``image`` ``(B, 1, S, H, W)`` → recon
    (``inputs="image"``), or ``(kspace, sampling_mask, maps)`` → recon (``inputs="kspace"``).
    A module that returns a dict may add ``labels`` (a downstream segmentation)."""

    task = "reconstruction"

    def __init__(self, module: torch.nn.Module, *, inputs: str = "image") -> None:
        super().__init__(module)
        if inputs not in ("image", "kspace"):
            raise ValueError(f"ReconModule: inputs must be 'image' or 'kspace', got {inputs!r}")
        self.inputs = inputs

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        dev = self.device
        if self.inputs == "image":
            out = self.module(torch.as_tensor(batch["image"]).to(dev))
        else:
            maps = batch.get("maps")
            out = self.module(torch.as_tensor(batch["kspace"]).to(dev), torch.as_tensor(batch["sampling_mask"]).to(dev),
                              None if maps is None else torch.as_tensor(maps).to(dev))
        if isinstance(out, dict):
            return out
        return {"recon": out[:, 0] if out.ndim == 5 else out}


@register_model("zero_filled", tags=("reconstruction", "predictions"))
def zero_filled(*, num_classes: int | None = None, in_channels: int | None = None,
                checkpoint: str | Path | None = None) -> ZeroFilled:
    """The zero-filled reconstruction baseline (no weights; ``num_classes`` / ``in_channels`` unused)."""
    if checkpoint is not None:
        raise ValueError("zero_filled has no weights: leave `checkpoint` unset")
    return ZeroFilled()
