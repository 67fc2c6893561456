"""Datasets: manifest-backed loaders for public datasets, readers and synthetic phantoms.

``create(name, root, split=..., **options)`` builds a registered dataset; ``list_datasets()``
names them. Loader modules are imported on first lookup.
"""

from __future__ import annotations

from typing import Any

from medimg_bench.registry import DATASETS, list_datasets, register_dataset

__all__ = ["create", "list_datasets", "register_dataset", "DATASETS"]


def create(name: str, root: Any = None, /, **options: Any) -> Any:
    """Build the dataset registered as ``name``; ``root`` is its directory (if it has one)."""
    if root is not None:
        options["root"] = root
    return DATASETS.create(name, **options)
