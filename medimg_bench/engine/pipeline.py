"""Compatibility alias: config-driven runs now live in :mod:`medimg_bench.runs` (the
configuration layer, above the engine). Names are forwarded on access, nothing is imported here."""

from __future__ import annotations

import importlib
from typing import Any

_MOVED = {
    "config_dir": "medimg_bench.resources",
    "compose_config": "medimg_bench.runs.compose",
    "run": "medimg_bench.runs.run",
    "run_config": "medimg_bench.runs.run",
    "build_dataset": "medimg_bench.builders",
    "_build_model": ("medimg_bench.builders", "build_model"),
    "_infer_channels": ("medimg_bench.builders", "infer_channels"),
    "check_run_dir": "medimg_bench.engine.run_dir",
}


def __getattr__(name: str) -> Any:
    target = _MOVED.get(name)
    if target is None:
        raise AttributeError(f"module 'medimg_bench.engine.pipeline' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    return getattr(importlib.import_module(module), attr)
