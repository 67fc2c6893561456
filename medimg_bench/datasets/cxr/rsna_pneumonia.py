"""The ``rsna_pneumonia`` dataset. RSNA Pneumonia Detection Challenge: ``stage_2_train_labels.csv`` (``patientId, x, y,
width, height, Target``; one row per box), ``stage_2_detailed_class_info.csv`` and images
``<patientId>.dcm`` (or .png/.jpg) anywhere under ``root``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr._layout import (
    check_choice,
    cxr_loader,
    first_true,
    read_table,
    train_split_only,
)
from medimg_bench.datasets.cxr.base import CXRDataset, Options, first_existing, index_files

__all__ = ["RSNA_CLASSES", "rsna_pneumonia"]

#: RSNA ``stage_2_detailed_class_info.csv`` classes, in the order used for ``target="class"``.
RSNA_CLASSES = ("Normal", "No Lung Opacity / Not Normal", "Lung Opacity")


@cxr_loader("rsna_pneumonia", tags=("cxr", "classification", "detection"))
def rsna_pneumonia(
    root: str | Path,
    split: str = "train",
    *,
    target: str = "binary",
    opts: Options,
) -> CXRDataset:
    """RSNA Pneumonia Detection Challenge: ``stage_2_train_labels.csv`` (``patientId, x, y,
    width, height, Target``; one row per box), ``stage_2_detailed_class_info.csv`` and images
    ``<patientId>.dcm`` (or .png/.jpg) anywhere under ``root``.

    Only the training images are labelled, so ``split`` is ``"train"`` (or ``"all"``, the same).
    ``target``: ``"binary"`` (classes ``No Pneumonia``/``Pneumonia`` from ``Target``) or
    ``"class"`` (3 classes of :data:`RSNA_CLASSES`). ``meta['boxes']``: list of
    ``[x, y, width, height]`` in pixels of the 1024×1024 image (empty when negative)."""
    name = "rsna_pneumonia"
    train_split_only(name, split)
    check_choice(name, "target", target, ("binary", "class"))
    r = dataset_root(root, name)
    csv = first_existing(
        r, ("stage_2_train_labels.csv", "stage_1_train_labels.csv"), name, "train labels CSV"
    )
    columns = ["patientId", "x", "y", "width", "height", "Target"]
    df = read_table(csv, name, columns, dtype={"patientId": str})
    i = first_true(~df["Target"].isin([0, 1]))
    if i is not None:
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]}: Target {df['Target'].iloc[i]!r} is not 0 or 1"
        )
    man = _patient_rows(df)
    if target == "binary":
        classes: Sequence[str] = ("No Pneumonia", "Pneumonia")
        man["label"] = man["Target"].astype(int)
    else:
        classes = RSNA_CLASSES
        man["label"] = _class_labels(man, r, csv)
    files = index_files(r)
    man = opts.attach_paths(man, files, "id", str(csv), expected="stage_2_train_images/{}.dcm")
    man["view"] = np.nan  # ViewPosition is read from the DICOM header at load time
    return opts.finish(
        man.drop(columns=["Target"]),
        r,
        where=str(csv),
        paths_checked=True,
        classes=classes,
        multilabel=False,
        meta_columns=("boxes",),
    )


def _patient_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One row per patient: ``Target`` (any box), ``boxes`` ([x, y, width, height] each), ``_line``."""
    rows = []
    for pid, g in df.groupby("patientId", sort=False):
        boxes = [
            [float(v) for v in b]
            for b in g[["x", "y", "width", "height"]].to_numpy()
            if not np.isnan(b).any()
        ]
        rows.append(
            {
                "id": pid,
                "patient_id": pid,
                "Target": int(g["Target"].max()),
                "boxes": boxes,
                "_line": int(g["_line"].iloc[0]),
            }
        )
    return pd.DataFrame(rows, columns=["id", "patient_id", "Target", "boxes", "_line"])


def _class_labels(man: pd.DataFrame, r: Path, csv: Path) -> pd.Series:
    """Each patient's index into :data:`RSNA_CLASSES`, from the detailed class info CSV."""
    name = "rsna_pneumonia"
    info_csv = first_existing(
        r,
        ("stage_2_detailed_class_info.csv", "stage_1_detailed_class_info.csv"),
        name,
        "class info CSV",
    )
    info = read_table(info_csv, name, ["patientId", "class"], dtype={"patientId": str})
    i = first_true(~info["class"].isin(RSNA_CLASSES))
    if i is not None:
        raise ValueError(
            f"{name}: {str(info_csv)!r} line {info['_line'].iloc[i]}: class {info['class'].iloc[i]!r} "
            f"is not one of {list(RSNA_CLASSES)}"
        )
    cls = info.drop_duplicates("patientId").set_index("patientId")["class"]
    label = man["id"].map(cls).map({c: i for i, c in enumerate(RSNA_CLASSES)})
    i = first_true(label.isna())
    if i is not None:
        raise ValueError(
            f"{name}: patient {man['id'].iloc[i]!r} ({str(csv)!r} line {man['_line'].iloc[i]}) has no row in {str(info_csv)!r}"
        )
    return label.astype(int)
