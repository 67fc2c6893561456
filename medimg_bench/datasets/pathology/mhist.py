"""The ``mhist`` dataset. MHIST: ``annotations.csv`` (``Image Name``, ``Majority Vote Label`` HP/SSA, ``Number of
Annotators who Selected SSA`` (of 7), ``Partition`` train/test) and ``images/<Image Name>``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.pathology.image_folder import PathologyImageDataset
from medimg_bench.registry import register_dataset

__all__ = ["mhist"]


@register_dataset("mhist", tags=("pathology", "classification"))
def mhist(
    root: str | Path, split: str = "test", *, transform: Callable | None = None
) -> PathologyImageDataset:
    """MHIST: ``annotations.csv`` (``Image Name``, ``Majority Vote Label`` HP/SSA, ``Number of
    Annotators who Selected SSA`` (of 7), ``Partition`` train/test) and ``images/<Image Name>``.

    Classes ``["HP", "SSA"]``; ``meta['n_ssa_votes']`` keeps the annotator agreement."""
    name = "mhist"
    r = dataset_root(root, name)
    if split not in ("train", "test", "all"):
        raise ValueError(f"{name}: split must be 'train', 'test' or 'all', got {split!r}")
    csv = r / "annotations.csv"
    if not csv.exists():
        raise FileNotFoundError(f"{name}: {str(csv)!r} does not exist")
    df = pd.read_csv(csv, dtype={"Image Name": str})
    df.columns = [c.strip() for c in df.columns]
    cols = ["Image Name", "Majority Vote Label", "Partition"]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: {str(csv)!r} has no column(s) {missing}")
    df["_line"] = np.arange(len(df)) + 2
    classes = ["HP", "SSA"]
    bad = ~df["Majority Vote Label"].isin(classes)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]} (image {df['Image Name'].iloc[i]!r}): label "
            f"{df['Majority Vote Label'].iloc[i]!r} is not one of {classes}"
        )
    if split != "all":
        df = df[df["Partition"].str.strip().str.lower() == split]
    man = pd.DataFrame(
        {
            "id": df["Image Name"].str.replace(r"\.\w+$", "", regex=True),
            "path": "images/" + df["Image Name"],
            "label": df["Majority Vote Label"]
            .map({c: i for i, c in enumerate(classes)})
            .astype(int),
            "split": df["Partition"].str.strip().str.lower(),
        }
    )
    if "Number of Annotators who Selected SSA" in df:
        man["n_ssa_votes"] = df["Number of Annotators who Selected SSA"].astype(int)
    exists = np.array([(r / p).exists() for p in man["path"]], dtype=bool)
    if not exists.all():
        i = int(np.flatnonzero(~exists)[0])
        raise FileNotFoundError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]}: image {str(r / man['path'].iloc[i])!r} does not exist"
        )
    return PathologyImageDataset(
        man, root=r, classes=classes, name=name, transform=transform, meta_columns=("n_ssa_votes",)
    )
