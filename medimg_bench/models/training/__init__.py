"""Training: a recipe (:class:`TrainRecipe`, what decides the numbers) and a loop with hooks
(:func:`train`, :class:`TrainHooks`); :func:`fit` is the keyword form of both that the demo,
``train.enabled`` and the fine-tuning protocol call.

Modules: ``recipe`` (the dataclass, :data:`MEDMNIST_V2`, config → recipe), ``loop`` (``train``),
``schedule`` (cosine / MultiStepLR), ``optim`` (parameter groups, optimiser), ``sampling``
(seeded epoch batches, DDP slices), ``validation`` (selection value, best weights, early stop),
``state`` (resumable checkpoint), ``batchnorm``, ``ddp``, ``progress`` (the console display).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter
from medimg_bench.models.training.batchnorm import recalibrate_batchnorm
from medimg_bench.models.training.loop import TrainHooks, TrainResult, train
from medimg_bench.models.training.optim import make_optimizer as _optimizer
from medimg_bench.models.training.optim import param_groups as _param_groups  # noqa: F401 - old import path
from medimg_bench.models.training.progress import EpochEnd, TrainProgress
from medimg_bench.models.training.recipe import (
    MEDMNIST_V2,
    TrainRecipe,
    fit_config_options,
    recipe_from_config,
)
from medimg_bench.models.training.schedule import set_cosine_lr as _set_lr  # noqa: F401 - old import path
from medimg_bench.models.training.validation import evaluate_metric as _evaluate_metric
from medimg_bench.models.training.validation import selection_metric

__all__ = [
    "MEDMNIST_V2",
    "EpochEnd",
    "TrainHooks",
    "TrainProgress",
    "TrainRecipe",
    "TrainResult",
    "fit",
    "fit_config_options",
    "recalibrate_batchnorm",
    "recipe_from_config",
    "selection_metric",
    "train",
]


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
    warmup_steps: int | None = None,
    encoder_lr_scale: float = 1.0,
    grad_clip: float | None = None,
    val_fn: Callable[[ModelAdapter], float] | None = None,
    val_every: int = 50,
    patience: int | None = None,
    restore_best: bool = True,
    amp: bool = False,
    deterministic: bool = False,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 50,
    distributed: bool | None = None,
    optimizer: str = "adamw",
    momentum: float = 0.9,
    epochs: int | None = None,
    drop_last: bool | None = None,
    lr_milestones: list[int] | tuple[int, ...] | None = None,
    lr_gamma: float = 0.1,
    val_dataset: torch.utils.data.Dataset | None = None,
    select_on: str | None = None,
    val_batch_size: int | None = None,
) -> TrainResult:
    """Train ``model``: the keyword form of ``train(model, dataset, TrainRecipe(...))``.

    Every recipe keyword is the :class:`TrainRecipe` field of that name (see there: optimiser,
    schedule, length, batches, selection, AMP, DDP, checkpoints); ``loss_fn``, ``val_dataset``,
    ``val_fn``, ``checkpoint_dir`` and ``progress`` go to :func:`train`. In short: AdamW (or
    ``optimizer``) with warm-up + cosine over whichever of ``max_steps`` / ``max_seconds`` ends
    first, or ``MultiStepLR`` at ``lr_milestones`` over ``epochs``; ``select_on`` validates on
    ``val_dataset`` after every epoch and keeps the best epoch (ties: the earliest), ``val_fn``
    every ``val_every`` steps; without selection, batch-norm statistics are recomputed over
    ``bn_recalibration_batches`` batches. Under ``torchrun`` the model is data parallel (one
    global batch of ``batch_size``, the same loss curve as one process). Unreadable training
    samples are skipped with a logged count. Returns a :class:`TrainResult`; the model is left
    in eval mode.

    More than ten parameters on purpose: this is the compatibility signature that the README,
    ``train.enabled`` and the fine-tuning protocol use (docs/design.md, "Training").
    """
    if len(dataset) == 0:
        raise ValueError("fit(): the training dataset is empty")
    recipe = TrainRecipe(
        optimizer=optimizer, lr=lr, weight_decay=weight_decay, momentum=momentum, encoder_lr_scale=encoder_lr_scale,
        grad_clip=grad_clip, lr_milestones=None if lr_milestones is None else tuple(lr_milestones),
        lr_gamma=lr_gamma, warmup_steps=warmup_steps, max_steps=max_steps, epochs=epochs, max_seconds=max_seconds,
        batch_size=batch_size, drop_last=drop_last, seed=seed, cache=cache, num_workers=num_workers,
        select_on=select_on, val_every=val_every, val_batch_size=val_batch_size, patience=patience,
        restore_best=restore_best, bn_recalibration_batches=bn_recalibration_batches, amp=amp,
        deterministic=deterministic, distributed=distributed, checkpoint_every=checkpoint_every)
    # looked up here at call time, so code that replaces them on this module is heard by the loop
    hooks = TrainHooks(make_optimizer=_optimizer, evaluate=_evaluate_metric)
    return train(model, dataset, recipe, loss_fn=loss_fn, val_dataset=val_dataset, val_fn=val_fn,
                 checkpoint_dir=checkpoint_dir, hooks=hooks, progress=progress)
