"""The ``pcam`` dataset. PatchCamelyon: ``camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5`` (keys ``x``:
N×96×96×3 uint8, ``y``: N×1×1×1) and, when present, ``..._{split}_meta.csv`` (``coord_y,
coord_x, tumor_patch, center_tumor_patch, wsi``: ``patient_id`` = source slide)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import PathManifestDataset, dataset_root
from medimg_bench.datasets.pathology.pixels import unit_rgb
from medimg_bench.registry import register_dataset

__all__ = ["PCamDataset", "pcam"]


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
            "image": unit_rgb(patch, self.x_file),
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
