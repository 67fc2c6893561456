"""The process group as training sees it: rank, world size, global means and broadcasts."""

from __future__ import annotations

import torch

__all__ = ["broadcast_value", "global_mean", "world"]


def world() -> tuple[int, int]:
    """``(rank, world size)``; ``(0, 1)`` without an initialised process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _tensor(value: float) -> torch.Tensor:
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    return t.cuda() if dist.get_backend() == "nccl" else t


def global_mean(value: float, world_size: int) -> float:
    """The mean of ``value`` over the ranks."""
    if world_size == 1:
        return value
    import torch.distributed as dist

    t = _tensor(value)
    dist.all_reduce(t)
    return float(t.item()) / world_size


def broadcast_value(value: float, world_size: int) -> float:
    """Rank 0's ``value`` on every rank."""
    if world_size == 1:
        return value
    import torch.distributed as dist

    t = _tensor(value)
    dist.broadcast(t, src=0)
    return float(t.item())
