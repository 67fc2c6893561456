"""The ``mimic_cxr`` dataset. MIMIC-CXR-JPG 2.x: ``mimic-cxr-2.0.0-metadata.csv(.gz)``, ``-chexpert``/``-negbio``
label CSVs (per study), ``-split.csv`` (``train``/``validate``/``test``), images at
``files/p10/p10000032/s50414267/<dicom_id>.jpg``."""

from __future__ import annotations

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

__all__ = ["mimic_cxr"]


# -- MIMIC-CXR-JPG ---------------------------------------------------------------------------------


@register_dataset("mimic_cxr", tags=("cxr", "classification", "multilabel"))
def mimic_cxr(
    root: str | Path,
    split: str = "test",
    *,
    labeler: str = "chexpert",
    uncertainty: str = "ignore",
    blank: str = "nan",
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """MIMIC-CXR-JPG 2.x: ``mimic-cxr-2.0.0-metadata.csv(.gz)``, ``-chexpert``/``-negbio``
    label CSVs (per study), ``-split.csv`` (``train``/``validate``/``test``), images at
    ``files/p10/p10000032/s50414267/<dicom_id>.jpg``.

    ``labeler``: ``chexpert`` | ``negbio``; labels use the CheXpert rules (``uncertainty``,
    ``blank``); studies without a label row are all NaN. ``view`` = ``ViewPosition``."""
    name = "mimic_cxr"
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    if labeler not in ("chexpert", "negbio"):
        raise ValueError(f"{name}: labeler must be 'chexpert' or 'negbio', got {labeler!r}")
    r = dataset_root(root, name)
    meta_csv = _first_existing(
        r, ("mimic-cxr-*-metadata.csv", "mimic-cxr-*-metadata.csv.gz"), name, "metadata CSV"
    )
    split_csv = _first_existing(
        r, ("mimic-cxr-*-split.csv", "mimic-cxr-*-split.csv.gz"), name, "split CSV"
    )
    label_csv = _first_existing(
        r, (f"mimic-cxr-*-{labeler}.csv", f"mimic-cxr-*-{labeler}.csv.gz"), name, f"{labeler} CSV"
    )
    ids = {"dicom_id": str, "subject_id": str, "study_id": str}
    meta = _lines(_read_csv(meta_csv, name, dtype=ids))
    _need_columns(meta, ["dicom_id", "subject_id", "study_id"], meta_csv, name)
    splits = _read_csv(split_csv, name, dtype=ids)
    _need_columns(splits, ["dicom_id", "split"], split_csv, name)
    aliases = {"val": "validate", "valid": "validate", "validation": "validate"}
    split_name = aliases.get(split, split)
    if split_name not in ("train", "validate", "test", "all"):
        raise ValueError(
            f"{name}: split must be 'train', 'validate', 'test' or 'all', got {split!r}"
        )
    df = meta.merge(splits[["dicom_id", "split"]], on="dicom_id", how="left")
    if split_name != "all":
        df = df[df["split"] == split_name]
    df = _with_labels(df, label_csv, uncertainty=uncertainty, blank=blank)
    man = _mimic_manifest(df)
    man = pd.concat([man, df[list(CHEXPERT_PATHOLOGIES)], df[["_line"]]], axis=1)
    return opts.finish(
        man,
        r,
        where=str(meta_csv),
        classes=CHEXPERT_PATHOLOGIES,
        multilabel=True,
    )


def _with_labels(
    df: pd.DataFrame, label_csv: Path, *, uncertainty: str, blank: str
) -> pd.DataFrame:
    """``df`` with the study's CheXpert-rule labels from ``label_csv`` (NaN where no label row)."""
    name = "mimic_cxr"
    lab = _read_csv(label_csv, name, dtype={"subject_id": str, "study_id": str})
    _need_columns(lab, ["subject_id", "study_id", *CHEXPERT_PATHOLOGIES], label_csv, name)
    lab[list(CHEXPERT_PATHOLOGIES)] = apply_uncertainty(
        lab[list(CHEXPERT_PATHOLOGIES)],
        uncertainty,
        blank=blank,
        source=str(label_csv),
        lines=(np.arange(len(lab)) + 2).tolist(),
    )
    return df.merge(
        lab[["subject_id", "study_id", *CHEXPERT_PATHOLOGIES]],
        on=["subject_id", "study_id"],
        how="left",
    )


def _mimic_manifest(df: pd.DataFrame) -> pd.DataFrame:
    """The manifest columns (id, image path under ``files/``, patient, study, view, split)."""
    sid = df["subject_id"].astype(str)
    man = pd.DataFrame(
        {
            "id": df["dicom_id"].astype(str),
            "path": "files/p"
            + sid.str[:2]
            + "/p"
            + sid
            + "/s"
            + df["study_id"].astype(str)
            + "/"
            + df["dicom_id"]
            + ".jpg",
            "patient_id": sid,
            "study_id": df["study_id"].astype(str),
            "view": df["ViewPosition"] if "ViewPosition" in df else np.nan,
            "split": df["split"],
        }
    )
    return man
