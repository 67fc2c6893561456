"""The order of training samples: a seeded permutation per epoch, cut into global batches."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["EpochBatches"]


class EpochBatches(torch.utils.data.Sampler[list[int]]):
    """Global batches of a seeded permutation for one epoch (from batch ``start``); under DDP
    each rank yields its contiguous slice of every global batch."""

    def __init__(self, n: int, batch_size: int, *, seed: int, epoch: int, start: int, rank: int, world: int,
                 drop_last: bool) -> None:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        self.perm = torch.randperm(n, generator=g).tolist()
        self.bs, self.start, self.rank, self.world = batch_size, start, rank, world
        n_batches = n // batch_size if drop_last else -(-n // batch_size)
        if not drop_last and world > 1 and 0 < n % batch_size < world:
            n_batches = n // batch_size or n_batches  # a last batch too small to give every rank a sample
        self.n_batches = n_batches

    def __iter__(self) -> Any:
        for b in range(self.start, self.n_batches):
            batch = self.perm[b * self.bs:(b + 1) * self.bs]
            per = -(-len(batch) // self.world)
            yield batch[self.rank * per:(self.rank + 1) * per]

    def __len__(self) -> int:
        return max(0, self.n_batches - self.start)
