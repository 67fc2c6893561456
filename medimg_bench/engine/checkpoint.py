"""Evaluation checkpoints: an interrupted run resumes where it stopped.

Every ``checkpoint_every`` batches the runner writes the ids already processed, the per-sample
records, the failures and every metric's states to one file (``torch.save`` to a temporary
file, then an atomic rename). It is read back with ``torch.load(weights_only=True)``: only
tensors, strings, numbers, lists and dicts, never arbitrary objects. A checkpoint belongs to
one (dataset fingerprint, task, model, metrics) key; a mismatch is an error, not a silent
restart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from medimg_bench.metrics.base import Metric

__all__ = ["save_checkpoint", "load_checkpoint", "restore_metrics"]

VERSION = 1


def _cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, list):
        return [_cpu(v) for v in value]
    return value


def save_checkpoint(
    path: str | Path,
    *,
    key: Mapping[str, Any],
    done: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    failures: Sequence[Mapping[str, Any]],
    metrics: Mapping[str, Metric],
) -> None:
    """Write the state of a run in progress to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "version": VERSION,
        "key": dict(key),
        "done": list(done),
        "records": [dict(r) for r in records],
        "failures": [dict(f) for f in failures],
        "metrics": {name: {s: _cpu(getattr(m, s)) for s in m._defaults} for name, m in metrics.items()},
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str | Path, *, key: Mapping[str, Any]) -> dict[str, Any] | None:
    """The saved state at ``path`` (None if there is none); ``ValueError`` if it belongs to
    another run or cannot be read safely."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"checkpoint {str(path)!r} cannot be read safely: {exc}") from exc
    if state.get("version") != VERSION:
        raise ValueError(f"checkpoint {str(path)!r} has version {state.get('version')}, expected {VERSION}")
    if state["key"] != dict(key):
        diff = {k: (state["key"].get(k), v) for k, v in key.items() if state["key"].get(k) != v}
        raise ValueError(
            f"checkpoint {str(path)!r} belongs to another run (saved vs now: {diff}); "
            "delete it to start over"
        )
    return state


def restore_metrics(metrics: Mapping[str, Metric], saved: Mapping[str, Mapping[str, Any]], device: torch.device) -> None:
    """Put saved states back into freshly built metrics (tensors moved to ``device``)."""
    for name, metric in metrics.items():
        for state, value in saved[name].items():
            if isinstance(value, torch.Tensor):
                value = value.to(device)
            elif isinstance(value, list):
                value = [v.to(device) if isinstance(v, torch.Tensor) else v for v in value]
            setattr(metric, state, value)
