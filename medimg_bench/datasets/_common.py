"""Pieces shared by the dataset families (private: the registry skips ``_`` modules)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from medimg_bench.datasets.base import ManifestDataset

__all__ = ["PathManifestDataset", "dataset_root"]


class PathManifestDataset(ManifestDataset):
    """A manifest dataset whose rows each name one file, in the ``path`` column (relative to
    ``root``); subclasses implement ``load``."""

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None,
        classes: Sequence[str] | None = None,
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(
            manifest,
            root=root,
            path_columns=("path",),
            classes=classes,
            transform=transform,
            name=name,
        )


def dataset_root(root: str | Path | None, name: str) -> Path:
    """``root`` as an existing directory; raises naming dataset ``name`` when it is unset
    (``None``, empty or Hydra's ``???``) or not a directory."""
    if root is None or str(root) in ("", "???"):
        raise ValueError(f"{name}: set root= to the dataset directory as downloaded")
    p = Path(root).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"{name}: root {str(p)!r} is not a directory")
    return p
