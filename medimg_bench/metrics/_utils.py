"""Input conversion shared by the metric modules."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def as_tensor(x: Any, *, name: str = "input", dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` (tensor, ndarray, list) as a tensor on its own device; ``ValueError`` naming ``name``."""
    if isinstance(x, torch.Tensor):
        t = x
    elif isinstance(x, np.ndarray | list | tuple | float | int | np.generic):
        t = torch.as_tensor(np.asarray(x))
    else:
        raise ValueError(f"{name}: expected a tensor or array, got {type(x).__name__}")
    return t.to(dtype) if dtype is not None else t
