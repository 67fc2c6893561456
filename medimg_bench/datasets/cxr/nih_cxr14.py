"""The ``nih_cxr14`` dataset. NIH ChestX-ray14: ``Data_Entry_2017_v2020.csv`` (or ``Data_Entry_2017.csv``), official
``train_val_list.txt`` / ``test_list.txt``, PNGs in any ``images*`` folder under ``root``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr._layout import (
    cxr_loader,
    first_true,
    optional_column,
    read_table,
    split_file,
)
from medimg_bench.datasets.cxr.base import CXRDataset, Options, first_existing, index_files
from medimg_bench.datasets.cxr.labels import NIH_PATHOLOGIES

__all__ = ["nih_cxr14"]


# -- NIH ChestX-ray14 ------------------------------------------------------------------------------


def _nih_age(value: Any) -> float:
    digits = re.sub(r"\D", "", str(value))
    return float(int(digits)) if digits else float("nan")


@cxr_loader("nih_cxr14", tags=("cxr", "classification", "multilabel"))
def nih_cxr14(
    root: str | Path,
    split: str = "test",
    *,
    opts: Options,
) -> CXRDataset:
    """NIH ChestX-ray14: ``Data_Entry_2017_v2020.csv`` (or ``Data_Entry_2017.csv``), official
    ``train_val_list.txt`` / ``test_list.txt``, PNGs in any ``images*`` folder under ``root``.

    ``split``: ``"test"``, ``"train"`` (= the official train_val list), ``"all"``. Labels: the 14
    findings of :data:`NIH_PATHOLOGIES`, 0/1 ("No Finding" = all 0)."""
    name = "nih_cxr14"
    r = dataset_root(root, name)
    csv = first_existing(
        r, ("Data_Entry_2017_v2020.csv", "Data_Entry_2017.csv"), name, "label CSV"
    )
    ids = {"Image Index": str, "Patient ID": str}
    df = read_table(csv, name, ["Image Index", "Finding Labels", "Patient ID"], dtype=ids)
    lists = {
        "test": ["test_list.txt"],
        "train": ["train_val_list.txt"],
        "train_val": ["train_val_list.txt"],
    }
    if split != "all":
        shown = ("train", "train_val", "test", "all")
        list_file = split_file(r, lists, split, name=name, what="list", shown=shown)
        wanted = {ln.strip() for ln in list_file.read_text().splitlines() if ln.strip()}
        df = df[df["Image Index"].isin(wanted)]
    dummies = df["Finding Labels"].fillna("").astype(str).str.replace(r"\s*\|\s*", "|", regex=True)
    dummies = dummies.str.strip().str.get_dummies(sep="|")
    unknown = [c for c in dummies.columns if c not in NIH_PATHOLOGIES and c != "No Finding"]
    if unknown or (dummies.sum(axis=1) == 0).any():
        bad = dummies[unknown].any(axis=1) if unknown else dummies.sum(axis=1) == 0
        i = first_true(bad)
        what = f"finding {unknown[0]!r}" if unknown else "an empty 'Finding Labels'"
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]} (image {df['Image Index'].iloc[i]!r}): "
            f"{what} is not one of {list(NIH_PATHOLOGIES)} or 'No Finding'"
        )
    labels = dummies.reindex(columns=list(NIH_PATHOLOGIES), fill_value=0).to_numpy(np.float64)
    man = pd.DataFrame(labels, columns=list(NIH_PATHOLOGIES), index=df.index)
    man.insert(0, "id", df["Image Index"].str.replace(r"\.png$", "", regex=True))
    man.insert(1, "patient_id", df["Patient ID"].astype(str))
    followup = (
        df["Follow-up #"].astype(str) if "Follow-up #" in df else pd.Series("0", index=df.index)
    )
    man.insert(2, "study_id", man["patient_id"] + "_" + followup)
    man["view"] = optional_column(df, "View Position")
    man["sex"] = optional_column(df, "Patient Gender", "Patient Sex")  # 2017 / v2020
    man["age"] = df["Patient Age"].map(_nih_age) if "Patient Age" in df else np.nan
    man["image_index"] = df["Image Index"]
    man["_line"] = df["_line"]
    files = index_files(r, under=lambda parts: any(p.startswith("images") for p in parts))
    man["image_stem"] = man["image_index"].str.replace(r"\.png$", "", regex=True)
    man = opts.attach_paths(man, files, "image_stem", str(csv), expected="images/{}.png")
    return opts.finish(
        man.drop(columns=["image_index", "image_stem"]),
        r,
        where=str(csv),
        paths_checked=True,
        classes=NIH_PATHOLOGIES,
        multilabel=True,
    )
