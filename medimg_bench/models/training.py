"""Training protocols: a short supervised fine-tune used by the demo and by ``train.enabled``."""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter

__all__ = ["TrainResult", "fit", "fit_config_options", "recalibrate_batchnorm", "selection_metric"]

_OPTIMIZERS = ("adamw", "adam", "sgd")
_SELECT_ON = ("auroc", "accuracy")


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
    """Train ``model`` with AdamW (or ``optimizer``) until ``max_steps`` (or ``epochs``) or
    ``max_seconds`` (wall clock) is reached.

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

    Epoch-based recipes (e.g. MedMNIST v2: Adam, lr 1e-3, x0.1 at epochs 50 and 75, 100 epochs,
    best validation AUC):

    * ``optimizer``: ``"adamw"`` (default), ``"adam"`` (``weight_decay`` as an L2 term) or
      ``"sgd"`` (with ``momentum``).
    * ``epochs``: train this many whole epochs (``max_steps`` becomes ``epochs`` x batches per
      epoch). ``drop_last``: drop the incomplete last batch of an epoch (default: drop it when
      the dataset is larger than one batch, as before; ``False`` keeps it, as a plain
      ``DataLoader(shuffle=True)`` does).
    * ``lr_milestones`` (epochs, counted from 0): the learning rate is ``lr`` times ``lr_gamma``
      to the number of milestones <= the current epoch, i.e. ``torch.optim.lr_scheduler.MultiStepLR``
      stepped once per epoch; no cosine decay and no warm-up (unless ``warmup_steps`` is given).
    * ``select_on`` (``"auroc"``: macro one-vs-rest AUROC, ``"accuracy"``: argmax, or 0.5 per
      label for multi-label models) with ``val_dataset``: evaluated after every epoch; the weights
      of the best epoch (ties: the earliest) are restored at the end (``restore_best``), and
      ``val_curve``/``best_epoch`` record it. ``patience`` counts these epochs. Under DDP rank 0
      evaluates and broadcasts the value, so every rank keeps the same epoch. No batch-norm
      recalibration follows (the kept weights are the ones that were validated).
    Returns a :class:`TrainResult` (``best_step``/``best_val`` when ``val_fn`` or ``select_on``
    is given); the model is left in eval mode.
    """
    if len(dataset) == 0:
        raise ValueError("fit(): the training dataset is empty")
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"fit(): optimizer={optimizer!r}; expected one of {_OPTIMIZERS}")
    if select_on is not None:
        if select_on not in _SELECT_ON:
            raise ValueError(f"fit(): select_on={select_on!r}; expected one of {_SELECT_ON}")
        if val_dataset is None:
            raise ValueError("fit(): select_on needs val_dataset")
        if val_fn is not None:
            raise ValueError("fit(): give either val_fn (every val_every steps) or select_on (every epoch)")
    milestones = sorted(int(m) for m in lr_milestones) if lr_milestones is not None else None
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
    drop_arg = drop_last
    drop_last = n > batch_size if drop_last is None else bool(drop_last) and n > batch_size
    if epochs is not None:
        max_steps = int(epochs) * _EpochBatches(n, global_bs, seed=seed, epoch=0, start=0, rank=rank, world=world,
                                                drop_last=drop_last).n_batches
    groups = _param_groups(model, encoder_lr_scale)
    opt = _optimizer(optimizer, groups, lr=lr, weight_decay=weight_decay, momentum=momentum)
    use_scaler = amp and model.device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=use_scaler)
    amp_dtype = torch.float16 if model.device.type == "cuda" else torch.bfloat16
    state = _TrainState()
    ckpt = Path(checkpoint_dir) / "train_state.pt" if checkpoint_dir else None
    setup = {"max_steps": max_steps, "lr": lr, "batch_size": batch_size, "seed": seed, "n": n,
             "encoder_lr_scale": encoder_lr_scale, "world": world}
    recipe = {"optimizer": optimizer if optimizer != "adamw" else None, "lr_milestones": milestones,
              "lr_gamma": lr_gamma if milestones is not None else None, "select_on": select_on,
              "drop_last": drop_arg}
    setup.update({k: v for k, v in recipe.items() if v is not None})  # old checkpoints still resume
    val_loader = None
    if select_on is not None:
        val_loader = torch.utils.data.DataLoader(SkipErrors(val_dataset), batch_size=val_batch_size or batch_size,
                                                 num_workers=num_workers, collate_fn=skip_collate)
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
    if milestones is not None and warmup_steps is None:
        warm = 0
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
                epoch_end = state.batch_in_epoch >= sampler.n_batches
                if batch is None:  # every sample of this batch was unreadable
                    if epoch_end and val_loader is not None:
                        _validate_epoch(model, inner, val_loader, select_on, state, patience, rank, world)
                    continue
                if milestones is not None:
                    _set_multistep_lr(opt, lr, state.epoch, milestones, lr_gamma, step=state.steps, warmup=warm)
                else:
                    _set_lr(opt, lr, state.steps, max_steps, time.perf_counter() - start, max_seconds, warmup=warm)
                state.lrs.append(float(opt.param_groups[0]["lr"]))
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
                if epoch_end and val_loader is not None:
                    _validate_epoch(model, inner, val_loader, select_on, state, patience, rank, world)
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
    selecting = val_fn is not None or select_on is not None
    if selecting and restore_best and state.best_state is not None:
        inner.load_state_dict(state.best_state)
    if bn_recalibration_batches and not (selecting and restore_best):
        plain = torch.utils.data.DataLoader(
            data, batch_size=global_bs, shuffle=True, drop_last=drop_last, num_workers=0 if cache else num_workers,
            collate_fn=skip_collate, generator=torch.Generator().manual_seed(seed))
        recalibrate_batchnorm(model, plain, max_batches=bn_recalibration_batches)
    model.eval()
    return TrainResult(steps=state.steps, epochs=state.epoch + 1, seconds=time.perf_counter() - start,
                       losses=state.losses, best_step=state.best_step, best_val=state.best_val,
                       best_epoch=state.best_epoch, val_curve=list(state.val_curve), lrs=state.lrs)


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
    best_epoch: int | None = None
    val_curve: list[tuple[int, float]] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)


class _EpochBatches(torch.utils.data.Sampler[list[int]]):
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


def _optimizer(name: str, groups: list[dict[str, Any]], *, lr: float, weight_decay: float,
               momentum: float) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, weight_decay=weight_decay)
    return torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)


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
    _keep_if_best(value, inner, state, patience)


def _keep_if_best(value: float, inner: torch.nn.Module, state: _TrainState, patience: int | None) -> bool:
    """Strictly better (ties keep the earlier weights; NaN is worse than any number)."""
    best = state.best_val
    if best is None or (not math.isnan(value) and (math.isnan(best) or value > best)):
        state.best_val, state.best_step, state.bad = value, state.steps, 0
        state.best_state = {k: v.detach().to("cpu", copy=True) for k, v in inner.state_dict().items()}
        return True
    state.bad += 1
    if patience is not None and state.bad >= patience:
        state.stopped = True
    return False


def _validate_epoch(model: ModelAdapter, inner: torch.nn.Module, loader: Any, metric: str | None,
                    state: _TrainState, patience: int | None, rank: int, world: int) -> None:
    """End of an epoch with ``select_on``: rank 0 evaluates ``metric`` on the validation loader
    (the unwrapped module, eval mode) with rank 0's buffers on every rank; every rank receives the
    value and keeps the same epoch (identical weights)."""
    if world > 1:  # the last forward left each rank's own batch-norm statistics: take rank 0's
        import torch.distributed as dist

        for buf in inner.buffers():
            dist.broadcast(buf.data, src=0)
    value = float("nan")
    if rank == 0:
        wrapped = model.module
        model.module = inner
        try:
            model.eval()
            value = _evaluate_metric(model, loader, str(metric))
        finally:
            model.module = wrapped
    value = _broadcast_value(value, world)
    state.val_curve.append((state.epoch, value))
    if _keep_if_best(value, inner, state, patience):
        state.best_epoch = state.epoch
    model.train()


def _broadcast_value(value: float, world: int) -> float:
    if world == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.broadcast(t, src=0)
    return float(t.item())


def _evaluate_metric(model: ModelAdapter, loader: Any, metric: str) -> float:
    probs, labels = [], []
    with torch.no_grad():
        for batch in loader:
            if batch is None:  # unreadable validation samples are skipped (logged)
                continue
            out = model.predict(batch)
            probs.append(out["probs"].detach().float().cpu())
            labels.append(torch.as_tensor(batch["label"]).cpu())
    if not probs:
        raise ValueError("fit(): no validation sample could be loaded")
    multilabel = model.prediction_options().get("multilabel")
    return selection_metric(torch.cat(probs), torch.cat(labels), metric,
                            multilabel=None if multilabel is None else bool(multilabel))


def selection_metric(probs: torch.Tensor, labels: torch.Tensor, metric: str, *,
                     multilabel: bool | None = None) -> float:
    """The validation value used by ``fit(select_on=...)`` (higher is better).

    ``probs`` ``(N, K)``; ``labels`` class indices ``(N,)``/``(N, 1)`` or multi-hot ``(N, K)``
    (NaN = unlabelled, ignored). ``"auroc"``: mean over classes of the one-vs-rest AUROC (classes
    with one label value only are left out), which for two softmax classes equals the AUROC of
    the positive class, as the MedMNIST evaluator computes it. ``"accuracy"``: argmax
    (multi-class) or the fraction of labels right at 0.5 (multi-label). ``multilabel`` defaults
    to whether the labels have the shape of ``probs``."""
    from medimg_bench.metrics.classification import macro_rank_auroc

    probs = probs.float()
    n, k = probs.shape
    if multilabel is None:
        multilabel = labels.dim() == 2 and tuple(labels.shape) == (n, k) and k > 1
    if multilabel:
        y = labels.reshape(n, k).float()
    else:
        idx = labels.reshape(n).float()
        y = (idx[:, None] == torch.arange(k, dtype=torch.float32)[None, :]).float()
        y[idx.isnan()] = float("nan")
    if metric == "auroc":
        return macro_rank_auroc(probs, y)
    if metric == "accuracy":
        if multilabel:
            known = ~y.isnan()
            return float(((probs >= 0.5).float() == y)[known].float().mean()) if known.any() else float("nan")
        ok = ~idx.isnan()
        return float((probs[ok].argmax(1) == idx[ok].long()).float().mean()) if ok.any() else float("nan")
    raise ValueError(f"selection_metric: metric={metric!r}; expected one of {_SELECT_ON}")


def fit_config_options(tcfg: Any) -> dict[str, Any]:
    """The recipe options of a ``train`` config node (``optimizer``, ``momentum``, ``epochs``,
    ``drop_last``, ``lr_milestones``, ``lr_gamma``, ``select_on``) as ``fit`` keyword arguments;
    keys absent or null are left out, so ``fit``'s defaults apply."""
    out: dict[str, Any] = {}
    conv: dict[str, Callable[[Any], Any]] = {
        "optimizer": lambda v: str(v).lower(), "momentum": float, "epochs": int, "drop_last": bool,
        "lr_milestones": lambda v: [int(m) for m in v], "lr_gamma": float, "select_on": str,
    }
    for key, f in conv.items():
        v = tcfg.get(key)
        if v is not None:
            out[key] = f(v)
    return out


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
        "best_epoch": state.best_epoch, "val_curve": [list(v) for v in state.val_curve], "lrs": list(state.lrs),
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
                       best_step=blob["best_step"], bad=blob["bad"], best_state=blob["best_state"],
                       best_epoch=blob.get("best_epoch"),
                       val_curve=[(int(e), float(v)) for e, v in blob.get("val_curve", [])],
                       lrs=list(blob.get("lrs", [])))


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


def _set_multistep_lr(opt: torch.optim.Optimizer, base: float, epoch: int, milestones: list[int], gamma: float,
                      *, step: int = 0, warmup: int = 0) -> None:
    """``MultiStepLR`` stepped once per epoch: ``base * gamma ** (milestones <= epoch)``, times
    an optional linear warm-up over the first ``warmup`` steps."""
    factor = gamma ** bisect.bisect_right(milestones, epoch)
    warm = min(1.0, (step + 1) / warmup) if warmup else 1.0
    for group in opt.param_groups:
        group["lr"] = base * group.get("lr_scale", 1.0) * factor * warm


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
