"""The ``chexpert`` dataset. CheXpert v1.0 (or -small): ``train.csv`` / ``valid.csv`` (``test_labels.csv`` or
``test.csv`` for ``split="test"``), images at the CSV ``Path`` (its first folder is the
dataset folder). ``root`` may be that folder or its parent."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr.base import (
    CXRDataset,
    _first_existing,
    _lines,
    _need_columns,
    _options,
    _read_csv,
)
from medimg_bench.datasets.cxr.labels import (
    CHEXPERT_PATHOLOGIES,
    apply_uncertainty,
)
from medimg_bench.registry import register_dataset

__all__ = ["chexpert"]


# -- CheXpert --------------------------------------------------------------------------------------


def _chexpert_dir(r: Path, name: str) -> Path:
    for d in [r, *sorted(r.glob("CheXpert-v1.0*"))]:
        if d.is_dir() and any(
            (d / f).exists() for f in ("train.csv", "valid.csv", "test_labels.csv", "test.csv")
        ):
            return d
    raise FileNotFoundError(
        f"{name}: no train.csv/valid.csv in {str(r)!r} or its CheXpert-v1.0* folder"
    )


@register_dataset("chexpert", tags=("cxr", "classification", "multilabel"))
def chexpert(
    root: str | Path,
    split: str = "valid",
    *,
    uncertainty: str = "ignore",
    blank: str = "nan",
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """CheXpert v1.0 (or -small): ``train.csv`` / ``valid.csv`` (``test_labels.csv`` or
    ``test.csv`` for ``split="test"``), images at the CSV ``Path`` (its first folder is the
    dataset folder). ``root`` may be that folder or its parent.

    ``uncertainty``: ``u_ones`` | ``u_zeros`` | ``ignore`` (-1 → 1, 0 or NaN); ``blank``:
    ``"nan"`` (unlabelled, default) or ``"zero"``. ``view`` is the AP/PA column for frontal
    images and ``LATERAL`` for laterals; ``patient_id`` = ``patientNNNNN`` from the path."""
    name = "chexpert"
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    r = dataset_root(root, name)
    d = _chexpert_dir(r, name)
    files = {
        "train": ["train.csv"],
        "valid": ["valid.csv"],
        "val": ["valid.csv"],
        "test": ["test_labels.csv", "test.csv"],
    }
    if split not in files:
        raise ValueError(f"{name}: split must be 'train', 'valid' or 'test', got {split!r}")
    csv = _first_existing(d, files[split], name, f"{split} CSV")
    df = _lines(_read_csv(csv, name))
    _need_columns(df, ["Path", *CHEXPERT_PATHOLOGIES], csv, name)
    labels = apply_uncertainty(
        df[list(CHEXPERT_PATHOLOGIES)],
        uncertainty,
        blank=blank,
        source=str(csv),
        lines=df["_line"].tolist(),
    )
    # "CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg" → path inside ``d``
    path = df["Path"].astype(str).str.replace("\\", "/", regex=False)
    head_tail = path.str.split("/", n=1)
    inner = path.where(head_tail.str[0].isin(["train", "valid", "test"]), head_tail.str[1])
    prefix = "" if d == r else str(d.relative_to(r)).replace(os.sep, "/") + "/"
    rel = prefix + inner
    pid = df["Path"].str.extract(r"(patient\d+)", expand=False)
    if pid.isna().any():
        i = int(np.flatnonzero(pid.isna().to_numpy())[0])
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]}: no patientNNNNN in Path {df['Path'].iloc[i]!r}"
        )
    study = df["Path"].str.extract(r"(patient\d+/study\d+)", expand=False)
    man = pd.DataFrame(
        {"id": inner.str.replace(r"\.\w+$", "", regex=True), "path": rel},
        index=df.index,
    )
    man["patient_id"] = pid
    man["study_id"] = study.fillna(pid)
    fl = df["Frontal/Lateral"] if "Frontal/Lateral" in df else pd.Series(np.nan, index=df.index)
    appa = df["AP/PA"] if "AP/PA" in df else pd.Series(np.nan, index=df.index)
    man["frontal_lateral"] = fl
    man["view"] = appa.where(appa.notna(), fl.map({"Lateral": "LATERAL"}))
    man["sex"] = df["Sex"] if "Sex" in df else np.nan
    man["age"] = df["Age"] if "Age" in df else np.nan
    man = pd.concat([man, labels], axis=1)
    man["_line"] = df["_line"]
    return opts.finish(
        man,
        r,
        where=str(csv),
        classes=CHEXPERT_PATHOLOGIES,
        multilabel=True,
        meta_columns=("frontal_lateral",),
    )
