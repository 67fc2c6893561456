"""The ``siim_pneumothorax`` dataset. SIIM-ACR Pneumothorax Segmentation: ``train-rle.csv`` (``ImageId``, `` EncodedPixels`` —
the Kaggle header has a leading space) or ``stage_2_train.csv``; images ``<ImageId>.dcm``
(or .png) anywhere under ``root`` (e.g. ``dicom-images-train/<study>/<series>/``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr._layout import check_choice, cxr_loader, read_table, train_split_only
from medimg_bench.datasets.cxr.base import CXRDataset, Options, first_existing, index_files

__all__ = ["siim_pneumothorax"]


@cxr_loader("siim_pneumothorax", tags=("cxr", "classification", "segmentation"))
def siim_pneumothorax(
    root: str | Path,
    split: str = "train",
    *,
    rle_format: str | None = None,
    masks: bool = True,
    opts: Options,
) -> CXRDataset:
    """SIIM-ACR Pneumothorax Segmentation: ``train-rle.csv`` (``ImageId``, `` EncodedPixels`` —
    the Kaggle header has a leading space) or ``stage_2_train.csv``; images ``<ImageId>.dcm``
    (or .png) anywhere under ``root`` (e.g. ``dicom-images-train/<study>/<series>/``).

    ``-1`` = no pneumothorax; several rows of one image are united into one mask. ``label``: 1 if
    any mask pixel (classes ``No Pneumothorax``/``Pneumothorax``); ``mask`` (``masks=True``): H×W
    int64 0/1. ``rle_format``: ``"relative"`` (``train-rle.csv``, the default when that file is
    used) or ``"absolute"`` (standard 1-based RLE, the default for ``stage_2_train.csv``); see
    :func:`medimg_bench.datasets.cxr.pixels.decode_siim_rle`. Only train is labelled."""
    name = "siim_pneumothorax"
    train_split_only(name, split)
    r = dataset_root(root, name)
    csv = first_existing(
        r, ("train-rle.csv", "stage_2_train.csv", "*/train-rle.csv"), name, "RLE CSV"
    )
    if rle_format is None:
        rle_format = "relative" if csv.name == "train-rle.csv" else "absolute"
    check_choice(name, "rle_format", rle_format, ("relative", "absolute"))
    df = read_table(csv, name, ["ImageId", "EncodedPixels"], dtype=str, keep_default_na=False)
    rows = []
    for image_id, g in df.groupby("ImageId", sort=False):
        rles = [s.strip() for s in g["EncodedPixels"] if s.strip() not in ("", "-1")]
        rows.append(
            {
                "id": image_id,
                "label": int(bool(rles)),
                "rle": ";".join(rles) if rles else "-1",
                "_line": int(g["_line"].iloc[0]),
            }
        )
    man = pd.DataFrame(rows, columns=["id", "label", "rle", "_line"])
    man = opts.attach_paths(man, index_files(r), "id", str(csv), expected="{}.dcm")
    man["view"] = np.nan
    return opts.finish(
        man,
        r,
        where=str(csv),
        paths_checked=True,
        classes=("No Pneumothorax", "Pneumothorax"),
        multilabel=False,
        rle_column="rle" if masks else None,
        rle_format=rle_format,
    )
