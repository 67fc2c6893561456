"""Many processes, one evaluation (``torchrun``): shard without padding, gather records.

Each rank evaluates ``range(rank, n, world_size)``: no sample is repeated to even out the
shards, so nothing has to be removed afterwards. Metric states and per-sample records are then
gathered (``all_gather_object`` accepts shards of different lengths) and put back in dataset
order, so the summary and its bootstrap intervals equal a single-process run exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

__all__ = ["ShardSampler", "world", "gather_lists", "is_main_process", "maybe_init_distributed"]


def world() -> tuple[int, int]:
    """``(rank, world_size)``; ``(0, 1)`` when torch.distributed is not initialised."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """True on rank 0 (and when not distributed): the process that writes results."""
    return world()[0] == 0


class ShardSampler(torch.utils.data.Sampler[int]):
    """Indices ``rank, rank + world_size, …`` of a dataset of ``n`` samples; shards differ in
    length by at most one and together cover every index exactly once."""

    def __init__(self, n: int, *, rank: int | None = None, world_size: int | None = None) -> None:
        r, w = world()
        self.rank = r if rank is None else rank
        self.world_size = w if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is not in [0, {self.world_size})")
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.n, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.n, self.world_size))


def gather_lists(items: Sequence[Any]) -> list[Any]:
    """Concatenate a list from every rank (rank order); the list itself when not distributed."""
    import torch.distributed as dist

    _, w = world()
    if w == 1:
        return list(items)
    parts: list[Any] = [None] * w
    dist.all_gather_object(parts, list(items))
    return [x for part in parts for x in part]


def maybe_init_distributed() -> tuple[int, int]:
    """Under ``torchrun`` (``WORLD_SIZE`` > 1 in the environment) start the default process group —
    NCCL when CUDA is available, else gloo — and pin this rank to ``cuda:LOCAL_RANK``. Returns
    ``(rank, world_size)``; does nothing when already initialised or not launched distributed."""
    import os

    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and dist.is_available() and not dist.is_initialized():
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return world()
