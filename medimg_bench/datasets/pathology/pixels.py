"""Pixel helpers shared by the pathology tile loaders (RGB in [0, 1], image suffixes)."""

from __future__ import annotations

import numpy as np
import torch

IMAGE_SUFFIXES = (".tif", ".tiff", ".png", ".jpg", ".jpeg", ".bmp")


def unit_rgb(array: np.ndarray, path: str) -> torch.Tensor:
    """``H×W(×C)`` uint8/uint16 → float32 ``3×H×W`` (or ``1×H×W`` for grey) in [0, 1]."""
    a = np.asarray(array)
    if a.ndim == 3 and a.shape[-1] in (2, 4):
        a = a[..., :-1]  # drop alpha
    if a.dtype == np.uint8:
        scale = 255.0
    elif a.dtype == np.uint16:
        scale = 65535.0
    elif a.dtype == np.bool_:
        scale = 1.0
    else:
        raise ValueError(
            f"{path!r}: unsupported pixel type {a.dtype} for a pathology image (expected 8/16-bit)"
        )
    x = a.astype(np.float32) / np.float32(scale)
    x = np.moveaxis(x, -1, 0) if x.ndim == 3 else x[None]
    return torch.from_numpy(np.ascontiguousarray(x))
