"""What a user waiting for a training run sees: epoch n of N, the training loss, the epoch's
validation value and the best so far with its epoch, and the time left. On a terminal a live
bar (and one line per epoch above it); in a log (not a terminal) one line per epoch."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["EpochEnd", "TrainProgress", "format_duration"]

_QUIET_S = 10.0  # without per-epoch validation, at most one epoch line per this many seconds


@dataclass(frozen=True)
class EpochEnd:
    """One finished epoch (``epoch`` counted from 0, as in ``TrainResult.val_curve``)."""

    epoch: int
    n_epochs: int | None
    steps: int
    max_steps: int
    loss: float
    val: float | None
    metric: str | None
    best_val: float | None
    best_epoch: int | None
    elapsed: float
    left: float | None


def format_duration(seconds: float | None) -> str:
    """``h:mm:ss`` (``?`` when unknown)."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def epoch_line(e: EpochEnd) -> str:
    """``epoch 3/100  step 15/500  loss 0.4123  val auroc 0.8120  best 0.8450 (epoch 2)
    0:01:23 elapsed, ~0:19:02 left`` (epochs counted from 1)."""
    total = f"/{e.n_epochs}" if e.n_epochs else ""
    parts = [f"epoch {e.epoch + 1}{total}", f"step {e.steps}/{e.max_steps}", f"loss {e.loss:.4f}"]
    if e.val is not None:
        parts.append(f"val {e.metric} {e.val:.4f}")
    if e.best_val is not None and e.best_epoch is not None:
        parts.append(f"best {e.best_val:.4f} (epoch {e.best_epoch + 1})")
    parts.append(f"{format_duration(e.elapsed)} elapsed, ~{format_duration(e.left)} left")
    return "  ".join(parts)


class TrainProgress:
    """Progress of one run; ``live`` (default: stdout is a terminal) picks the rich bar."""

    def __init__(self, *, max_steps: int, n_epochs: int | None, every_epoch: bool, live: bool | None = None,
                 stream: Any = None) -> None:
        self.max_steps, self.n_epochs, self.every_epoch = max_steps, n_epochs, every_epoch
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self._last_line = time.monotonic()
        self._bar: Any = None
        if self.live:
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("train {task.fields[epoch]}"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
                TextColumn("loss {task.fields[loss]:.4f}"), TextColumn("{task.fields[val]}"), TimeElapsedColumn(),
                TextColumn("left"), TimeRemainingColumn(), transient=False,
            )
            self._task = self._bar.add_task("train", total=max_steps, loss=float("nan"), val="",
                                            epoch=self._epoch_text(0))
            self._bar.start()

    def _epoch_text(self, epoch: int) -> str:
        return f"epoch {epoch + 1}" + (f"/{self.n_epochs}" if self.n_epochs else "")

    def step(self, steps: int, loss: float, epoch: int) -> None:
        """After every optimiser step."""
        if self._bar is not None:
            self._bar.update(self._task, completed=steps, loss=loss, epoch=self._epoch_text(epoch))

    def epoch(self, e: EpochEnd) -> None:
        """After every finished epoch: a line when validated, when it is the last, or when
        ``_QUIET_S`` passed since the previous line."""
        if self._bar is not None and e.best_val is not None:
            best = f"best {e.best_val:.4f} (epoch {e.best_epoch + 1})" if e.best_epoch is not None else ""
            self._bar.update(self._task, val=(f"val {e.val:.4f} " if e.val is not None else "") + best)
        now = time.monotonic()
        last = e.steps >= e.max_steps or (e.n_epochs is not None and e.epoch + 1 >= e.n_epochs)
        if not (self.every_epoch or last or now - self._last_line >= _QUIET_S):
            return
        self._last_line = now
        if self._bar is not None:
            self._bar.console.print(epoch_line(e))
        else:
            print(epoch_line(e), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
