"""The ``nih_cxr14`` dataset. NIH ChestX-ray14: either label release (``Data_Entry_2017.csv`` or
``Data_Entry_2017_v2020.csv``, plain or gzipped), the official ``train_val_list.txt`` /
``test_list.txt`` or a user's split list, PNGs in any ``images*`` folder under ``root``."""

from __future__ import annotations

import gzip
import hashlib
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
from medimg_bench.datasets.cxr.base import CXRDataset, Options, index_files
from medimg_bench.datasets.cxr.labels import NIH_PATHOLOGIES

__all__ = ["NIH_LABEL_RELEASES", "nih_cxr14", "nih_label_release"]

#: NIH's label files by release, in the order looked for when none is named (newest first).
NIH_LABEL_RELEASES: dict[str, tuple[str, ...]] = {
    "v2020": ("Data_Entry_2017_v2020.csv", "Data_Entry_2017_v2020.csv.gz"),
    "2017": ("Data_Entry_2017.csv", "Data_Entry_2017.csv.gz"),
}


# -- NIH ChestX-ray14 ------------------------------------------------------------------------------


def _nih_age(value: Any) -> float:
    digits = re.sub(r"\D", "", str(value))
    return float(int(digits)) if digits else float("nan")


def _release_of(path: Path) -> str | None:
    return next((r for r, names in NIH_LABEL_RELEASES.items() if path.name in names), None)


def _label_file(r: Path, label_file: str | None, release: str) -> tuple[Path, str]:
    """The label CSV to read and its release (``v2020`` / ``2017``)."""
    name = "nih_cxr14"
    if release not in ("auto", *NIH_LABEL_RELEASES):
        raise ValueError(f"{name}: release must be 'auto', {' or '.join(map(repr, NIH_LABEL_RELEASES))}, "
                         f"got {release!r}")
    if label_file is not None:
        path = Path(label_file) if Path(label_file).is_absolute() else r / label_file
        if not path.is_file():
            raise FileNotFoundError(f"{name}: label_file {str(path)!r} does not exist")
        found = _release_of(path)
        if release == "auto" and found is None:
            raise ValueError(f"{name}: cannot tell the release of {path.name!r} from its name "
                             f"({ {r: list(n) for r, n in NIH_LABEL_RELEASES.items()} }); set release=v2020 or 2017")
        if release != "auto" and found not in (None, release):
            raise ValueError(f"{name}: label_file {path.name!r} is NIH's {found} release, not {release!r}")
        return path, release if release != "auto" else str(found)
    wanted = list(NIH_LABEL_RELEASES) if release == "auto" else [release]
    for rel in wanted:
        for n in NIH_LABEL_RELEASES[rel]:
            if (r / n).is_file():
                return r / n, rel
    names = [n for rel in wanted for n in NIH_LABEL_RELEASES[rel]]
    raise FileNotFoundError(f"{name}: no label CSV under {str(r)!r} (looked for {names})")


def nih_label_release(path: str | Path, release: str) -> dict[str, str]:
    """What a run records of the label file: ``release``, ``file`` (name), ``sha256`` of its bytes
    and ``content_sha256`` of the CSV text (gzipped or not, one release gives one content digest)."""
    p = Path(path)
    raw = p.read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return {"release": release, "file": p.name, "sha256": hashlib.sha256(raw).hexdigest(),
            "content_sha256": hashlib.sha256(text).hexdigest()}


def _user_split(path: Path) -> set[str]:
    """Image names of a user's split list: one per line, or a CSV with an ``Image Index`` column
    (e.g. a predictions table); ``.png`` optional."""
    name = "nih_cxr14"
    if not path.is_file():
        raise FileNotFoundError(f"{name}: split_list {str(path)!r} does not exist")
    first = path.read_text().split("\n", 1)[0]
    if "Image Index" in first:
        table = read_table(path, name, ["Image Index"], dtype={"Image Index": str})
        values = table["Image Index"]
    else:
        values = pd.Series([ln.strip() for ln in path.read_text().splitlines() if ln.strip()])
    names = {v if v.endswith(".png") else f"{v}.png" for v in values.astype(str).str.strip()}
    if not names:
        raise ValueError(f"{name}: split_list {str(path)!r} lists no image")
    return names


def _select(df: pd.DataFrame, r: Path, split: str, split_list: str | None, csv: Path) -> pd.DataFrame:
    """The rows of ``split`` (official lists) or of the user's ``split_list``."""
    name = "nih_cxr14"
    if split_list is not None:
        path = Path(split_list) if Path(split_list).is_absolute() else r / split_list
        wanted = _user_split(path)
        missing = sorted(wanted - set(df["Image Index"]))
        if missing:
            raise ValueError(f"{name}: split_list {str(path)!r} names {len(missing)} image(s) not in "
                             f"{str(csv)!r}, e.g. {missing[:3]}")
        return df[df["Image Index"].isin(wanted)]
    if split == "all":
        return df
    lists = {"test": ["test_list.txt"], "train": ["train_val_list.txt"], "train_val": ["train_val_list.txt"]}
    list_file = split_file(r, lists, split, name=name, what="list", shown=("train", "train_val", "test", "all"))
    wanted = {ln.strip() for ln in list_file.read_text().splitlines() if ln.strip()}
    return df[df["Image Index"].isin(wanted)]


@cxr_loader("nih_cxr14", tags=("cxr", "classification", "multilabel"))
def nih_cxr14(
    root: str | Path,
    split: str = "test",
    *,
    release: str = "auto",
    label_file: str | None = None,
    split_list: str | None = None,
    opts: Options,
) -> CXRDataset:
    """NIH ChestX-ray14: a label release, the official ``train_val_list.txt`` / ``test_list.txt``
    or a user's ``split_list``, PNGs in any ``images*`` folder under ``root``.

    ``release``: ``"auto"`` (the newest file found: ``Data_Entry_2017_v2020.csv[.gz]``, else
    ``Data_Entry_2017.csv[.gz]``), ``"v2020"`` or ``"2017"``; ``label_file`` names the file
    (relative to ``root`` or absolute). ``split``: ``"test"``, ``"train"`` (= the official
    train_val list), ``"all"``; ``split_list`` (one image name per line, or a CSV with an
    ``Image Index`` column) picks the images instead, ``split`` then only tags them. Labels: the 14
    findings of :data:`NIH_PATHOLOGIES`, 0/1 ("No Finding" = all 0). The dataset's
    ``label_release`` (release, file, digests) goes into the run's manifest."""
    name = "nih_cxr14"
    r = dataset_root(root, name)
    csv, rel = _label_file(r, label_file, release)
    ids = {"Image Index": str, "Patient ID": str}
    df = read_table(csv, name, ["Image Index", "Finding Labels", "Patient ID"], dtype=ids)
    df = _select(df, r, split, split_list, csv)
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
    ds = opts.finish(
        man.drop(columns=["image_index", "image_stem"]),
        r,
        where=str(csv),
        paths_checked=True,
        classes=NIH_PATHOLOGIES,
        multilabel=True,
    )
    ds.label_release = nih_label_release(csv, rel)
    return ds
