"""The options of one evaluation in one typed object, and the parsing of the ones given as text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["EvalOptions", "parse_shard", "resolve_device"]


def parse_shard(shard: str | Sequence[int] | None) -> tuple[int, int] | None:
    """``"i/n"`` (or ``(i, n)``) → ``(i, n)`` with ``0 <= i < n``; ``ValueError`` otherwise."""
    if shard is None or shard == "":
        return None
    if isinstance(shard, str):
        parts = shard.split("/")
        try:
            if len(parts) != 2:
                raise ValueError
            i, n = int(parts[0]), int(parts[1])
        except ValueError:
            raise ValueError(f"shard={shard!r}: expected 'i/n' with integers, 0 <= i < n "
                             "(e.g. shard=0/3, shard=1/3, shard=2/3)") from None
    else:
        i, n = (int(x) for x in shard)
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard={i}/{n}: the shard index must satisfy 0 <= i < n "
                         f"(for n={n}: 0..{max(n - 1, 0)}); shards are numbered from 0")
    return i, n


def resolve_device(device: Any = "auto") -> Any:
    """``"auto"``/None → CUDA if available, else CPU; anything else is passed to ``torch.device``."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass(frozen=True)
class EvalOptions:
    """Everything :func:`~medimg_bench.engine.runner.evaluate` takes besides the model, the data,
    the task and the metrics (its keywords of the same names; see its docstring).

    Given as text or lists, ``shard`` is parsed to ``(i, n)``, ``subgroups`` becomes a tuple and
    ``checkpoint`` a :class:`~pathlib.Path`, so a bad shard fails here, before anything runs."""

    batch_size: int = 1
    num_workers: int = 0
    device: Any = "auto"
    amp: bool = False
    fail_fast: bool = False
    progress: bool = True
    # bootstrap of the summary's intervals (clustered by patient)
    n_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0
    name: str | None = None
    subgroups: tuple[str, ...] = ()
    # checkpointing: a directory, how many batches and how many seconds at least between saves
    checkpoint: Path | None = None
    checkpoint_every: int = 20
    checkpoint_interval_s: float = 0.0
    shard: tuple[int, int] | None = None
    #: a resumed run predicts its failed samples again (a finished run's, see docs/scale.md)
    retry_failed: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        set_(self, "shard", parse_shard(self.shard))  # type: ignore[arg-type]
        set_(self, "subgroups", tuple(self.subgroups or ()))
        if self.checkpoint is not None:
            set_(self, "checkpoint", Path(self.checkpoint))
        if int(self.batch_size) < 1:
            raise ValueError(f"batch_size={self.batch_size}: must be at least 1")

    @property
    def bootstrap(self) -> dict[str, Any]:
        """The bootstrap settings as ``summarize`` takes them."""
        return {"n_resamples": self.n_resamples, "confidence": self.confidence, "seed": self.seed}

    @classmethod
    def names(cls) -> list[str]:
        """The option names (the keywords of ``evaluate`` beyond model, dataset, task, metrics)."""
        return [f.name for f in fields(cls)]
