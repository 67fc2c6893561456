"""Compatibility alias: ``medimg-bench sweep`` now lives in :mod:`medimg_bench.runs.sweep`."""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("medimg_bench.runs.sweep"), name)
