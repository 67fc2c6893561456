"""The ``chexpert`` dataset. CheXpert v1.0 (or -small): ``train.csv`` / ``valid.csv`` (``test_labels.csv`` or
``test.csv`` for ``split="test"``), images at the CSV ``Path`` (its first folder is the
dataset folder). ``root`` may be that folder or its parent."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr._layout import (
    cxr_loader,
    first_true,
    optional_column,
    read_table,
    split_file,
)
from medimg_bench.datasets.cxr.base import CXRDataset, Options
from medimg_bench.datasets.cxr.labels import (
    CHEXPERT_PATHOLOGIES,
    apply_uncertainty,
)

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


@cxr_loader("chexpert", tags=("cxr", "classification", "multilabel"))
def chexpert(
    root: str | Path,
    split: str = "valid",
    *,
    uncertainty: str = "ignore",
    blank: str = "nan",
    opts: Options,
) -> CXRDataset:
    """CheXpert v1.0 (or -small): ``train.csv`` / ``valid.csv`` (``test_labels.csv`` or
    ``test.csv`` for ``split="test"``), images at the CSV ``Path`` (its first folder is the
    dataset folder). ``root`` may be that folder or its parent.

    ``uncertainty``: ``u_ones`` | ``u_zeros`` | ``ignore`` (-1 → 1, 0 or NaN); ``blank``:
    ``"nan"`` (unlabelled, default) or ``"zero"``. ``view`` is the AP/PA column for frontal
    images and ``LATERAL`` for laterals; ``patient_id`` = ``patientNNNNN`` from the path."""
    name = "chexpert"
    r = dataset_root(root, name)
    d = _chexpert_dir(r, name)
    files = {
        "train": ["train.csv"],
        "valid": ["valid.csv"],
        "val": ["valid.csv"],
        "test": ["test_labels.csv", "test.csv"],
    }
    csv = split_file(d, files, split, name=name, what="CSV", shown=("train", "valid", "test"))
    df = read_table(csv, name, ["Path", *CHEXPERT_PATHOLOGIES])
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
    i = first_true(pid.isna())
    if i is not None:
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
    fl = optional_column(df, "Frontal/Lateral")
    appa = optional_column(df, "AP/PA")
    man["frontal_lateral"] = fl
    man["view"] = appa.where(appa.notna(), fl.map({"Lateral": "LATERAL"}))
    man["sex"] = optional_column(df, "Sex")
    man["age"] = optional_column(df, "Age")
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
