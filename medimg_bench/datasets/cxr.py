"""Chest X-ray datasets in their official on-disk layouts.

Every loader builds a manifest (one row per image: ``id``, ``path`` relative to ``root``,
``patient_id``, ``study_id``, ``view``, subgroup columns and one column per label) without reading
pixels, and returns a :class:`CXRDataset`. Multi-label datasets give ``label`` as a float vector in
``classes`` order with NaN = unlabelled; multi-class ones an int index into ``classes``.
Intensity handling: see :mod:`medimg_bench.datasets.cxr_image` (option ``normalize=``, default
``"auto"``: bit-depth range → [0, 1], DICOM MONOCHROME1 inverted).

Options shared by every loader: ``normalize``, ``channels`` (1 grey or 3), ``views`` (keep rows
whose ``view`` is in the list, e.g. ``["PA", "AP"]``), ``transform``, and ``on_missing``:
``"error"`` (default: a listed image absent from disk raises, naming the CSV row and file),
``"skip"`` (drop such rows, logging how many) or ``"lazy"`` (no check; error when read).

``rsna_pneumonia``, ``siim_pneumothorax``, ``vindr_cxr`` and the generic ``csv`` loader live in
:mod:`medimg_bench.datasets.cxr_more`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets._common import PathManifestDataset, dataset_root
from medimg_bench.datasets.cxr_labels import (
    CHEXPERT_PATHOLOGIES,
    NIH_PATHOLOGIES,
    apply_uncertainty,
)
from medimg_bench.registry import register_dataset

__all__ = [
    "CXRDataset",
    "nih_cxr14",
    "chexpert",
    "mimic_cxr",
]

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".dicom", ".tif", ".tiff")


class CXRDataset(PathManifestDataset):
    """A radiograph dataset over a manifest; see the module docstring for the sample layout.

    Args:
        manifest: rows with ``id``, ``path`` and the label column(s).
        classes: class names; for multi-label datasets also the manifest label columns.
        multilabel: ``True``: ``label`` is a float vector over ``classes`` (NaN = unlabelled);
            ``False``: the manifest ``label`` column holds an int index into ``classes``.
        meta_columns: extra manifest columns copied into ``sample["meta"]`` (e.g. ``boxes``).
        rle_column / rle_format: SIIM run-length strings (``;``-separated, united) → ``mask``.
    """

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None,
        classes: Sequence[str],
        multilabel: bool,
        normalize: str = "auto",
        channels: int = 1,
        invert_monochrome1: bool = True,
        meta_columns: Sequence[str] = (),
        rle_column: str | None = None,
        rle_format: str = "relative",
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        from medimg_bench.datasets.cxr_image import NORMALIZE_MODES

        if normalize not in NORMALIZE_MODES:
            raise ValueError(
                f"{name}: normalize must be one of {NORMALIZE_MODES}, got {normalize!r}"
            )
        if channels not in (1, 3):
            raise ValueError(f"{name}: channels must be 1 or 3, got {channels!r}")
        super().__init__(manifest, root=root, classes=classes, transform=transform, name=name)
        self.multilabel = multilabel
        self.normalize = normalize
        self.channels = channels
        self.invert_monochrome1 = invert_monochrome1
        self.meta_columns = tuple(meta_columns)
        self.rle_column = rle_column
        self.rle_format = rle_format

    def label_counts(self) -> pd.DataFrame:
        """Positives, negatives and unlabelled per class (multi-label) or count per class."""
        if self.multilabel:
            m = self.manifest[list(self.classes or [])]
            return pd.DataFrame(
                {
                    "positive": (m == 1).sum(),
                    "negative": (m == 0).sum(),
                    "unlabelled": m.isna().sum(),
                }
            )
        counts = self.manifest["label"].value_counts()
        return pd.DataFrame(
            {"count": [int(counts.get(i, 0)) for i in range(len(self.classes or []))]},
            index=self.classes,
        )

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.cxr_image import decode_siim_rle, load_cxr_image

        path = self.resolve(row["path"])
        image, imeta = load_cxr_image(
            path,
            normalize=self.normalize,
            channels=self.channels,
            invert_monochrome1=self.invert_monochrome1,
        )
        meta = {k: v for k, v in imeta.items() if k in ("view", "sex", "age")}  # header fallback
        meta.update(self.meta_for(row))
        meta.update({k: v for k, v in imeta.items() if k not in ("view", "sex", "age")})
        meta["modality"] = "XR"
        for col in self.meta_columns:
            if col in row:
                meta[col] = row[col]
        sample: dict[str, Any] = {"id": str(row["id"]), "image": image, "meta": meta}
        if self.multilabel:
            sample["label"] = torch.tensor(
                [float(row[c]) for c in self.classes or []], dtype=torch.float32
            )
        else:  # NaN: kept without a label (csv on_missing_label=unlabelled)
            lab = row["label"]
            sample["label"] = float("nan") if pd.isna(lab) else int(lab)
        if self.rle_column is not None:
            h, w = image.shape[-2:]
            mask = np.zeros((h, w), dtype=np.uint8)
            for rle in str(row[self.rle_column]).split(";"):
                mask |= decode_siim_rle(
                    rle, h, w, fmt=self.rle_format, source=f"sample {row['id']!r}"
                )
            sample["mask"] = torch.from_numpy(mask.astype(np.int64))
        return sample


# -- helpers ---------------------------------------------------------------------------------------


def _read_csv(path: Path, name: str, **kw: Any) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, **kw)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{name}: cannot read {str(path)!r}: {exc}") from exc
    df.columns = [str(c).strip() for c in df.columns]  # SIIM's " EncodedPixels"
    return df


def _need_columns(df: pd.DataFrame, cols: Sequence[str], path: Path | str, name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(
            f"{name}: {str(path)!r} has no column(s) {missing}; columns are "
            f"{[c for c in df.columns if not str(c).startswith('_')]}"
        )


def _first_existing(root: Path, names: Sequence[str], name: str, what: str) -> Path:
    for n in names:
        hits = sorted(root.glob(n))
        if hits:
            return hits[0]
    raise FileNotFoundError(f"{name}: no {what} under {str(root)!r} (looked for {list(names)})")


def _index_files(
    root: Path, *, under: Callable[[tuple[str, ...]], bool] | None = None
) -> dict[str, str]:
    """Map file stem → path relative to ``root`` for image files (os.walk; DICOM preferred)."""
    found: dict[str, str] = {}
    rank = {
        s: i for i, s in enumerate((".dcm", ".dicom", ".png", ".jpg", ".jpeg", ".tif", ".tiff"))
    }
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(root)
        if under is not None and not under(rel_dir.parts):
            continue
        for f in filenames:
            stem, suffix = os.path.splitext(f)
            suffix = suffix.lower()
            if suffix not in rank:
                continue
            rel = str(rel_dir / f) if rel_dir.parts else f
            old = found.get(stem)
            if old is None or rank[suffix] < rank[os.path.splitext(old)[1].lower()]:
                found[stem] = rel
    return found


def _check_on_missing(on_missing: str, name: str) -> None:
    if on_missing not in ("error", "skip", "lazy"):
        raise ValueError(
            f"{name}: on_missing must be 'error', 'skip' or 'lazy', got {on_missing!r}"
        )


def _skip(manifest: pd.DataFrame, keep: np.ndarray, name: str, where: str) -> pd.DataFrame:
    """Rows where ``keep`` (bool array) is set, logging how many were dropped."""
    log.warning(
        "%s: skipped %d rows of %s whose image is not on disk",
        name,
        int((~keep).sum()),
        where,
    )
    return manifest[keep]


def _attach_paths(
    manifest: pd.DataFrame,
    files: Mapping[str, str],
    key: str,
    on_missing: str,
    name: str,
    where: str,
    expected: str = "{}",
) -> pd.DataFrame:
    """Add a ``path`` column by looking ``manifest[key]`` up in ``files``; a row whose image is
    not found raises, is skipped, or (``lazy``) gets ``expected.format(key)`` so that reading it
    names the file that should be there."""
    _check_on_missing(on_missing, name)
    manifest = manifest.copy()
    keys = manifest[key].astype(str)
    found = keys.map(files)
    missing = found.isna()
    manifest["path"] = [
        f if isinstance(f, str) else expected.format(k) for f, k in zip(found, keys)
    ]
    if missing.any():
        if on_missing == "skip":
            return _skip(manifest, ~missing.to_numpy(), name, where)
        if on_missing == "error":
            i = int(np.flatnonzero(missing.to_numpy())[0])
            raise FileNotFoundError(
                f"{name}: {where} line {manifest['_line'].iloc[i]} lists image {manifest[key].iloc[i]!r} "
                f"which is not on disk under the dataset root ({int(missing.sum())} rows missing; "
                "on_missing='skip' drops them)"
            )
    return manifest


def _check_paths(
    manifest: pd.DataFrame, root: Path, on_missing: str, name: str, where: str
) -> pd.DataFrame:
    _check_on_missing(on_missing, name)
    if on_missing == "lazy" or manifest.empty:
        return manifest
    exists = np.fromiter(
        (os.path.exists(root / p) if isinstance(p, str) else False for p in manifest["path"]),
        bool,
        len(manifest),
    )
    if exists.all():
        return manifest
    if on_missing == "skip":
        return _skip(manifest, exists, name, where)
    i = int(np.flatnonzero(~exists)[0])
    raise FileNotFoundError(
        f"{name}: {where} line {manifest['_line'].iloc[i]} (id {manifest['id'].iloc[i]!r}): image file "
        f"{str(root / str(manifest['path'].iloc[i]))!r} does not exist ({int((~exists).sum())} missing; "
        "on_missing='skip' drops them)"
    )


@dataclass(frozen=True)
class _Options:
    """The options every loader takes (see the module docstring); builds the dataset."""

    name: str
    normalize: str
    channels: int
    views: Sequence[str] | None
    on_missing: str
    transform: Callable[[dict], dict] | None

    def attach_paths(
        self,
        manifest: pd.DataFrame,
        files: Mapping[str, str],
        key: str,
        where: str,
        expected: str = "{}",
    ) -> pd.DataFrame:
        """:func:`_attach_paths` with this loader's ``on_missing``."""
        return _attach_paths(manifest, files, key, self.on_missing, self.name, where, expected)

    def finish(
        self,
        manifest: pd.DataFrame,
        root: Path,
        *,
        where: str,
        paths_checked: bool = False,
        **kw: Any,
    ) -> CXRDataset:
        """Keep the wanted ``views``, check the image files (unless ``paths_checked``: the
        paths came from :meth:`attach_paths`) and return the dataset."""
        if self.views is not None:
            wanted = [self.views] if isinstance(self.views, str) else list(self.views)
            manifest = manifest[manifest["view"].isin(wanted)]
        if "_line" in manifest.columns and manifest["id"].duplicated().any():
            first = manifest["id"][manifest["id"].duplicated()].iloc[0]
            lines = manifest.loc[manifest["id"] == first, "_line"].tolist()
            n = int(manifest["id"].duplicated().sum())
            raise ValueError(
                f"{self.name}: {where}: duplicate id {first!r} on lines {lines} "
                f"({n} duplicate row(s) in all); ids must be unique (set id_column)"
            )
        on_missing = "lazy" if paths_checked else self.on_missing
        manifest = _check_paths(manifest, root, on_missing, self.name, where)
        return CXRDataset(
            manifest.drop(columns=["_line"], errors="ignore"),
            root=root,
            name=self.name,
            normalize=self.normalize,
            channels=self.channels,
            transform=self.transform,
            **kw,
        )


def _options(
    name: str,
    options: Mapping[str, Any],
    normalize: str,
    channels: int,
    views: Sequence[str] | None,
    on_missing: str,
    transform: Callable[[dict], dict] | None,
) -> _Options:
    """Reject unknown ``options`` and bundle the shared ones."""
    _ensure_options(options, name)
    return _Options(name, normalize, channels, views, on_missing, transform)


def _lines(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["_line"] = np.arange(len(df)) + 2  # 1-based line in the CSV, after the header
    return df


def _ensure_options(options: Mapping[str, Any], name: str) -> None:
    if options:
        raise TypeError(f"{name}: unknown option(s) {sorted(options)}")


# -- NIH ChestX-ray14 ------------------------------------------------------------------------------


def _nih_age(value: Any) -> float:
    digits = re.sub(r"\D", "", str(value))
    return float(int(digits)) if digits else float("nan")


@register_dataset("nih_cxr14", tags=("cxr", "classification", "multilabel"))
def nih_cxr14(
    root: str | Path,
    split: str = "test",
    *,
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """NIH ChestX-ray14: ``Data_Entry_2017_v2020.csv`` (or ``Data_Entry_2017.csv``), official
    ``train_val_list.txt`` / ``test_list.txt``, PNGs in any ``images*`` folder under ``root``.

    ``split``: ``"test"``, ``"train"`` (= the official train_val list), ``"all"``. Labels: the 14
    findings of :data:`NIH_PATHOLOGIES`, 0/1 ("No Finding" = all 0)."""
    name = "nih_cxr14"
    opts = _options(name, options, normalize, channels, views, on_missing, transform)
    r = dataset_root(root, name)
    csv = _first_existing(
        r, ("Data_Entry_2017_v2020.csv", "Data_Entry_2017.csv"), name, "label CSV"
    )
    df = _lines(_read_csv(csv, name, dtype={"Image Index": str, "Patient ID": str}))
    _need_columns(df, ["Image Index", "Finding Labels", "Patient ID"], csv, name)
    lists = {
        "test": ["test_list.txt"],
        "train": ["train_val_list.txt"],
        "train_val": ["train_val_list.txt"],
    }
    if split != "all":
        if split not in lists:
            raise ValueError(
                f"{name}: split must be 'train', 'train_val', 'test' or 'all', got {split!r}"
            )
        list_file = _first_existing(r, lists[split], name, f"{split} list")
        wanted = {ln.strip() for ln in list_file.read_text().splitlines() if ln.strip()}
        df = df[df["Image Index"].isin(wanted)]
    dummies = df["Finding Labels"].fillna("").astype(str).str.replace(r"\s*\|\s*", "|", regex=True)
    dummies = dummies.str.strip().str.get_dummies(sep="|")
    unknown = [c for c in dummies.columns if c not in NIH_PATHOLOGIES and c != "No Finding"]
    if unknown or (dummies.sum(axis=1) == 0).any():
        bad = dummies[unknown].any(axis=1) if unknown else dummies.sum(axis=1) == 0
        i = int(np.flatnonzero(bad.to_numpy())[0])
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
    man["view"] = df.get("View Position", pd.Series(np.nan, index=df.index))
    sex_col = next((c for c in ("Patient Gender", "Patient Sex") if c in df), None)  # 2017 / v2020
    man["sex"] = df[sex_col] if sex_col else np.nan
    man["age"] = df["Patient Age"].map(_nih_age) if "Patient Age" in df else np.nan
    man["image_index"] = df["Image Index"]
    man["_line"] = df["_line"]
    files = _index_files(r, under=lambda parts: any(p.startswith("images") for p in parts))
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
    lab = _read_csv(label_csv, name, dtype={"subject_id": str, "study_id": str})
    _need_columns(lab, ["subject_id", "study_id", *CHEXPERT_PATHOLOGIES], label_csv, name)
    lab[list(CHEXPERT_PATHOLOGIES)] = apply_uncertainty(
        lab[list(CHEXPERT_PATHOLOGIES)],
        uncertainty,
        blank=blank,
        source=str(label_csv),
        lines=(np.arange(len(lab)) + 2).tolist(),
    )
    df = df.merge(
        lab[["subject_id", "study_id", *CHEXPERT_PATHOLOGIES]],
        on=["subject_id", "study_id"],
        how="left",
    )
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
    man = pd.concat([man, df[list(CHEXPERT_PATHOLOGIES)], df[["_line"]]], axis=1)
    return opts.finish(
        man,
        r,
        where=str(meta_csv),
        classes=CHEXPERT_PATHOLOGIES,
        multilabel=True,
    )
