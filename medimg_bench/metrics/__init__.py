"""Metrics: functional forms (``medimg_bench.metrics.dice(pred, target, ...)``) and stateful forms
(``update``/``compute``/``reset``) registered by name for the engine.

Submodules are imported on first attribute access, so ``import medimg_bench.metrics`` is cheap;
every public name listed in a submodule's ``__all__`` is available here.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from typing import Any

_INDEX: dict[str, str] | None = None


def _index() -> dict[str, str]:
    global _INDEX
    if _INDEX is None:
        index: dict[str, str] = {}
        # subpackages too (metrics/text/...), so a new module is found wherever it lives
        for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            mod = importlib.import_module(info.name)
            for public in getattr(mod, "__all__", ()):
                index.setdefault(public, mod.__name__)
        _INDEX = index
    return _INDEX


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a submodule: no index needed
        return importlib.import_module(f"{__name__}.{name}")
    module = _index().get(name)
    if module is None:
        raise AttributeError(f"module 'medimg_bench.metrics' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_index()))
