"""Image preprocessing shared by the encoder and CLIP adapters (channels, resize, normalisation) and
the local-weights path check."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["OPENAI_MEAN", "OPENAI_STD", "require_local_path", "prepare_images"]

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def require_local_path(path: Any, option: str) -> Path:
    """``Path(path)`` if it exists; otherwise ``FileNotFoundError`` naming the path and the option."""
    p = Path(str(path)).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"{option}={str(p)!r}: no such file or directory (set {option} to an "
                                "existing path)")
    return p


def prepare_images(
    images: torch.Tensor,
    *,
    size: int | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    channels: int | None = None,
) -> torch.Tensor:
    """Images ``(B, C, H, W)`` in [0, 1] → the network's input: channels repeated (1 → 3) or
    averaged (→ 1) to ``channels``, bilinear resize to ``size``×``size``, then ``(x - mean) / std``."""
    x = images.float()
    if channels is not None and x.shape[1] != channels:
        if x.shape[1] == 1:
            x = x.expand(-1, channels, *x.shape[2:])
        elif channels == 1:
            x = x.mean(1, keepdim=True)
        else:
            raise ValueError(f"cannot map {x.shape[1]} image channels to the {channels} the encoder takes")
    if size is not None and tuple(x.shape[-2:]) != (size, size):
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    if mean is not None and std is not None:
        m = torch.as_tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        s = torch.as_tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
        x = (x - m) / s
    return x
