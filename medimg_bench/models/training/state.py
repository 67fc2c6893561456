"""What a training run carries from step to step, and its checkpoint on disk (weights,
optimiser, step, position in the epoch, RNG, best weights), written atomically and read with
``weights_only=True``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from medimg_bench._fs import atomic_path
from medimg_bench.models.base import ModelAdapter

__all__ = ["TrainState", "load_state", "save_state"]


@dataclass
class TrainState:
    """Counters, curves and the best weights so far of a training run."""

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


def save_state(path: Path, inner: torch.nn.Module, opt: torch.optim.Optimizer, scaler: Any, state: TrainState,
               setup: dict[str, Any]) -> None:
    """Write the training state to ``path`` (temporary name + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {
        "setup": setup, "model": {k: v.detach().cpu() for k, v in inner.state_dict().items()},
        "optimizer": opt.state_dict(), "scaler": scaler.state_dict(), "rng": torch.get_rng_state(),
        "steps": state.steps, "epoch": state.epoch, "batch_in_epoch": state.batch_in_epoch,
        "seconds": state.seconds, "losses": list(state.losses), "best_val": state.best_val,
        "best_step": state.best_step, "bad": state.bad, "best_state": state.best_state,
        "best_epoch": state.best_epoch, "val_curve": [list(v) for v in state.val_curve], "lrs": list(state.lrs),
    }
    with atomic_path(path, fsync=False) as tmp:
        torch.save(blob, tmp)


def load_state(path: Path, model: ModelAdapter, opt: torch.optim.Optimizer, scaler: Any,
               setup: dict[str, Any]) -> TrainState:
    """Restore model, optimiser, scaler and RNG from ``path``; a checkpoint of another setup is
    refused naming every differing field."""
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
    return TrainState(steps=blob["steps"], epoch=blob["epoch"], batch_in_epoch=blob["batch_in_epoch"],
                      seconds=blob["seconds"], losses=list(blob["losses"]), best_val=blob["best_val"],
                      best_step=blob["best_step"], bad=blob["bad"], best_state=blob["best_state"],
                      best_epoch=blob.get("best_epoch"),
                      val_curve=[(int(e), float(v)) for e, v in blob.get("val_curve", [])],
                      lrs=list(blob.get("lrs", [])))
