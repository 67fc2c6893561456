"""The evaluation's data loader: a sample that fails to load becomes a failure record, not an
exception, so one bad file cannot stop a run."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from medimg_bench.sample import collate

__all__ = ["make_loader", "split_collate", "sample_ids", "InProcessBatches"]


class Failure(dict):
    """Marker for a sample that could not be loaded."""


class SafeDataset(torch.utils.data.Dataset):
    """Returns a :class:`Failure` instead of raising, so one bad file cannot stop the loader."""

    def __init__(self, dataset: Any, fail_fast: bool) -> None:
        self.dataset = dataset
        self.fail_fast = fail_fast

    def __len__(self) -> int:
        return len(self.dataset)

    def _sid(self, index: int) -> str:
        sample_id = getattr(self.dataset, "sample_id", None)
        return sample_id(index) if callable(sample_id) else f"index_{index}"

    def __getitem__(self, index: int) -> Any:
        try:
            return self.dataset[index]
        except Exception as exc:
            return self._failure(index, exc)

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A batch's samples (the DataLoader's batched fetch): one ``try`` for the whole batch."""
        out: list[Any] = []
        try:
            for i in indices:
                out.append(self.dataset[i])
        except Exception as exc:
            j = len(out)
            out.append(self._failure(indices[j], exc))
            out.extend(self[i] for i in indices[j + 1:])
        return out

    def _failure(self, index: int, exc: Exception) -> Failure:
        if self.fail_fast:
            raise exc
        # a dataset may tag its errors (``exc.stage = "target"`` for an unreadable label)
        return Failure(id=self._sid(index), stage=str(getattr(exc, "stage", "load")),
                        error=f"{type(exc).__name__}: {exc}")


class InProcessBatches:
    """The batches a ``DataLoader`` with ``num_workers=0`` and no pinned memory yields — the same
    ``__getitems__`` calls on the same positions, the same ``collate_fn``, in the same order —
    without its per-batch machinery (a profiler range, the fetcher, index bookkeeping: ~11 µs a
    batch, a tenth of the in-memory worst case's bare loop, docs/scale.md). Like the
    DataLoader's iterator, each iteration starts with one draw from torch's global generator
    (its base seed), so the random state after a run is what it was with a DataLoader."""

    def __init__(self, dataset: Any, positions: Sequence[int], *, batch_size: int,
                 collate_fn: Callable[[list[Any]], Any]) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        self.dataset, self.sampler, self.batch_size, self.collate_fn = dataset, positions, batch_size, collate_fn

    def __len__(self) -> int:
        return -(-len(self.sampler) // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        torch.empty((), dtype=torch.int64).random_()  # the DataLoader iterator's base-seed draw
        positions, size, fetch, collate_fn = self.sampler, self.batch_size, self.dataset.__getitems__, self.collate_fn
        for start in range(0, len(positions), size):
            batch = positions[start:start + size]
            yield collate_fn(fetch(batch if type(batch) is list else list(batch)))


def split_collate(items: Sequence[Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """``(batch of the samples that loaded or None, failure records of the others)``."""
    ok = [s for s in items if not isinstance(s, Failure)]
    failed = [dict(s) for s in items if isinstance(s, Failure)]
    return (collate(ok) if ok else None), failed


def sample_ids(dataset: Any) -> list[str]:
    """Every sample id in dataset order (from the manifest when there is one)."""
    manifest = getattr(dataset, "manifest", None)
    if manifest is not None and "id" in getattr(manifest, "columns", ()) and len(manifest) == len(dataset):
        return manifest["id"].astype(str).tolist()
    sample_id = getattr(dataset, "sample_id", None)
    return [sample_id(i) if callable(sample_id) else f"index_{i}" for i in range(len(dataset))]


def make_loader(
    dataset: Any, indices: Sequence[int] | None, *, batch_size: int, num_workers: int, fail_fast: bool,
    pin_memory: bool,
) -> tuple[Iterable[Any], Callable[[int], dict[str, Any] | None]]:
    """The loader over ``indices`` (None: every sample, in order: a DataLoader with workers or
    pinned memory, else :class:`InProcessBatches`) and ``refetch(n)``: its
    ``n``-th batch (from 1) loaded again, the samples that load (deferred scoring needs it); given
    a list of ids instead of ``n``, those samples (predictions a checkpoint held unscored)."""
    safe = SafeDataset(dataset, fail_fast)
    positions = indices if indices is not None else range(len(dataset))
    loader: Any
    if num_workers == 0 and not pin_memory:
        loader = InProcessBatches(safe, positions, batch_size=batch_size, collate_fn=split_collate)
    else:
        loader = torch.utils.data.DataLoader(
            safe, batch_size=batch_size, sampler=indices, shuffle=False, num_workers=num_workers,
            collate_fn=split_collate, pin_memory=pin_memory,
        )

    where: dict[str, int] = {}

    def refetch(n_batch: int | Sequence[str]) -> dict[str, Any] | None:
        if isinstance(n_batch, int):
            return split_collate(safe.__getitems__(positions[(n_batch - 1) * batch_size:n_batch * batch_size]))[0]
        if not where:
            where.update((sid, i) for i, sid in enumerate(sample_ids(dataset)))
        return split_collate(safe.__getitems__([where[sid] for sid in n_batch if sid in where]))[0]

    return loader, refetch
