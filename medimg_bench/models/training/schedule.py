"""Learning-rate schedules, set on the optimiser before every step."""

from __future__ import annotations

import bisect
import math

import torch

__all__ = ["default_warmup", "set_cosine_lr", "set_multistep_lr"]


def default_warmup(max_steps: int) -> int:
    """Warm-up steps when none are given: min(20, max_steps // 10), at least 1."""
    return max(1, min(20, max_steps // 10))


def set_cosine_lr(
    opt: torch.optim.Optimizer, base: float, step: int, max_steps: int, elapsed: float, max_seconds: float | None,
    *, warmup: int | None = None,
) -> None:
    """Linear warm-up then cosine decay over the budget actually available: the schedule follows
    whichever of steps or wall time runs out first, so a time-capped run still anneals."""
    progress = step / max(max_steps, 1)
    if max_seconds:
        progress = max(progress, elapsed / max_seconds)
    progress = min(progress, 1.0)
    n_warm = warmup if warmup is not None else default_warmup(max_steps)
    warm = min(1.0, (step + 1) / max(1, n_warm))
    for group in opt.param_groups:
        group["lr"] = base * group.get("lr_scale", 1.0) * warm * 0.5 * (1 + math.cos(math.pi * progress))


def set_multistep_lr(opt: torch.optim.Optimizer, base: float, epoch: int, milestones: list[int], gamma: float,
                     *, step: int = 0, warmup: int = 0) -> None:
    """``MultiStepLR`` stepped once per epoch: ``base * gamma ** (milestones <= epoch)``, times
    an optional linear warm-up over the first ``warmup`` steps."""
    factor = gamma ** bisect.bisect_right(milestones, epoch)
    warm = min(1.0, (step + 1) / warmup) if warmup else 1.0
    for group in opt.param_groups:
        group["lr"] = base * group.get("lr_scale", 1.0) * factor * warm
