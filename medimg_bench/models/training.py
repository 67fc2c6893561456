"""Training protocols: a short supervised fine-tune used by the demo and by ``train.enabled``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter

__all__ = ["TrainResult", "fit", "recalibrate_batchnorm"]


@dataclass
class TrainResult:
    """What a training run did: steps, epochs, wall time (s), the loss curve and, with validation,
    the best step and its validation value."""

    steps: int
    epochs: int
    seconds: float
    losses: list[float]
    best_step: int | None = None
    best_val: float | None = None

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
) -> TrainResult:
    """Train ``model`` with AdamW until ``max_steps`` or ``max_seconds`` (wall clock) is reached.

    Schedule: linear warm-up over ``warmup_steps`` (default min(20, max_steps // 10)) then cosine
    decay; the head (``get_classifier()`` of timm models, else the last ``Linear``) trains at
    ``lr`` and the rest (the encoder) at ``lr * encoder_lr_scale``. ``grad_clip`` clips the
    global gradient norm. ``val_fn(model) -> float`` (higher is better) runs every ``val_every``
    steps: the best weights are kept (restored at the end with ``restore_best``) and training
    stops after ``patience`` validations without improvement. ``amp``: bf16 autocast on CPU,
    fp16 with a gradient scaler on CUDA. ``deterministic`` asks torch for deterministic kernels.

    Data order is a seeded permutation per epoch, so ``checkpoint_dir`` (a training state written
    atomically every ``checkpoint_every`` steps: weights, optimizer, step, position in the epoch,
    RNG, best weights) resumes to the same result as an uninterrupted run.

    Under ``torchrun`` (an initialised process group with more than one rank, or
    ``distributed=True``) the model is wrapped in ``DistributedDataParallel``: every global
    batch of ``batch_size`` samples is split evenly across ranks (``batch_size`` must divide by
    the world size), gradients are averaged, the loss logged is the global mean, so the loss
    curve matches one process with the same global batch; only rank 0 writes checkpoints.

    ``cache=True`` loads every training sample once and keeps it in memory (small datasets
    only). Unreadable training samples are skipped with a logged warning and a count (see
    :class:`medimg_bench.datasets.check.SkipErrors`), not fatal.
    After training, batch-norm running statistics are recomputed over up to
    ``bn_recalibration_batches`` training batches (0 disables): after a short run at a high
    learning rate the exponential running averages lag the final weights, and evaluation-mode
    outputs are badly calibrated without this.
    Returns a :class:`TrainResult` (``best_step``/``best_val`` when ``val_fn`` is given); the
    model is left in eval mode.
    """
    if len(dataset) == 0:
        raise ValueError("fit(): the training dataset is empty")
    from medimg_bench.datasets.check import SkipErrors, skip_collate

    previous = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
                torch.backends.cudnn.benchmark)
    if deterministic:  # restored when fit returns
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    torch.manual_seed(seed)
    rank, world = _world() if distributed is not False else (0, 1)
    if batch_size % world:
        raise ValueError(f"fit(): batch_size={batch_size} must divide by the {world} ranks (one global batch)")
    data: Any = SkipErrors(dataset)
    if cache:
        data = [s for s in (data[i] for i in range(len(dataset))) if s is not None]
        if not data:
            raise ValueError("fit(): no training sample could be loaded")
    n = len(data)
    global_bs = min(batch_size, n)
    drop_last = n > batch_size
    groups = _param_groups(model, encoder_lr_scale)
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)
    use_scaler = amp and model.device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_scaler)
    amp_dtype = torch.float16 if model.device.type == "cuda" else torch.bfloat16
    state = _TrainState()
    ckpt = Path(checkpoint_dir) / "train_state.pt" if checkpoint_dir else None
    setup = {"max_steps": max_steps, "lr": lr, "batch_size": batch_size, "seed": seed, "n": n,
             "encoder_lr_scale": encoder_lr_scale, "world": world}
    if ckpt is not None and ckpt.exists():
        state = _load_state(ckpt, model, opt, scaler, setup)
    inner = model.module
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        ids = [model.device.index] if model.device.type == "cuda" else None
        model.module = DistributedDataParallel(inner, device_ids=ids)
    model.train()
    start = time.perf_counter() - state.seconds
    bar = _progress(progress and rank == 0, max_steps, max_seconds)
    warm = warmup_steps if warmup_steps is not None else max(1, min(20, max_steps // 10))
    try:
        while state.steps < max_steps and not state.stopped:
            sampler = _EpochBatches(n, global_bs, seed=seed, epoch=state.epoch, start=state.batch_in_epoch,
                                    rank=rank, world=world, drop_last=drop_last)
            loader = torch.utils.data.DataLoader(data, batch_sampler=sampler, num_workers=0 if cache else num_workers,
                                                 collate_fn=skip_collate)
            if state.batch_in_epoch == 0 and state.epoch > 0 and state.steps == 0:
                raise ValueError("fit(): no training sample could be loaded")
            for batch in loader:
                state.batch_in_epoch += 1
                if batch is None:  # every sample of this batch was unreadable
                    continue
                _set_lr(opt, lr, state.steps, max_steps, time.perf_counter() - start, max_seconds, warmup=warm)
                with torch.autocast(model.device.type, dtype=amp_dtype, enabled=amp):
                    logits = model.forward_batch(batch)
                    loss = loss_fn(logits.float(), batch)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                if grad_clip:
                    scaler.unscale_(opt)
                    torch.nn.utils.clip_grad_norm_(model.module.parameters(), grad_clip)
                scaler.step(opt)
                scaler.update()
                state.steps += 1
                state.losses.append(_global_mean(float(loss.detach()), world))
                if bar is not None:
                    bar.update(state.steps, state.losses[-1], time.perf_counter() - start)
                if val_fn is not None and (state.steps % val_every == 0 or state.steps == max_steps):
                    _validate(model, inner, val_fn, state, patience)
                    model.train()
                if ckpt is not None and rank == 0 and (state.steps % checkpoint_every == 0):
                    state.seconds = time.perf_counter() - start
                    _save_state(ckpt, inner, opt, scaler, state, setup)
                if state.stopped or state.steps >= max_steps or (
                    max_seconds is not None and time.perf_counter() - start > max_seconds
                ):
                    break
            else:
                state.epoch += 1
                state.batch_in_epoch = 0
                continue
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                break
            if state.steps >= max_steps or state.stopped:
                break
    finally:
        model.module = inner
        if bar is not None:
            bar.close()
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.backends.cudnn.benchmark = previous[2]
    if val_fn is not None and restore_best and state.best_state is not None:
        inner.load_state_dict(state.best_state)
    if bn_recalibration_batches and not (val_fn is not None and restore_best):
        plain = torch.utils.data.DataLoader(
            data, batch_size=global_bs, shuffle=True, drop_last=drop_last, num_workers=0 if cache else num_workers,
            collate_fn=skip_collate, generator=torch.Generator().manual_seed(seed))
        recalibrate_batchnorm(model, plain, max_batches=bn_recalibration_batches)
    model.eval()
    return TrainResult(steps=state.steps, epochs=state.epoch + 1, seconds=time.perf_counter() - start,
                       losses=state.losses, best_step=state.best_step, best_val=state.best_val)


@dataclass
class _TrainState:
    steps: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    best_val: float | None = None
    best_step: int | None = None
    bad: int = 0
    stopped: bool = False
    best_state: dict[str, torch.Tensor] | None = None


class _EpochBatches(torch.utils.data.Sampler[list[int]]):
    """Global batches of a seeded permutation for one epoch (from batch ``start``); under DDP
    each rank yields its contiguous slice of every global batch."""

    def __init__(self, n: int, batch_size: int, *, seed: int, epoch: int, start: int, rank: int, world: int,
                 drop_last: bool) -> None:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        self.perm = torch.randperm(n, generator=g).tolist()
        self.bs, self.start, self.rank, self.world = batch_size, start, rank, world
        n_batches = n // batch_size if drop_last else -(-n // batch_size)
        self.n_batches = n_batches

    def __iter__(self) -> Any:
        for b in range(self.start, self.n_batches):
            batch = self.perm[b * self.bs:(b + 1) * self.bs]
            per = -(-len(batch) // self.world)
            yield batch[self.rank * per:(self.rank + 1) * per]

    def __len__(self) -> int:
        return max(0, self.n_batches - self.start)


def _world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _global_mean(value: float, world: int) -> float:
    if world == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return float(t.item()) / world


def _head_module(module: torch.nn.Module) -> torch.nn.Module | None:
    getter = getattr(module, "get_classifier", None)
    if callable(getter):
        head = getter()
        if isinstance(head, torch.nn.Module) and any(True for _ in head.parameters()):
            return head
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return linears[-1] if linears else None


def _param_groups(model: ModelAdapter, encoder_lr_scale: float) -> list[dict[str, Any]]:
    """The head at scale 1, every other trainable parameter at ``encoder_lr_scale``."""
    params = [p for p in model.module.parameters() if p.requires_grad]
    if encoder_lr_scale == 1.0:
        return [{"params": params, "lr_scale": 1.0}]
    head = _head_module(model.module)
    head_ids = {id(p) for p in head.parameters()} if head is not None else set()
    if not head_ids:
        raise ValueError("fit(): encoder_lr_scale needs a head (get_classifier() or a Linear layer) to tell "
                         "encoder from head")
    groups = [{"params": [p for p in params if id(p) in head_ids], "lr_scale": 1.0}]
    rest = [p for p in params if id(p) not in head_ids]
    if rest:
        groups.append({"params": rest, "lr_scale": float(encoder_lr_scale)})
    return groups


def _validate(model: ModelAdapter, inner: torch.nn.Module, val_fn: Callable[[ModelAdapter], float],
              state: _TrainState, patience: int | None) -> None:
    wrapped = model.module
    model.module = inner
    try:
        model.eval()
        with torch.no_grad():
            value = float(val_fn(model))
    finally:
        model.module = wrapped
    if state.best_val is None or value > state.best_val:
        state.best_val, state.best_step, state.bad = value, state.steps, 0
        state.best_state = {k: v.detach().to("cpu", copy=True) for k, v in inner.state_dict().items()}
    else:
        state.bad += 1
        if patience is not None and state.bad >= patience:
            state.stopped = True


def _save_state(path: Path, inner: torch.nn.Module, opt: torch.optim.Optimizer, scaler: Any, state: _TrainState,
                setup: dict[str, Any]) -> None:
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {
        "setup": setup, "model": {k: v.detach().cpu() for k, v in inner.state_dict().items()},
        "optimizer": opt.state_dict(), "scaler": scaler.state_dict(), "rng": torch.get_rng_state(),
        "steps": state.steps, "epoch": state.epoch, "batch_in_epoch": state.batch_in_epoch,
        "seconds": state.seconds, "losses": list(state.losses), "best_val": state.best_val,
        "best_step": state.best_step, "bad": state.bad, "best_state": state.best_state,
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def _load_state(path: Path, model: ModelAdapter, opt: torch.optim.Optimizer, scaler: Any,
                setup: dict[str, Any]) -> _TrainState:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    saved = blob.get("setup", {})
    diffs = [f"{k}: saved {saved.get(k)!r}, now {v!r}" for k, v in setup.items() if saved.get(k) != v]
    if diffs:
        raise ValueError(f"training checkpoint {str(path)!r} is from another setup ({'; '.join(diffs)}); "
                         "delete it or use another checkpoint directory")
    model.module.load_state_dict(blob["model"])
    opt.load_state_dict(blob["optimizer"])
    if blob.get("scaler"):
        scaler.load_state_dict(blob["scaler"])
    torch.set_rng_state(blob["rng"])
    return _TrainState(steps=blob["steps"], epoch=blob["epoch"], batch_in_epoch=blob["batch_in_epoch"],
                       seconds=blob["seconds"], losses=list(blob["losses"]), best_val=blob["best_val"],
                       best_step=blob["best_step"], bad=blob["bad"], best_state=blob["best_state"])


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
    opt: torch.optim.Optimizer, base: float, step: int, max_steps: int, elapsed: float, max_seconds: float | None,
    *, warmup: int | None = None,
) -> None:
    """Linear warm-up then cosine decay over the budget actually available: the schedule follows
    whichever of steps or wall time runs out first, so a time-capped run still anneals."""
    progress = step / max(max_steps, 1)
    if max_seconds:
        progress = max(progress, elapsed / max_seconds)
    progress = min(progress, 1.0)
    n_warm = warmup if warmup is not None else max(1, min(20, max_steps // 10))
    warm = min(1.0, (step + 1) / max(1, n_warm))
    for group in opt.param_groups:
        group["lr"] = base * group.get("lr_scale", 1.0) * warm * 0.5 * (1 + math.cos(math.pi * progress))


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
