"""Training protocols: a short supervised fine-tune used by the demo and by ``train.enabled``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter

__all__ = ["TrainResult", "fit", "recalibrate_batchnorm"]


@dataclass
class TrainResult:
    """What a training run did: steps, epochs, wall time (s) and the loss curve."""

    steps: int
    epochs: int
    seconds: float
    losses: list[float]

    @property
    def final_loss(self) -> float:
        tail = self.losses[-10:]
        return sum(tail) / max(len(tail), 1)


def fit(
    model: ModelAdapter,
    dataset: torch.utils.data.Dataset,
    *,
    loss_fn: Callable[[torch.Tensor, dict[str, Any]], torch.Tensor],
    max_steps: int = 200,
    max_seconds: float | None = None,
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    batch_size: int = 16,
    num_workers: int = 0,
    seed: int = 0,
    cache: bool = False,
    progress: bool = True,
    bn_recalibration_batches: int = 16,
) -> TrainResult:
    """Train ``model`` with AdamW until ``max_steps`` or ``max_seconds`` (wall clock) is reached.

    ``cache=True`` loads every training sample once and keeps it in memory (small datasets
    only). Unreadable training samples are skipped with a logged warning and a count (see
    :class:`medimg_bench.datasets.check.SkipErrors`), not fatal.
    After training, batch-norm running statistics are recomputed over up to
    ``bn_recalibration_batches`` training batches (0 disables): after a short run at a high
    learning rate the exponential running averages lag the final weights, and evaluation-mode
    outputs are badly calibrated without this.
    Returns a :class:`TrainResult`; the model is left in eval mode.
    """
    if len(dataset) == 0:
        raise ValueError("fit(): the training dataset is empty")
    from medimg_bench.datasets.check import SkipErrors, skip_collate

    gen = torch.Generator().manual_seed(seed)
    data: Any = SkipErrors(dataset)
    if cache:
        data = [s for s in (data[i] for i in range(len(dataset))) if s is not None]
        if not data:
            raise ValueError("fit(): no training sample could be loaded")
    loader = torch.utils.data.DataLoader(
        data,
        batch_size=min(batch_size, len(data)),
        shuffle=True,
        drop_last=len(data) > batch_size,
        num_workers=0 if cache else num_workers,
        collate_fn=skip_collate,
        generator=gen,
    )
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    model.train()
    losses: list[float] = []
    start = time.perf_counter()
    steps = epochs = 0
    bar = _progress(progress, max_steps, max_seconds)
    try:
        while steps < max_steps:
            epochs += 1
            if epochs > 1 and steps == 0:
                raise ValueError("fit(): no training sample could be loaded")
            for batch in loader:
                if batch is None:  # every sample of this batch was unreadable
                    continue
                _set_lr(opt, lr, steps, max_steps, time.perf_counter() - start, max_seconds)
                logits = model.forward_batch(batch)
                loss = loss_fn(logits, batch)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                steps += 1
                losses.append(float(loss.detach()))
                if bar is not None:
                    bar.update(steps, losses[-1], time.perf_counter() - start)
                if steps >= max_steps or (max_seconds is not None and time.perf_counter() - start > max_seconds):
                    break
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                break
    finally:
        if bar is not None:
            bar.close()
    if bn_recalibration_batches:
        recalibrate_batchnorm(model, loader, max_batches=bn_recalibration_batches)
    model.eval()
    return TrainResult(steps=steps, epochs=epochs, seconds=time.perf_counter() - start, losses=losses)


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


def _set_lr(
    opt: torch.optim.Optimizer, base: float, step: int, max_steps: int, elapsed: float, max_seconds: float | None
) -> None:
    """Linear warm-up then cosine decay over the budget actually available: the schedule follows
    whichever of steps or wall time runs out first, so a time-capped run still anneals."""
    progress = step / max(max_steps, 1)
    if max_seconds:
        progress = max(progress, elapsed / max_seconds)
    progress = min(progress, 1.0)
    warm = min(1.0, (step + 1) / max(1, min(20, max_steps // 10)))
    for group in opt.param_groups:
        group["lr"] = base * warm * 0.5 * (1 + math.cos(math.pi * progress))


class _Bar:
    def __init__(self, total: int, max_seconds: float | None) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("train"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
            TextColumn("loss {task.fields[loss]:.4f}"), TimeElapsedColumn(), transient=False,
        )
        self.task = self.progress.add_task("train", total=total, loss=float("nan"))
        self.progress.start()

    def update(self, steps: int, loss: float, elapsed: float) -> None:
        self.progress.update(self.task, completed=steps, loss=loss)

    def close(self) -> None:
        self.progress.stop()


def _progress(enabled: bool, total: int, max_seconds: float | None) -> _Bar | None:
    return _Bar(total, max_seconds) if enabled else None
