"""Pathology datasets: PatchCamelyon (HDF5), class-per-folder tiles (NCT-CRC-HE, BACH), MHIST,
and tiles cut from whole-slide images (tiffslide or openslide) for tile- and slide-level (MIL)
evaluation.

Images are RGB ``3×H×W`` float32 in [0, 1] (8-bit / 255, 16-bit / 65535); ``label`` is an int
index into ``classes``. h5py, PIL, tiffslide and openslide are imported when first used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets._common import PathManifestDataset, dataset_root
from medimg_bench.registry import register_dataset

__all__ = [
    "PCamDataset",
    "PathologyImageDataset",
    "WSITileDataset",
    "pcam",
    "image_folder",
    "mhist",
    "wsi_tiles",
    "otsu_threshold",
    "tissue_mask",
    "select_level",
]

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".tif", ".tiff", ".png", ".jpg", ".jpeg", ".bmp")


def _unit_rgb(array: np.ndarray, path: str) -> torch.Tensor:
    """``H×W(×C)`` uint8/uint16 → float32 ``3×H×W`` (or ``1×H×W`` for grey) in [0, 1]."""
    a = np.asarray(array)
    if a.ndim == 3 and a.shape[-1] in (2, 4):
        a = a[..., :-1]  # drop alpha
    if a.dtype == np.uint8:
        scale = 255.0
    elif a.dtype == np.uint16:
        scale = 65535.0
    elif a.dtype == np.bool_:
        scale = 1.0
    else:
        raise ValueError(
            f"{path!r}: unsupported pixel type {a.dtype} for a pathology image (expected 8/16-bit)"
        )
    x = a.astype(np.float32) / np.float32(scale)
    x = np.moveaxis(x, -1, 0) if x.ndim == 3 else x[None]
    return torch.from_numpy(np.ascontiguousarray(x))


# -- PatchCamelyon ---------------------------------------------------------------------------------


class PCamDataset(PathManifestDataset):
    """PatchCamelyon patches read lazily from the official HDF5 files (one handle per process)."""

    task = "classification"

    def __init__(
        self, manifest: pd.DataFrame, *, root: Path, x_file: str, transform: Callable | None = None
    ) -> None:
        super().__init__(
            manifest,
            root=root,
            classes=("normal", "tumor"),
            transform=transform,
            name="pcam",
        )
        self.x_file = x_file
        self._handle: Any = None
        self._pid: int | None = None

    def __getstate__(self) -> dict[str, Any]:  # h5py handles do not pickle: reopen in each worker
        state = dict(self.__dict__)
        state["_handle"], state["_pid"] = None, None
        return state

    def _x(self) -> Any:
        if self._handle is None or self._pid != os.getpid():
            import h5py

            path = self.resolve(self.x_file)
            try:
                self._handle = h5py.File(path, "r")["x"]
            except (OSError, KeyError) as exc:
                raise ValueError(f"pcam: cannot read key 'x' of {str(path)!r}: {exc}") from exc
            self._pid = os.getpid()
        return self._handle

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        x = self._x()
        idx = int(row["index"])
        patch = np.asarray(x[idx])
        if patch.shape != (96, 96, 3) or patch.dtype != np.uint8:
            raise ValueError(
                f"pcam: patch {idx} of {self.x_file!r} has shape {patch.shape} {patch.dtype}, expected (96, 96, 3) uint8"
            )
        meta = self.meta_for(row)
        meta.update(modality="pathology", path=str(self.resolve(self.x_file)), index=idx)
        for c in ("coord_x", "coord_y", "center_tumor_patch"):
            if c in row and pd.notna(row[c]):
                meta[c] = row[c]
        return {
            "id": str(row["id"]),
            "image": _unit_rgb(patch, self.x_file),
            "label": int(row["label"]),
            "meta": meta,
        }


def _h5_file(r: Path, stem: str, name: str) -> Path:
    p = r / f"{stem}.h5"
    if p.exists():
        return p
    if (r / f"{stem}.h5.gz").exists():
        raise FileNotFoundError(
            f"{name}: found {stem}.h5.gz in {str(r)!r}; decompress it first (gunzip keeps HDF5 random access)"
        )
    raise FileNotFoundError(f"{name}: {str(p)!r} does not exist")


@register_dataset("pcam", tags=("pathology", "classification"))
def pcam(
    root: str | Path, split: str = "test", *, transform: Callable | None = None
) -> PCamDataset:
    """PatchCamelyon: ``camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5`` (keys ``x``:
    N×96×96×3 uint8, ``y``: N×1×1×1) and, when present, ``..._{split}_meta.csv`` (``coord_y,
    coord_x, tumor_patch, center_tumor_patch, wsi``: ``patient_id`` = source slide).

    Labels (read at build, N bytes): 1 = tumor tissue in the central 32×32 px. Patches are read
    lazily. ``split``: ``train``, ``valid`` (or ``val``), ``test``."""
    name = "pcam"
    r = dataset_root(root, name)
    split = {"val": "valid", "validation": "valid"}.get(split, split)
    if split not in ("train", "valid", "test"):
        raise ValueError(f"{name}: split must be 'train', 'valid' or 'test', got {split!r}")
    import h5py

    stem = f"camelyonpatch_level_2_split_{split}"
    x_path, y_path = _h5_file(r, f"{stem}_x", name), _h5_file(r, f"{stem}_y", name)
    try:
        with h5py.File(y_path, "r") as f:
            y = np.asarray(f["y"]).reshape(-1)
        with h5py.File(x_path, "r") as f:
            n_x, shape = f["x"].shape[0], f["x"].shape[1:]
    except (OSError, KeyError) as exc:
        raise ValueError(
            f"{name}: cannot read {str(x_path)!r}/{str(y_path)!r} (keys 'x'/'y'): {exc}"
        ) from exc
    if n_x != len(y):
        raise ValueError(
            f"{name}: {x_path.name} has {n_x} patches but {y_path.name} has {len(y)} labels"
        )
    if tuple(shape) != (96, 96, 3):
        raise ValueError(f"{name}: {x_path.name} patches are {tuple(shape)}, expected (96, 96, 3)")
    bad = ~np.isin(y, [0, 1])
    if bad.any():
        raise ValueError(
            f"{name}: {y_path.name} label {int(y[bad][0])} at index {int(np.flatnonzero(bad)[0])} is not 0 or 1"
        )
    man = pd.DataFrame(
        {
            "id": [f"{split}_{i:06d}" for i in range(len(y))],
            "index": np.arange(len(y)),
            "label": y.astype(int),
        }
    )
    man["path"] = x_path.name
    meta_csv = r / f"{stem}_meta.csv"
    if meta_csv.exists():
        meta = pd.read_csv(meta_csv)
        if len(meta) != len(man):
            raise ValueError(f"{name}: {meta_csv.name} has {len(meta)} rows for {len(man)} patches")
        if "wsi" in meta:
            man["patient_id"] = meta["wsi"].astype(str).to_numpy()
        for c in ("coord_x", "coord_y", "center_tumor_patch"):
            if c in meta:
                man[c] = meta[c].to_numpy()
    return PCamDataset(man, root=r, x_file=x_path.name, transform=transform)


# -- folders of tiles and MHIST --------------------------------------------------------------------


class PathologyImageDataset(PathManifestDataset):
    """Pathology images listed in a manifest (``path``, int ``label``), read with PIL/tifffile."""

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: Path,
        classes: Sequence[str],
        name: str,
        transform: Callable | None = None,
        meta_columns: Sequence[str] = (),
    ) -> None:
        super().__init__(manifest, root=root, classes=classes, transform=transform, name=name)
        self.meta_columns = tuple(meta_columns)

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.io import read_image

        path = self.resolve(row["path"])
        array, _ = read_image(path)
        meta = self.meta_for(row)
        meta.update(modality="pathology", path=str(path))
        meta.update({c: row[c] for c in self.meta_columns if c in row})
        return {
            "id": str(row["id"]),
            "image": _unit_rgb(array, str(path)),
            "label": int(row["label"]),
            "meta": meta,
        }


@register_dataset("image_folder", tags=("pathology", "classification", "generic"))
def image_folder(
    root: str | Path,
    split: str = "test",
    *,
    split_dirs: Mapping[str, str] | None = None,
    classes: Sequence[str] | None = None,
    suffixes: Sequence[str] = IMAGE_SUFFIXES,
    transform: Callable | None = None,
) -> PathologyImageDataset:
    """One folder per class (``<dir>/<class>/<image>``): NCT-CRC-HE-100K / CRC-VAL-HE-7K (.tif,
    classes ADI BACK DEB LYM MUC MUS NORM STR TUM), BACH ``Photos/{Benign,InSitu,Invasive,Normal}``.

    The folder read is ``root/split_dirs[split]`` when ``split_dirs`` is given (e.g.
    ``{"train": "NCT-CRC-HE-100K", "test": "CRC-VAL-HE-7K"}``), else ``root/split`` if that
    folder exists, else ``root``. ``classes`` defaults to the sorted sub-folder names; a folder
    not in a given ``classes`` list raises. Ids are ``<class>/<file stem>``."""
    name = "image_folder"
    r = dataset_root(root, name)
    if split_dirs is not None:
        if split not in split_dirs:
            raise ValueError(f"{name}: split {split!r} not in split_dirs {dict(split_dirs)}")
        d = r / split_dirs[split]
    else:
        d = r / split if (r / split).is_dir() else r
    if not d.is_dir():
        raise FileNotFoundError(f"{name}: {str(d)!r} is not a directory")
    sfx = tuple(s.lower() for s in suffixes)
    folders = {}
    for sub in sorted(p for p in d.iterdir() if p.is_dir()):
        files = sorted(f for f in sub.rglob("*") if f.is_file() and f.suffix.lower() in sfx)
        if files:
            folders[sub.name] = files
    if not folders:
        raise ValueError(f"{name}: no class folders with images ({', '.join(sfx)}) in {str(d)!r}")
    cls = list(classes) if classes is not None else sorted(folders)
    extra = sorted(set(folders) - set(cls))
    if extra:
        raise ValueError(f"{name}: folder(s) {extra} in {str(d)!r} are not in classes {cls}")
    rows = []
    for c, files in folders.items():
        for f in files:
            rel = f.relative_to(d)
            rows.append(
                {
                    "id": str(rel.with_suffix("")),
                    "path": str(f.relative_to(r)),
                    "label": cls.index(c),
                    "class_name": c,
                }
            )
    return PathologyImageDataset(
        pd.DataFrame(rows),
        root=r,
        classes=cls,
        name=name,
        transform=transform,
        meta_columns=("class_name",),
    )


@register_dataset("mhist", tags=("pathology", "classification"))
def mhist(
    root: str | Path, split: str = "test", *, transform: Callable | None = None
) -> PathologyImageDataset:
    """MHIST: ``annotations.csv`` (``Image Name``, ``Majority Vote Label`` HP/SSA, ``Number of
    Annotators who Selected SSA`` (of 7), ``Partition`` train/test) and ``images/<Image Name>``.

    Classes ``["HP", "SSA"]``; ``meta['n_ssa_votes']`` keeps the annotator agreement."""
    name = "mhist"
    r = dataset_root(root, name)
    if split not in ("train", "test", "all"):
        raise ValueError(f"{name}: split must be 'train', 'test' or 'all', got {split!r}")
    csv = r / "annotations.csv"
    if not csv.exists():
        raise FileNotFoundError(f"{name}: {str(csv)!r} does not exist")
    df = pd.read_csv(csv, dtype={"Image Name": str})
    df.columns = [c.strip() for c in df.columns]
    cols = ["Image Name", "Majority Vote Label", "Partition"]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: {str(csv)!r} has no column(s) {missing}")
    df["_line"] = np.arange(len(df)) + 2
    classes = ["HP", "SSA"]
    bad = ~df["Majority Vote Label"].isin(classes)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]} (image {df['Image Name'].iloc[i]!r}): label "
            f"{df['Majority Vote Label'].iloc[i]!r} is not one of {classes}"
        )
    if split != "all":
        df = df[df["Partition"].str.strip().str.lower() == split]
    man = pd.DataFrame(
        {
            "id": df["Image Name"].str.replace(r"\.\w+$", "", regex=True),
            "path": "images/" + df["Image Name"],
            "label": df["Majority Vote Label"]
            .map({c: i for i, c in enumerate(classes)})
            .astype(int),
            "split": df["Partition"].str.strip().str.lower(),
        }
    )
    if "Number of Annotators who Selected SSA" in df:
        man["n_ssa_votes"] = df["Number of Annotators who Selected SSA"].astype(int)
    exists = np.array([(r / p).exists() for p in man["path"]], dtype=bool)
    if not exists.all():
        i = int(np.flatnonzero(~exists)[0])
        raise FileNotFoundError(
            f"{name}: {str(csv)!r} line {df['_line'].iloc[i]}: image {str(r / man['path'].iloc[i])!r} does not exist"
        )
    return PathologyImageDataset(
        man, root=r, classes=classes, name=name, transform=transform, meta_columns=("n_ssa_votes",)
    )


from medimg_bench.datasets.pathology_wsi import (  # noqa: E402  (re-export; registers wsi_tiles)
    WSITileDataset,
    otsu_threshold,
    select_level,
    tissue_mask,
    wsi_tiles,
)
