"""medimg_bench: benchmark medical imaging models with exact metrics and resumable runs.

The top-level import is light: submodules and heavy dependencies load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY = {
    "create_dataset": "medimg_bench.registry",
    "list_datasets": "medimg_bench.registry",
    "register_dataset": "medimg_bench.registry",
    "create_model": "medimg_bench.registry",
    "list_models": "medimg_bench.registry",
    "register_model": "medimg_bench.registry",
    "create_metric": "medimg_bench.registry",
    "list_metrics": "medimg_bench.registry",
    "register_metric": "medimg_bench.registry",
    "create_task": "medimg_bench.registry",
    "list_tasks": "medimg_bench.registry",
    "register_task": "medimg_bench.registry",
    "evaluate": "medimg_bench.engine.runner",
    "Results": "medimg_bench.engine.results",
    "EvaluationFailed": "medimg_bench.engine.results",
    "collate": "medimg_bench.sample",
}
_SUBMODULES = {"datasets", "models", "metrics", "engine", "tasks", "registry", "sample", "cli"}

__all__ = sorted([*_LAZY, *_SUBMODULES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"medimg_bench.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'medimg_bench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
