"""Segmentation networks from MONAI as engine adapters (sliding-window for large volumes)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter, load_checkpoint
from medimg_bench.registry import register_model

__all__ = ["SegmenterAdapter", "monai_unet", "monai_net"]


class SegmenterAdapter(ModelAdapter):
    """Wraps a network returning ``(B, K, *spatial)`` logits. ``predict`` gives the argmax
    ``labels`` map, taken from the logits (no softmax), plus the softmax ``probs`` only when
    ``return_probs=True``. Inputs are padded to a multiple of ``divisor`` and cropped back, or run
    with MONAI's sliding window when ``roi_size`` is set."""

    task = "segmentation"

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        divisor: int = 1,
        roi_size: Sequence[int] | None = None,
        sw_batch_size: int = 4,
        overlap: float = 0.25,
        return_probs: bool = False,
        name: str = "",
    ) -> None:
        super().__init__(module, name=name)
        self.divisor = divisor
        self.roi_size = tuple(roi_size) if roi_size else None
        self.sw_batch_size = sw_batch_size
        self.overlap = overlap
        self.return_probs = return_probs

    def prediction_options(self) -> dict[str, Any]:
        # sliding-window settings change the logits; return_probs does not change the labels
        return {"divisor": self.divisor, "roi_size": self.roi_size,
                "sw_batch_size": self.sw_batch_size, "overlap": self.overlap}

    def _padded_forward(self, x: torch.Tensor) -> torch.Tensor:
        spatial = x.shape[2:]
        target = [math.ceil(s / self.divisor) * self.divisor for s in spatial]
        pad: list[int] = []
        for s, t in zip(reversed(spatial), reversed(target)):
            pad += [0, t - s]
        y = self.module(torch.nn.functional.pad(x, pad) if any(pad) else x)
        return y[(slice(None), slice(None), *[slice(0, s) for s in spatial])]

    def forward_batch(self, batch: dict[str, Any]) -> torch.Tensor:
        return self._padded_forward(self.images(batch))

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        x = self.images(batch)
        if self.roi_size is not None:
            from monai.inferers import sliding_window_inference

            logits = sliding_window_inference(
                x, self.roi_size, self.sw_batch_size, self._padded_forward, overlap=self.overlap
            )
        else:
            logits = self._padded_forward(x)
        if not self.return_probs:  # softmax is monotonic: the same argmax, one pass less
            return {"labels": logits.argmax(1)}
        probs = torch.softmax(logits.float(), dim=1)
        return {"probs": probs, "labels": probs.argmax(1)}


@register_model("monai_unet", tags=("segmentation", "monai"))
def monai_unet(
    *,
    num_classes: int,
    in_channels: int = 1,
    spatial_dims: int = 3,
    channels: Sequence[int] = (16, 32, 64),
    strides: Sequence[int] = (2, 2),
    num_res_units: int = 1,
    roi_size: Sequence[int] | None = None,
    checkpoint: str | Path | None = None,
    return_probs: bool = False,
) -> SegmenterAdapter:
    """MONAI ``UNet`` with ``num_classes`` output channels (background included)."""
    from monai.networks.nets import UNet

    module = UNet(
        spatial_dims=spatial_dims,
        in_channels=in_channels,
        out_channels=num_classes,
        channels=tuple(channels),
        strides=tuple(strides),
        num_res_units=num_res_units,
    )
    if checkpoint:
        load_checkpoint(module, checkpoint)
    divisor = int(math.prod(strides))
    adapter = SegmenterAdapter(module, divisor=divisor, roi_size=roi_size, return_probs=return_probs,
                               name="monai/UNet")
    adapter.config = {"factory": "monai_unet", "num_classes": num_classes, "in_channels": in_channels,
                      "spatial_dims": spatial_dims, "channels": list(channels),
                      "strides": list(strides), "num_res_units": num_res_units}
    return adapter


@register_model("monai_net", tags=("segmentation", "monai"))
def monai_net(
    *,
    net: str,
    num_classes: int,
    in_channels: int = 1,
    divisor: int = 16,
    roi_size: Sequence[int] | None = None,
    checkpoint: str | Path | None = None,
    return_probs: bool = False,
    **net_kwargs: Any,
) -> SegmenterAdapter:
    """Any network in ``monai.networks.nets`` by class name (``SegResNet``, ``SwinUNETR``,
    ``DynUNet``...), built with ``in_channels``/``out_channels`` and ``net_kwargs``."""
    import monai.networks.nets as nets

    if not hasattr(nets, net):
        raise ValueError(f"monai.networks.nets has no network {net!r}")
    module = getattr(nets, net)(in_channels=in_channels, out_channels=num_classes, **net_kwargs)
    if checkpoint:
        load_checkpoint(module, checkpoint)
    adapter = SegmenterAdapter(module, divisor=divisor, roi_size=roi_size, return_probs=return_probs,
                               name=f"monai/{net}")
    adapter.config = {"factory": "monai_net", "net": net, "num_classes": num_classes,
                      "in_channels": in_channels, **net_kwargs}
    return adapter
