"""The training loop of a :class:`~medimg_bench.models.training.recipe.TrainRecipe`, with hooks.

``train(model, dataset, recipe, loss_fn=...)`` runs: set up (seed, data, optimiser, resume from
a checkpoint) → epochs of seeded batches → per step: learning rate, forward, loss, backward,
optimiser step, then the hooks (``on_step``), step-wise validation (``val_fn``), end-of-epoch
validation (``select_on``) and ``on_epoch``, checkpoint → after: best weights restored or
batch-norm statistics recomputed. :class:`TrainHooks` names where the loop calls out.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter
from medimg_bench.models.training.batchnorm import recalibrate_batchnorm
from medimg_bench.models.training.ddp import global_mean, world
from medimg_bench.models.training.optim import make_optimizer, param_groups
from medimg_bench.models.training.progress import EpochEnd, TrainProgress
from medimg_bench.models.training.recipe import TrainRecipe
from medimg_bench.models.training.sampling import EpochBatches
from medimg_bench.models.training.schedule import default_warmup, set_cosine_lr, set_multistep_lr
from medimg_bench.models.training.state import TrainState, load_state, save_state
from medimg_bench.models.training.validation import evaluate_metric, validate_epoch, validate_with

__all__ = ["TrainHooks", "TrainResult", "train"]


@dataclass
class TrainResult:
    """What a training run did: steps, epochs, wall time (s), the loss curve and, with validation,
    the best step and its validation value. With ``select_on``: ``val_curve`` holds
    ``(epoch, value)`` for every finished epoch (epochs counted from 0) and ``best_epoch`` the
    epoch whose weights were kept. ``lrs`` is the head's learning rate at every step."""

    steps: int
    epochs: int
    seconds: float
    losses: list[float]
    best_step: int | None = None
    best_val: float | None = None
    best_epoch: int | None = None
    val_curve: list[tuple[int, float]] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        tail = self.losses[-10:]
        return sum(tail) / max(len(tail), 1)


@dataclass
class TrainHooks:
    """Where the loop calls out; the defaults are the built-in behaviour.

    ``make_optimizer(name, groups, lr=, weight_decay=, momentum=)`` builds the optimiser;
    ``evaluate(model, loader, metric) -> float`` is the ``select_on`` validation;
    ``on_step(state)`` runs after every optimiser step and ``on_epoch(EpochEnd)`` after every
    finished epoch (both on rank 0 only); the console progress is one such pair."""

    make_optimizer: Callable[..., torch.optim.Optimizer] = make_optimizer
    evaluate: Callable[[ModelAdapter, Any, str], float] = evaluate_metric
    on_step: Callable[[TrainState], None] | None = None
    on_epoch: Callable[[EpochEnd], None] | None = None


def train(model: ModelAdapter, dataset: torch.utils.data.Dataset, recipe: TrainRecipe, *,
          loss_fn: Callable[[torch.Tensor, dict[str, Any]], torch.Tensor],
          val_dataset: torch.utils.data.Dataset | None = None,
          val_fn: Callable[[ModelAdapter], float] | None = None, checkpoint_dir: str | Path | None = None,
          hooks: TrainHooks | None = None, progress: bool = True) -> TrainResult:
    """Train ``model`` on ``dataset`` by ``recipe``; returns a :class:`TrainResult` and leaves
    the model in eval mode (with the best weights when the recipe selects). ``val_dataset``
    feeds ``recipe.select_on``; ``val_fn(model) -> float`` (higher is better) is the step-wise
    alternative; ``checkpoint_dir`` holds a training state every ``recipe.checkpoint_every``
    steps, from which a new call resumes to the same result."""
    _check(dataset, recipe, val_dataset, val_fn)
    with _torch_settings(recipe.deterministic):
        run = _Run.start(model, dataset, recipe, loss_fn=loss_fn, val_dataset=val_dataset, val_fn=val_fn,
                         checkpoint_dir=checkpoint_dir, hooks=hooks or TrainHooks())
        run.open_progress(progress)
        try:
            run.loop()
        finally:
            run.close()
    return run.finish()


def _check(dataset: Any, recipe: TrainRecipe, val_dataset: Any, val_fn: Any) -> None:
    if len(dataset) == 0:
        raise ValueError("fit(): the training dataset is empty")
    if recipe.select_on is not None:
        if val_dataset is None:
            raise ValueError("fit(): select_on needs val_dataset")
        if val_fn is not None:
            raise ValueError("fit(): give either val_fn (every val_every steps) or select_on (every epoch)")


@contextlib.contextmanager
def _torch_settings(deterministic: bool) -> Iterator[None]:
    """Deterministic kernels for the loop when asked; the previous settings come back after it
    (before the best weights are restored or batch norm recalibrated)."""
    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                torch.backends.cudnn.benchmark)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.backends.cudnn.benchmark = previous[2]


@dataclass
class _Run:
    """One training run in progress: what the loop reads and updates."""

    model: ModelAdapter
    inner: torch.nn.Module
    recipe: TrainRecipe
    loss_fn: Callable[[torch.Tensor, dict[str, Any]], torch.Tensor]
    hooks: TrainHooks
    data: Any
    n: int
    global_bs: int
    drop_last: bool
    max_steps: int
    rank: int
    world_size: int
    opt: torch.optim.Optimizer
    scaler: Any
    state: TrainState
    setup: dict[str, Any]
    ckpt: Path | None
    val_loader: Any
    val_fn: Callable[[ModelAdapter], float] | None
    warm: int | None
    start_time: float = 0.0
    progress: TrainProgress | None = None
    epoch_first_step: int = 0  # where this epoch's losses start (the progress line's mean)
    segment_start: float = field(default_factory=time.perf_counter)  # this call's own pace gives
    segment_steps: int = 0  # the time left (a resumed run's earlier segments ran elsewhere)

    @classmethod
    def start(cls, model: ModelAdapter, dataset: Any, recipe: TrainRecipe, *, loss_fn: Any, val_dataset: Any,
              val_fn: Any, checkpoint_dir: Any, hooks: TrainHooks) -> _Run:
        """Seed, data, optimiser, resume; the model wrapped in DDP under a process group."""
        from medimg_bench.datasets.check import SkipErrors, skip_collate

        r = recipe
        torch.manual_seed(r.seed)
        rank, world_size = world() if r.distributed is not False else (0, 1)
        if r.batch_size % world_size:
            raise ValueError(f"fit(): batch_size={r.batch_size} must divide by the {world_size} ranks "
                             "(one global batch)")
        data, n = _training_data(dataset, r.cache)
        global_bs = min(r.batch_size, n)
        drop_last = n > r.batch_size if r.drop_last is None else bool(r.drop_last) and n > r.batch_size
        max_steps = r.max_steps
        if r.epochs is not None:
            max_steps = int(r.epochs) * EpochBatches(n, global_bs, seed=r.seed, epoch=0, start=0, rank=rank,
                                                     world=world_size, drop_last=drop_last).n_batches
        opt = hooks.make_optimizer(r.optimizer, param_groups(model, r.encoder_lr_scale), lr=r.lr,
                                   weight_decay=r.weight_decay, momentum=r.momentum)
        scaler = torch.amp.GradScaler("cuda", enabled=r.amp and model.device.type == "cuda")
        ckpt = Path(checkpoint_dir) / "train_state.pt" if checkpoint_dir else None
        setup = _setup_key(r, max_steps=max_steps, n=n, world_size=world_size)
        val_loader = None
        if r.select_on is not None:
            val_loader = torch.utils.data.DataLoader(SkipErrors(val_dataset), batch_size=r.val_batch_size or r.batch_size,
                                                     num_workers=r.num_workers, collate_fn=skip_collate)
        state = load_state(ckpt, model, opt, scaler, setup) if ckpt is not None and ckpt.exists() else TrainState()
        inner = model.module
        if world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [model.device.index] if model.device.type == "cuda" else None
            model.module = DistributedDataParallel(inner, device_ids=ids)
        model.train()
        warm = r.warmup if r.warmup is not None else default_warmup(max_steps)
        return cls(model=model, inner=inner, recipe=r, loss_fn=loss_fn, hooks=hooks, data=data, n=n,
                   global_bs=global_bs, drop_last=drop_last, max_steps=max_steps, rank=rank, world_size=world_size,
                   opt=opt, scaler=scaler, state=state, setup=setup, ckpt=ckpt, val_loader=val_loader, val_fn=val_fn,
                   warm=warm, start_time=time.perf_counter() - state.seconds, epoch_first_step=state.steps,
                   segment_steps=state.steps)

    def open_progress(self, enabled: bool) -> None:
        if enabled and self.rank == 0:
            per_epoch = self._sampler(0, 0).n_batches
            n_epochs = self.recipe.epochs if self.recipe.epochs is not None else (
                -(-self.max_steps // per_epoch) if self.recipe.max_seconds is None and per_epoch else None)
            self.progress = TrainProgress(max_steps=self.max_steps, n_epochs=n_epochs,
                                          every_epoch=self.val_loader is not None)

    def _sampler(self, epoch: int, start: int) -> EpochBatches:
        return EpochBatches(self.n, self.global_bs, seed=self.recipe.seed, epoch=epoch, start=start, rank=self.rank,
                            world=self.world_size, drop_last=self.drop_last)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start_time

    def _out_of_time(self) -> bool:
        return self.recipe.max_seconds is not None and self.elapsed() > self.recipe.max_seconds

    def loop(self) -> None:
        """Epochs until ``max_steps``, ``max_seconds`` or early stopping."""
        from medimg_bench.datasets.check import skip_collate

        s = self.state
        while s.steps < self.max_steps and not s.stopped:
            sampler = self._sampler(s.epoch, s.batch_in_epoch)
            loader = torch.utils.data.DataLoader(self.data, batch_sampler=sampler, collate_fn=skip_collate,
                                                 num_workers=0 if self.recipe.cache else self.recipe.num_workers)
            if s.batch_in_epoch == 0 and s.epoch > 0 and s.steps == 0:
                raise ValueError("fit(): no training sample could be loaded")
            if not self._epoch(loader, sampler.n_batches):
                s.epoch += 1  # the epoch ran to its end
                s.batch_in_epoch = 0
                continue
            if self._out_of_time() or s.steps >= self.max_steps or s.stopped:
                break

    def _epoch(self, loader: Any, n_batches: int) -> bool:
        """The batches of one epoch; True when the loop must stop within it."""
        s = self.state
        for batch in loader:
            s.batch_in_epoch += 1
            epoch_end = s.batch_in_epoch >= n_batches
            if batch is None:  # every sample of this batch was unreadable
                if epoch_end:
                    self._end_epoch()
                continue
            self._step(batch)
            if self.val_fn is not None and (s.steps % self.recipe.val_every == 0 or s.steps == self.max_steps):
                validate_with(self.model, self.inner, self.val_fn, s, self.recipe.patience)
                self.model.train()
            if epoch_end:
                self._end_epoch()
            if self.ckpt is not None and self.rank == 0 and s.steps % self.recipe.checkpoint_every == 0:
                s.seconds = self.elapsed()
                save_state(self.ckpt, self.inner, self.opt, self.scaler, s, self.setup)
            if s.stopped or s.steps >= self.max_steps or self._out_of_time():
                return True
        return False

    def _step(self, batch: dict[str, Any]) -> None:
        """Learning rate, forward, loss, backward, optimiser step; then ``on_step``."""
        r, s, opt = self.recipe, self.state, self.opt
        if r.lr_milestones is not None:
            set_multistep_lr(opt, r.lr, s.epoch, list(r.lr_milestones), r.lr_gamma, step=s.steps, warmup=self.warm)
        else:
            set_cosine_lr(opt, r.lr, s.steps, self.max_steps, self.elapsed(), r.max_seconds, warmup=self.warm)
        s.lrs.append(float(opt.param_groups[0]["lr"]))
        device = self.model.device.type
        with torch.autocast(device, dtype=torch.float16 if device == "cuda" else torch.bfloat16, enabled=r.amp):
            logits = self.model.forward_batch(batch)
            loss = self.loss_fn(logits.float(), batch)
        opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if r.grad_clip:
            self.scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(self.model.module.parameters(), r.grad_clip)
        self.scaler.step(opt)
        self.scaler.update()
        s.steps += 1
        s.losses.append(global_mean(float(loss.detach()), self.world_size))
        if self.progress is not None:
            self.progress.step(s.steps, s.losses[-1], s.epoch)
        if self.hooks.on_step is not None and self.rank == 0:
            self.hooks.on_step(s)

    def _end_epoch(self) -> None:
        """The epoch's validation (``select_on``), then ``on_epoch`` and the progress line."""
        s, value = self.state, None
        if self.val_loader is not None:
            value = validate_epoch(self.model, self.inner, self.val_loader, str(self.recipe.select_on), s,
                                   patience=self.recipe.patience, rank=self.rank, world_size=self.world_size,
                                   evaluate=self.hooks.evaluate)
        if self.rank != 0 or (self.progress is None and self.hooks.on_epoch is None):
            return
        losses = s.losses[self.epoch_first_step:]
        self.epoch_first_step = s.steps
        pace = (time.perf_counter() - self.segment_start) / max(s.steps - self.segment_steps, 1)
        left = (self.max_steps - s.steps) * pace
        if self.recipe.max_seconds is not None:
            left = min(left, max(self.recipe.max_seconds - self.elapsed(), 0.0))
        e = EpochEnd(epoch=s.epoch, n_epochs=self.progress.n_epochs if self.progress else self.recipe.epochs,
                     steps=s.steps, max_steps=self.max_steps,
                     loss=math.fsum(losses) / len(losses) if losses else float("nan"), val=value,
                     metric=self.recipe.select_on, best_val=s.best_val if self.val_loader is not None else None,
                     best_epoch=s.best_epoch, elapsed=self.elapsed(), left=left)
        if self.progress is not None:
            self.progress.epoch(e)
        if self.hooks.on_epoch is not None:
            self.hooks.on_epoch(e)

    def close(self) -> None:
        """Unwrap DDP and stop the progress display (also after an error)."""
        self.model.module = self.inner
        if self.progress is not None:
            self.progress.close()

    def finish(self) -> TrainResult:
        """Best weights back (selection) or batch norm recalibrated; eval mode; the result."""
        from medimg_bench.datasets.check import skip_collate

        r, s = self.recipe, self.state
        selecting = self.val_fn is not None or r.select_on is not None
        if selecting and r.restore_best and s.best_state is not None:
            self.inner.load_state_dict(s.best_state)
        if r.bn_recalibration_batches and not (selecting and r.restore_best):
            plain = torch.utils.data.DataLoader(
                self.data, batch_size=self.global_bs, shuffle=True, drop_last=self.drop_last,
                num_workers=0 if r.cache else r.num_workers, collate_fn=skip_collate,
                generator=torch.Generator().manual_seed(r.seed))
            recalibrate_batchnorm(self.model, plain, max_batches=r.bn_recalibration_batches)
        self.model.eval()
        return TrainResult(steps=s.steps, epochs=s.epoch + 1, seconds=self.elapsed(), losses=s.losses,
                           best_step=s.best_step, best_val=s.best_val, best_epoch=s.best_epoch,
                           val_curve=list(s.val_curve), lrs=s.lrs)


def _training_data(dataset: Any, cache: bool) -> tuple[Any, int]:
    """Unreadable samples skipped (logged); with ``cache`` every readable sample loaded once."""
    from medimg_bench.datasets.check import SkipErrors

    data: Any = SkipErrors(dataset)
    if cache:
        data = [x for x in (data[i] for i in range(len(dataset))) if x is not None]
        if not data:
            raise ValueError("fit(): no training sample could be loaded")
    return data, len(data)


def _setup_key(r: TrainRecipe, *, max_steps: int, n: int, world_size: int) -> dict[str, Any]:
    """What a training checkpoint must match to be resumed (keys as older checkpoints wrote them)."""
    setup: dict[str, Any] = {"max_steps": max_steps, "lr": r.lr, "batch_size": r.batch_size, "seed": r.seed, "n": n,
                             "encoder_lr_scale": r.encoder_lr_scale, "world": world_size}
    milestones = list(r.lr_milestones) if r.lr_milestones is not None else None
    extra = {"optimizer": r.optimizer if r.optimizer != "adamw" else None, "lr_milestones": milestones,
             "lr_gamma": r.lr_gamma if milestones is not None else None, "select_on": r.select_on,
             "drop_last": r.drop_last}
    setup.update({k: v for k, v in extra.items() if v is not None})  # old checkpoints still resume
    return setup
