"""More chest X-ray loaders: RSNA Pneumonia, SIIM-ACR Pneumothorax, VinDr-CXR and a generic
``csv`` loader for any image folder + CSV. Shared options and the sample layout are described in
:mod:`medimg_bench.datasets.cxr`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets._common import dataset_root
from medimg_bench.datasets.cxr import (
    CXRDataset,
    _first_existing,
    _index_files,
    _lines,
    _need_columns,
    _options,
    _read_csv,
)
from medimg_bench.datasets.cxr_labels import apply_uncertainty
from medimg_bench.registry import register_dataset

log = logging.getLogger(__name__)

__all__ = ["rsna_pneumonia", "siim_pneumothorax", "vindr_cxr", "csv_dataset", "RSNA_CLASSES"]

#: RSNA ``stage_2_detailed_class_info.csv`` classes, in the order used for ``target="class"``.
RSNA_CLASSES = ("Normal", "No Lung Opacity / Not Normal", "Lung Opacity")


@register_dataset("rsna_pneumonia", tags=("cxr", "classification", "detection"))
def rsna_pneumonia(
    root: str | Path,
    split: str = "train",
    *,
    target: str = "binary",
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """RSNA Pneumonia Detection Challenge: ``stage_2_train_labels.csv`` (``patientId, x, y,
    width, height, Target``; one row per box), ``stage_2_detailed_class_info.csv`` and images
    ``<patientId>.dcm`` (or .png/.jpg) anywhere under ``root``.

    Only the training images are labelled, so ``split`` is ``"train"`` (or ``"all"``, the same).
    ``target``: ``"binary"`` (classes ``No Pneumonia``/``Pneumonia`` from ``Target``) or
    ``"class"`` (3 classes of :data:`RSNA_CLASSES`). ``meta['boxes']``: list of
    ``[x, y, width, height]`` in pixels of the 1024×1024 image (empty when negative)."""
    name = "rsna_pneumonia"
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    if split not in ("train", "all"):
        raise ValueError(
            f"{name}: only the training set is labelled; split must be 'train', got {split!r}"
        )
    if target not in ("binary", "class"):
        raise ValueError(f"{name}: target must be 'binary' or 'class', got {target!r}")
    r = dataset_root(root, name)
    csv = _first_existing(
        r, ("stage_2_train_labels.csv", "stage_1_train_labels.csv"), name, "train labels CSV"
    )
    df = _lines(_read_csv(csv, name, dtype={"patientId": str}))
    _need_columns(df, ["patientId", "x", "y", "width", "height", "Target"], csv, name)
    bad = ~df["Target"].isin([0, 1])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]}: Target {df['Target'].iloc[i]!r} is not 0 or 1"
        )
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
    man = pd.DataFrame(rows, columns=["id", "patient_id", "Target", "boxes", "_line"])
    if target == "binary":
        classes: Sequence[str] = ("No Pneumonia", "Pneumonia")
        man["label"] = man["Target"].astype(int)
    else:
        classes = RSNA_CLASSES
        info_csv = _first_existing(
            r,
            ("stage_2_detailed_class_info.csv", "stage_1_detailed_class_info.csv"),
            name,
            "class info CSV",
        )
        info = _lines(_read_csv(info_csv, name, dtype={"patientId": str}))
        _need_columns(info, ["patientId", "class"], info_csv, name)
        bad = ~info["class"].isin(RSNA_CLASSES)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{name}: {str(info_csv)!r} line {info['_line'].iloc[i]}: class {info['class'].iloc[i]!r} "
                f"is not one of {list(RSNA_CLASSES)}"
            )
        cls = info.drop_duplicates("patientId").set_index("patientId")["class"]
        man["label"] = man["id"].map(cls).map({c: i for i, c in enumerate(RSNA_CLASSES)})
        if man["label"].isna().any():
            i = int(np.flatnonzero(man["label"].isna().to_numpy())[0])
            raise ValueError(
                f"{name}: patient {man['id'].iloc[i]!r} ({str(csv)!r} line {man['_line'].iloc[i]}) has no row in {str(info_csv)!r}"
            )
        man["label"] = man["label"].astype(int)
    files = _index_files(r)
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


@register_dataset("siim_pneumothorax", tags=("cxr", "classification", "segmentation"))
def siim_pneumothorax(
    root: str | Path,
    split: str = "train",
    *,
    rle_format: str | None = None,
    masks: bool = True,
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """SIIM-ACR Pneumothorax Segmentation: ``train-rle.csv`` (``ImageId``, `` EncodedPixels`` —
    the Kaggle header has a leading space) or ``stage_2_train.csv``; images ``<ImageId>.dcm``
    (or .png) anywhere under ``root`` (e.g. ``dicom-images-train/<study>/<series>/``).

    ``-1`` = no pneumothorax; several rows of one image are united into one mask. ``label``: 1 if
    any mask pixel (classes ``No Pneumothorax``/``Pneumothorax``); ``mask`` (``masks=True``): H×W
    int64 0/1. ``rle_format``: ``"relative"`` (``train-rle.csv``, the default when that file is
    used) or ``"absolute"`` (standard 1-based RLE, the default for ``stage_2_train.csv``); see
    :func:`medimg_bench.datasets.cxr_image.decode_siim_rle`. Only train is labelled."""
    name = "siim_pneumothorax"
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    if split not in ("train", "all"):
        raise ValueError(
            f"{name}: only the training set is labelled; split must be 'train', got {split!r}"
        )
    r = dataset_root(root, name)
    csv = _first_existing(
        r, ("train-rle.csv", "stage_2_train.csv", "*/train-rle.csv"), name, "RLE CSV"
    )
    if rle_format is None:
        rle_format = "relative" if csv.name == "train-rle.csv" else "absolute"
    if rle_format not in ("relative", "absolute"):
        raise ValueError(f"{name}: rle_format must be 'relative' or 'absolute', got {rle_format!r}")
    df = _lines(_read_csv(csv, name, dtype=str, keep_default_na=False))
    _need_columns(df, ["ImageId", "EncodedPixels"], csv, name)
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
    man = opts.attach_paths(man, _index_files(r), "id", str(csv), expected="{}.dcm")
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


@register_dataset("vindr_cxr", tags=("cxr", "classification", "multilabel", "detection"))
def vindr_cxr(
    root: str | Path,
    split: str = "test",
    *,
    aggregate: str = "majority",
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
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
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    if split not in ("train", "test"):
        raise ValueError(f"{name}: split must be 'train' or 'test', got {split!r}")
    if aggregate not in ("majority", "any", "all"):
        raise ValueError(f"{name}: aggregate must be 'majority', 'any' or 'all', got {aggregate!r}")
    r = dataset_root(root, name)
    csv = _first_existing(
        r,
        (f"annotations/image_labels_{split}.csv", f"image_labels_{split}.csv"),
        name,
        f"{split} label CSV",
    )
    df = _lines(_read_csv(csv, name, dtype={"image_id": str}))
    rad = next((c for c in df.columns if c.lower() == "rad_id"), None)
    _need_columns(df, ["image_id"], csv, name)
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
        ann = _read_csv(ann_path, name, dtype={"image_id": str})
        arad = next((c for c in ann.columns if c.lower() == "rad_id"), None)
        _need_columns(
            ann, ["image_id", "class_name", "x_min", "y_min", "x_max", "y_max"], ann_path, name
        )
        ann = ann.dropna(subset=["x_min", "y_min", "x_max", "y_max"])
        for d in ann.to_dict("records"):
            box = {
                "class_name": d["class_name"],
                **{k: float(d[k]) for k in ("x_min", "y_min", "x_max", "y_max")},
            }
            if arad is not None:
                box["rad_id"] = d[arad]
            boxes.setdefault(str(d["image_id"]), []).append(box)
    man["boxes"] = [boxes.get(i, []) for i in man["id"]]
    files = _index_files(r, under=lambda parts: bool(parts) and parts[0] == split)
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


@register_dataset("csv", tags=("cxr", "classification", "generic"))
def csv_dataset(
    root: str | Path,
    split: str = "test",
    *,
    csv: str = "labels.csv",
    image_column: str = "path",
    label_columns: str | Sequence[str] = "label",
    classes: Sequence[str] | None = None,
    id_column: str | None = None,
    patient_column: str | None = None,
    view_column: str | None = None,
    split_column: str | None = None,
    meta_columns: Sequence[str] = (),
    uncertainty: str = "ignore",
    blank: str = "nan",
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    on_missing_label: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """Any image folder + CSV (``csv`` is relative to ``root``; image paths relative to ``root``).

    One label column → multi-class: values are class names (``classes`` given, else the sorted
    distinct values as strings); a value outside ``classes`` or blank raises, naming the row and
    file. Several label columns → multi-label, values 1/0/-1/blank mapped by ``uncertainty``
    and ``blank`` as for CheXpert. ``split_column`` keeps rows equal to ``split`` (otherwise all
    rows are used). ``id_column`` defaults to the image path without suffix.

    ``on_missing_label`` (one label column): a blank label is an ``error`` (the message gives the
    count and the first three CSV lines), ``skip`` drops those rows (``dataset.dropped`` and the
    run summary say how many) or ``unlabelled`` keeps them with label NaN for prediction-only use
    (metrics ignore them; per-sample rows keep them). Multi-label blanks follow ``blank``."""
    name = "csv"
    if on_missing_label not in ("error", "skip", "unlabelled"):
        raise ValueError(
            f"{name}: on_missing_label must be 'error', 'skip' or 'unlabelled', got {on_missing_label!r}"
        )
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    r = dataset_root(root, name)
    path = Path(csv) if Path(csv).is_absolute() else r / csv
    if not path.exists():
        raise FileNotFoundError(f"{name}: label CSV {str(path)!r} does not exist")
    labels = [label_columns] if isinstance(label_columns, str) else list(label_columns)
    if not labels:
        raise ValueError(f"{name}: label_columns is empty")
    extra = [c for c in (id_column, patient_column, view_column, split_column) if c]
    df = _lines(_read_csv(path, name, dtype={c: str for c in [image_column, *extra]}))
    _need_columns(df, [image_column, *labels, *extra, *meta_columns], path, name)
    if split_column:
        df = df[df[split_column].astype(str) == str(split)]
    man = pd.DataFrame({"path": df[image_column].astype(str)}, index=df.index)
    man["id"] = (
        df[id_column].astype(str)
        if id_column
        else [str(Path(p).with_suffix("")) for p in man["path"]]
    )
    if patient_column:
        man["patient_id"] = df[patient_column].where(df[patient_column].notna(), man["id"]).astype(str)
    man["view"] = df[view_column] if view_column else np.nan
    for c in meta_columns:
        man[c] = df[c]
    dropped: dict[str, int] = {}
    if len(labels) == 1:
        col = df[labels[0]]
        blank_rows = col.isna() | (col.astype(str).str.strip() == "")
        if blank_rows.any() and on_missing_label == "error":
            idx = np.flatnonzero(blank_rows.to_numpy())
            first = ", ".join(
                f"line {df['_line'].iloc[i]} (image {man['path'].iloc[i]!r})" for i in idx[:3]
            )
            raise ValueError(
                f"{name}: {str(path)!r}: {len(idx)} row(s) with a blank label in {labels[0]!r}, "
                f"first: {first}; set on_missing_label=skip to drop them or "
                "on_missing_label=unlabelled to keep them without a label"
            )
        if blank_rows.any() and on_missing_label == "skip":
            dropped["missing_label"] = int(blank_rows.sum())
            keep = ~blank_rows.to_numpy()
            df, man, col = df[keep], man[keep], col[keep]
            blank_rows = blank_rows[keep]
            log.warning("%s: %s: dropped %d row(s) with a blank label in %r", name, path,
                        dropped["missing_label"], labels[0])
        unlabelled = blank_rows.to_numpy()
        col = col.where(~blank_rows, "")
        as_str = col.map(
            lambda v: str(int(v)) if isinstance(v, float) and float(v).is_integer() else str(v)
        )
        cls = [str(c) for c in classes] if classes is not None else sorted(as_str.unique().tolist())
        index = {c: i for i, c in enumerate(cls)}
        if classes is None and unlabelled.any():
            cls = [c for c in cls if c != ""]
            index = {c: i for i, c in enumerate(cls)}
        bad = ~as_str.isin(list(index)) & ~unlabelled
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(
                f"{name}: {str(path)!r} line {df['_line'].iloc[i]} (image {man['path'].iloc[i]!r}): label "
                f"{as_str.iloc[i]!r} is not one of the classes {cls}"
            )
        mapped = as_str.map(index)
        man["label"] = mapped.astype(float) if unlabelled.any() else mapped.astype(int)
        multilabel = False
    else:
        cls = list(labels)
        man = pd.concat(
            [
                man,
                apply_uncertainty(
                    df[labels],
                    uncertainty,
                    blank=blank,
                    source=str(path),
                    lines=df["_line"].tolist(),
                ),
            ],
            axis=1,
        )
        multilabel = True
    man["_line"] = df["_line"]
    ds = opts.finish(
        man,
        r,
        where=str(path),
        classes=cls,
        multilabel=multilabel,
        meta_columns=tuple(meta_columns),
    )
    ds.dropped = dropped
    return ds
