"""The ``vindr_cxr`` dataset. VinDr-CXR (PhysioNet 1.0.0): ``annotations/image_labels_{train,test}.csv`` (``image_id``,
``rad_id``/``rad_ID``, one 0/1 column per finding), ``annotations/annotations_{split}.csv``
(boxes) and ``{train,test}/<image_id>.dicom``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.cxr._layout import check_choice, cxr_loader, read_table
from medimg_bench.datasets.cxr.base import CXRDataset, Options, first_existing, index_files

__all__ = ["vindr_cxr"]


@cxr_loader("vindr_cxr", tags=("cxr", "classification", "multilabel", "detection"))
def vindr_cxr(
    root: str | Path,
    split: str = "test",
    *,
    aggregate: str = "majority",
    opts: Options,
) -> CXRDataset:
    """VinDr-CXR (PhysioNet 1.0.0): ``annotations/image_labels_{train,test}.csv`` (``image_id``,
    ``rad_id``/``rad_ID``, one 0/1 column per finding), ``annotations/annotations_{split}.csv``
    (boxes) and ``{train,test}/<image_id>.dicom``.

    Train images have one row per radiologist (3 of 17); ``aggregate`` sets the image label:
    ``"majority"`` (positive when more than half of its readers marked it, default), ``"any"`` or
    ``"all"``. Test rows are the consensus of 5 radiologists (one row per image; aggregated the
    same way if repeated). ``meta['boxes']``: dicts ``class_name, x_min, y_min, x_max, y_max,
    rad_id`` in pixels; ``meta['n_readers']``. Classes: the CSV's finding columns, in order."""
    name = "vindr_cxr"
    check_choice(name, "split", split, ("train", "test"))
    check_choice(name, "aggregate", aggregate, ("majority", "any", "all"))
    r = dataset_root(root, name)
    csv = first_existing(
        r,
        (f"annotations/image_labels_{split}.csv", f"image_labels_{split}.csv"),
        name,
        f"{split} label CSV",
    )
    df = read_table(csv, name, ["image_id"], dtype={"image_id": str})
    rad = next((c for c in df.columns if c.lower() == "rad_id"), None)
    classes = [c for c in df.columns if c not in ("image_id", "_line") and c != rad]
    values = df[classes].apply(pd.to_numeric, errors="coerce")
    bad = ~values.isin([0, 1])
    if bad.to_numpy().any():
        i, j = (int(a[0]) for a in np.nonzero(bad.to_numpy()))
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]} (image {df['image_id'].iloc[i]!r}): "
            f"{classes[j]!r} = {df[classes[j]].iloc[i]!r}, expected 0 or 1"
        )
    values["image_id"] = df["image_id"]
    g = values.groupby("image_id", sort=False)
    frac = g[classes].mean()
    agg = {"majority": frac > 0.5, "any": frac > 0, "all": frac >= 1.0}[aggregate].astype(
        np.float64
    )
    man = agg.reset_index().rename(columns={"image_id": "id"})
    man["n_readers"] = g.size().to_numpy()
    man["_line"] = df.groupby("image_id", sort=False)["_line"].first().to_numpy()
    man["patient_id"] = man["id"]  # VinDr-CXR publishes no patient ids (one image per study)
    boxes = _boxes_by_image(r, split)
    man["boxes"] = [boxes.get(i, []) for i in man["id"]]
    files = index_files(r, under=lambda parts: bool(parts) and parts[0] == split)
    man = opts.attach_paths(man, files, "id", str(csv), expected=f"{split}/{{}}.dicom")
    man["view"] = np.nan
    return opts.finish(
        man,
        r,
        where=str(csv),
        paths_checked=True,
        classes=classes,
        multilabel=True,
        meta_columns=("boxes", "n_readers"),
    )


def _boxes_by_image(r: Path, split: str) -> dict[str, list[dict[str, Any]]]:
    """Boxes of ``annotations_{split}.csv`` per image id (none when the file is absent), pixels."""
    name = "vindr_cxr"
    boxes: dict[str, list[dict[str, Any]]] = {}
    ann_path = next(
        (
            p
            for p in (
                r / "annotations" / f"annotations_{split}.csv",
                r / f"annotations_{split}.csv",
            )
            if p.exists()
        ),
        None,
    )
    if ann_path is not None:
        columns = ["image_id", "class_name", "x_min", "y_min", "x_max", "y_max"]
        ann = read_table(ann_path, name, columns, dtype={"image_id": str})
        arad = next((c for c in ann.columns if c.lower() == "rad_id"), None)
        ann = ann.dropna(subset=["x_min", "y_min", "x_max", "y_max"])
        for d in ann.to_dict("records"):
            box = {
                "class_name": d["class_name"],
                **{k: float(d[k]) for k in ("x_min", "y_min", "x_max", "y_max")},
            }
            if arad is not None:
                box["rad_id"] = d[arad]
            boxes.setdefault(str(d["image_id"]), []).append(box)
    return boxes
