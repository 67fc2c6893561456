"""Datasets: manifest-backed loaders for public datasets, readers and synthetic phantoms.

``create(name, root, split=..., **options)`` builds a registered dataset; ``list_datasets()``
names them. Loader modules are imported on first lookup.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from medimg_bench.registry import DATASETS, list_datasets, register_dataset

__all__ = ["create", "list_datasets", "register_dataset", "DATASETS"]

log = logging.getLogger(__name__)


def create(name: str, root: Any = None, /, *, on_error: str = "raise", **options: Any) -> Any:
    """Build the dataset registered as ``name``; ``root`` is its directory (if it has one).

    ``on_error="skip"`` drops manifest rows that the loader rejects or whose files are missing,
    logging each one and the count at the end (``"raise"``, the default, keeps the loader's own
    errors, which name the row and file). Unreadable files are caught later, per sample, by the
    engine, which records them as failed.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if root is not None:
        options["root"] = root
    params = inspect.signature(DATASETS.get(name)).parameters
    if on_error == "skip":
        if "on_error" in params:
            options.setdefault("on_error", "skip")
        elif "on_missing" in params:
            options.setdefault("on_missing", "skip")
    dataset = DATASETS.create(name, **options)
    if on_error == "skip" and hasattr(dataset, "check"):
        problems = dataset.check()
        if problems:
            bad = {p["id"] for p in problems}
            for p in problems:
                log.warning("%s: skipping sample %r: %s %s", name, p["id"], p["problem"], p["path"])
            log.warning("%s: skipped %d of %d samples (missing files)", name, len(bad), len(dataset))
            dataset = dataset.filter(lambda m: ~m["id"].isin(bad))
    return dataset
