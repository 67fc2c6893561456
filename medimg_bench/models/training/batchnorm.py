"""Batch-norm statistics recomputed with the final weights."""

from __future__ import annotations

from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter

__all__ = ["recalibrate_batchnorm"]


def recalibrate_batchnorm(model: ModelAdapter, loader: Any, *, max_batches: int = 16) -> int:
    """Recompute batch-norm running mean/var as the plain average over ``max_batches`` batches
    with the final weights. Returns the number of batches used (0 if the model has no BN)."""
    bns = [m for m in model.module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    momenta = [bn.momentum for bn in bns]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average
    model.train()
    used = 0
    with torch.no_grad():
        for batch in loader:
            if batch is None:
                continue
            model.forward_batch(batch)
            used += 1
            if used >= max_batches:
                break
    for bn, m in zip(bns, momenta):
        bn.momentum = m
    return used
