"""The ``mimic_cxr`` dataset. MIMIC-CXR-JPG 2.x: ``mimic-cxr-2.0.0-metadata.csv(.gz)``, ``-chexpert``/``-negbio``
label CSVs (per study), ``-split.csv`` (``train``/``validate``/``test``), images at
``files/p10/p10000032/s50414267/<dicom_id>.jpg``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr._layout import check_choice, cxr_loader, optional_column, read_table
from medimg_bench.datasets.cxr.base import CXRDataset, Options, first_existing
from medimg_bench.datasets.cxr.labels import (
    CHEXPERT_PATHOLOGIES,
    apply_uncertainty,
)

__all__ = ["mimic_cxr"]


# -- MIMIC-CXR-JPG ---------------------------------------------------------------------------------


@cxr_loader("mimic_cxr", tags=("cxr", "classification", "multilabel"))
def mimic_cxr(
    root: str | Path,
    split: str = "test",
    *,
    labeler: str = "chexpert",
    uncertainty: str = "ignore",
    blank: str = "nan",
    opts: Options,
) -> CXRDataset:
    """MIMIC-CXR-JPG 2.x: ``mimic-cxr-2.0.0-metadata.csv(.gz)``, ``-chexpert``/``-negbio``
    label CSVs (per study), ``-split.csv`` (``train``/``validate``/``test``), images at
    ``files/p10/p10000032/s50414267/<dicom_id>.jpg``.

    ``labeler``: ``chexpert`` | ``negbio``; labels use the CheXpert rules (``uncertainty``,
    ``blank``); studies without a label row are all NaN. ``view`` = ``ViewPosition``."""
    name = "mimic_cxr"
    check_choice(name, "labeler", labeler, ("chexpert", "negbio"))
    r = dataset_root(root, name)
    meta_csv = first_existing(
        r, ("mimic-cxr-*-metadata.csv", "mimic-cxr-*-metadata.csv.gz"), name, "metadata CSV"
    )
    split_csv = first_existing(
        r, ("mimic-cxr-*-split.csv", "mimic-cxr-*-split.csv.gz"), name, "split CSV"
    )
    label_csv = first_existing(
        r, (f"mimic-cxr-*-{labeler}.csv", f"mimic-cxr-*-{labeler}.csv.gz"), name, f"{labeler} CSV"
    )
    ids = {"dicom_id": str, "subject_id": str, "study_id": str}
    meta = read_table(meta_csv, name, ["dicom_id", "subject_id", "study_id"], dtype=ids)
    splits = read_table(split_csv, name, ["dicom_id", "split"], dtype=ids)
    aliases = {"val": "validate", "valid": "validate", "validation": "validate"}
    split_name = aliases.get(split, split)
    check_choice(name, "split", split_name, ("train", "validate", "test", "all"))
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
    ids = {"subject_id": str, "study_id": str}
    lab = read_table(label_csv, name, ["subject_id", "study_id", *CHEXPERT_PATHOLOGIES], dtype=ids)
    lab[list(CHEXPERT_PATHOLOGIES)] = apply_uncertainty(
        lab[list(CHEXPERT_PATHOLOGIES)],
        uncertainty,
        blank=blank,
        source=str(label_csv),
        lines=lab["_line"].tolist(),
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
            "view": optional_column(df, "ViewPosition"),
            "split": df["split"],
        }
    )
    return man
