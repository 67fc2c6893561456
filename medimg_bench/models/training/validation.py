"""Validation during training: the value that selects weights, keeping the best, early stop."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter
from medimg_bench.models.training.ddp import broadcast_value
from medimg_bench.models.training.recipe import SELECT_ON
from medimg_bench.models.training.state import TrainState

__all__ = ["evaluate_metric", "keep_if_best", "selection_metric", "validate_epoch", "validate_with"]


def validate_with(model: ModelAdapter, inner: torch.nn.Module, val_fn: Callable[[ModelAdapter], float],
                  state: TrainState, patience: int | None) -> None:
    """``val_fn(model)`` on the unwrapped module in eval mode; keeps the weights if best."""
    wrapped = model.module
    model.module = inner
    try:
        model.eval()
        with torch.no_grad():
            value = float(val_fn(model))
    finally:
        model.module = wrapped
    keep_if_best(value, inner, state, patience)


def keep_if_best(value: float, inner: torch.nn.Module, state: TrainState, patience: int | None) -> bool:
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


def validate_epoch(model: ModelAdapter, inner: torch.nn.Module, loader: Any, metric: str, state: TrainState, *,
                   patience: int | None, rank: int, world_size: int,
                   evaluate: Callable[[ModelAdapter, Any, str], float]) -> float:
    """End of an epoch with ``select_on``: rank 0 evaluates ``metric`` on the validation loader
    (the unwrapped module, eval mode) with rank 0's buffers on every rank; every rank receives the
    value and keeps the same epoch (identical weights). Returns the value."""
    if world_size > 1:  # the last forward left each rank's own batch-norm statistics: take rank 0's
        import torch.distributed as dist

        for buf in inner.buffers():
            dist.broadcast(buf.data, src=0)
    value = float("nan")
    if rank == 0:
        wrapped = model.module
        model.module = inner
        try:
            model.eval()
            value = evaluate(model, loader, metric)
        finally:
            model.module = wrapped
    value = broadcast_value(value, world_size)
    state.val_curve.append((state.epoch, value))
    if keep_if_best(value, inner, state, patience):
        state.best_epoch = state.epoch
    model.train()
    return value


def evaluate_metric(model: ModelAdapter, loader: Any, metric: str) -> float:
    """``metric`` (see :func:`selection_metric`) of the model's probabilities over ``loader``."""
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
    raise ValueError(f"selection_metric: metric={metric!r}; expected one of {SELECT_ON}")
