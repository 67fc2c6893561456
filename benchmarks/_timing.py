"""Timing helpers shared by the benchmark scripts (run as ``python benchmarks/<name>.py``, so
this folder is on ``sys.path``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_of(fn: Callable[..., Any], repeats: int = 3, *args: Any) -> float:
    """Seconds of the fastest of ``repeats`` calls ``fn(*args)`` (the least disturbed by other
    processes on a shared machine)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)
