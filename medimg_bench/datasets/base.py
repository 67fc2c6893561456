"""Manifest-backed datasets: list, filter, split and check before any pixel is read.

A manifest is a :class:`pandas.DataFrame` with one row per sample. Required column: ``id``
(unique). Conventional columns: ``patient_id`` (defaults to ``id``), ``study_id``, ``split``,
path columns (named in ``path_columns``; relative paths are resolved against ``root``), label
columns and any meta (``view``, ``modality``, ``sex``, ``age``, ``site``...). Subclasses
implement :meth:`ManifestDataset.load`, which turns one row into a sample dict.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.sample import SampleError

__all__ = ["ManifestDataset", "TableDataset", "read_manifest", "PathManifestDataset", "dataset_root"]

# manifest columns copied into sample["meta"] when present
META_COLUMNS = (
    "patient_id",
    "study_id",
    "modality",
    "view",
    "sex",
    "age",
    "site",
    "race",
    "split",
)


class ManifestDataset(torch.utils.data.Dataset):
    """A :class:`torch.utils.data.Dataset` whose samples are the rows of a manifest.

    Args:
        manifest: one row per sample, with a unique ``id`` column.
        root: directory that relative paths in ``path_columns`` are resolved against.
        path_columns: manifest columns holding file paths (checked by :meth:`check`).
        classes: class names (label order for classification, label values for segmentation).
        transform: callable applied to each sample dict after loading.
        name: dataset name used in messages and results.
    """

    task: str | None = None

    # rows the loader dropped on request, by reason (e.g. {"missing_label": 53})
    dropped: dict[str, int] = {}  # noqa: RUF012 - replaced per instance, never mutated

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None = None,
        path_columns: Sequence[str] = (),
        classes: Sequence[str] | None = None,
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        if "id" not in manifest.columns:
            raise ValueError(f"{name or type(self).__name__}: manifest has no 'id' column")
        manifest = manifest.reset_index(drop=True).copy()
        manifest["id"] = manifest["id"].astype(str)
        dup = manifest["id"][manifest["id"].duplicated()]
        if len(dup):
            raise ValueError(
                f"{name or type(self).__name__}: duplicate ids in manifest, e.g. {dup.iloc[0]!r} "
                f"({len(dup)} duplicates)"
            )
        if "patient_id" not in manifest.columns:
            manifest["patient_id"] = manifest["id"]
        else:  # a blank patient id must not merge unrelated samples into one bootstrap cluster
            known = manifest["patient_id"].notna() & (manifest["patient_id"].astype(str).str.strip() != "")
            manifest["patient_id"] = manifest["patient_id"].where(known, manifest["id"]).astype(str)
        self.manifest = manifest
        self.root = Path(root) if root is not None else None
        self.path_columns = tuple(path_columns)
        self.classes = list(classes) if classes is not None else None
        self.transform = transform
        self.name = name or type(self).__name__

    # -- table ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.manifest)

    @property
    def ids(self) -> list[str]:
        return self.manifest["id"].tolist()

    def sample_id(self, index: int) -> str:
        """The id of row ``index`` (no pixel read)."""
        return str(self.manifest["id"].iat[index])

    def row(self, index: int) -> dict[str, Any]:
        """Row ``index`` of the manifest as a dict (Python scalars)."""
        cols = self._columns()
        return {c: values[index] for c, values in cols.items()}

    def _columns(self) -> dict[str, list[Any]]:
        # the manifest as column lists, built once per manifest object: ``iloc[i].to_dict()``
        # costs ~70 us a sample, which the engine felt on fast models
        key = (id(self.manifest), self.manifest.shape, tuple(self.manifest.columns))
        cached = self.__dict__.get("_column_cache")
        if cached is None or cached[0] != key:
            cached = (key, {c: self.manifest[c].tolist() for c in self.manifest.columns})
            self.__dict__["_column_cache"] = cached
        return cached[1]

    def resolve(self, path: str | Path) -> Path:
        """Absolute path of a manifest path (relative ones are taken from ``root``)."""
        p = Path(path)
        if not p.is_absolute() and self.root is not None:
            p = self.root / p
        return p

    def with_manifest(self, manifest: pd.DataFrame) -> ManifestDataset:
        """A shallow copy of this dataset over another manifest (same root, transform, classes)."""
        new = copy.copy(self)
        new.manifest = manifest.reset_index(drop=True).copy()
        return new

    def filter(self, predicate: Callable[[pd.DataFrame], Any] | None = None, **equals: Any) -> ManifestDataset:
        """Rows where every ``column=value`` holds (a value may be a list: any of) and
        ``predicate(manifest)`` (a boolean mask) is true. Returns a new dataset."""
        mask = pd.Series(True, index=self.manifest.index)
        for col, value in equals.items():
            if col not in self.manifest.columns:
                raise KeyError(f"{self.name}: no manifest column {col!r} to filter on")
            if isinstance(value, (list, tuple, set)):
                mask &= self.manifest[col].isin(list(value))
            else:
                mask &= self.manifest[col] == value
        if predicate is not None:
            mask &= pd.Series(predicate(self.manifest), index=self.manifest.index).astype(bool)
        return self.with_manifest(self.manifest[mask])

    def subset(self, ids: Iterable[str]) -> ManifestDataset:
        """The rows whose id is in ``ids``, in manifest order."""
        wanted = {str(i) for i in ids}
        return self.with_manifest(self.manifest[self.manifest["id"].isin(wanted)])

    def fingerprint(self) -> str:
        """SHA-256 of the manifest (ids, paths, labels, meta) — identifies the exact data used."""
        h = hashlib.sha256()
        h.update(type(self).__name__.encode())
        h.update(pd.util.hash_pandas_object(self.manifest.astype(str), index=False).values.tobytes())
        h.update(json.dumps(self.classes).encode())
        return h.hexdigest()[:16]

    def check(self) -> list[dict[str, Any]]:
        """Problems found without reading pixels: missing files. One dict per problem."""
        problems: list[dict[str, Any]] = []
        for col in self.path_columns:
            if col not in self.manifest.columns:
                continue
            for sid, value in zip(self.manifest["id"], self.manifest[col]):
                if value is None or (isinstance(value, float) and pd.isna(value)):
                    continue
                for p in value if isinstance(value, (list, tuple)) else [value]:
                    path = self.resolve(p)
                    if not path.exists():
                        problems.append({"id": sid, "column": col, "path": str(path), "problem": "missing file"})
        return problems

    def meta_for(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The ``meta`` dict of a sample: the conventional meta columns present in ``row``."""
        meta = {}
        for col in META_COLUMNS:
            if col in row and not (isinstance(row[col], float) and pd.isna(row[col])):
                meta[col] = row[col]
        return meta

    # -- samples --------------------------------------------------------------------------------
    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:  # pragma: no cover - abstract
        """Read one manifest row into a sample dict (subclasses implement)."""
        raise NotImplementedError

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = self.row(index)
        try:
            sample = self.load(row)
        except SampleError:
            raise
        except (OSError, ValueError, RuntimeError, KeyError) as exc:
            path = next((str(self.resolve(row[c])) for c in self.path_columns if isinstance(row.get(c), str)), None)
            err = SampleError(f"{type(exc).__name__}: {exc}", sample_id=str(row["id"]), path=path)
            if hasattr(exc, "stage"):  # keep the stage a loader tagged ("target" for a label file)
                err.stage = exc.stage  # type: ignore[attr-defined]
            raise err from exc
        if self.transform is not None:
            sample = self.transform(sample)
        return sample

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, n={len(self)}, root={str(self.root)!r})"


def read_manifest(path: str | Path) -> pd.DataFrame:
    """Read a CSV or JSONL manifest; the error names the file if it cannot be read."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"manifest {str(path)!r} does not exist")
    try:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            return pd.read_json(path, lines=True, dtype=False)
        if path.suffix.lower() == ".json":
            return pd.read_json(path, dtype=False)
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype={"id": str, "patient_id": str})
    except ValueError as exc:
        raise ValueError(f"manifest {str(path)!r} could not be parsed: {exc}") from exc


class TableDataset(ManifestDataset):
    """A dataset from a generic CSV/JSONL manifest: an image path column, optional label/mask.

    Args:
        manifest: DataFrame, or path to a CSV/JSONL file (relative paths resolve against ``root``,
            which defaults to the manifest's folder).
        image_column: column holding the image path.
        label_columns: columns holding labels (one → multi-class int, several → multi-hot float).
        mask_column: column holding a mask path (segmentation).
    """

    def __init__(
        self,
        manifest: pd.DataFrame | str | Path,
        *,
        root: str | Path | None = None,
        image_column: str = "image",
        label_columns: Sequence[str] = (),
        mask_column: str | None = None,
        classes: Sequence[str] | None = None,
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(manifest, pd.DataFrame):
            root = root if root is not None else Path(manifest).parent
            manifest = read_manifest(manifest)
        for col in [image_column, *label_columns] + ([mask_column] if mask_column else []):
            if col not in manifest.columns:
                raise ValueError(f"{name or 'table dataset'}: manifest has no column {col!r}")
        self.image_column = image_column
        self.label_columns = list(label_columns)
        self.mask_column = mask_column
        paths = [image_column] + ([mask_column] if mask_column else [])
        super().__init__(
            manifest,
            root=root,
            path_columns=paths,
            classes=classes or (self.label_columns if len(self.label_columns) > 1 else None),
            transform=transform,
            name=name,
        )

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.grid import align_to_image_grid, read_target
        from medimg_bench.datasets.io import read_image, to_channel_first

        path = self.resolve(row[self.image_column])
        array, meta = read_image(path)
        image = to_channel_first(array, meta)
        sample: dict[str, Any] = {
            "id": str(row["id"]),
            "image": image,
            "meta": {**self.meta_for(row), **{k: v for k, v in meta.items() if k != "path"}, "path": str(path)},
        }
        if len(self.label_columns) == 1:
            sample["label"] = int(row[self.label_columns[0]])
        elif self.label_columns:
            sample["label"] = torch.tensor(
                [float(row[c]) if pd.notna(row[c]) else float("nan") for c in self.label_columns]
            )
        if self.mask_column:
            mpath = self.resolve(row[self.mask_column])
            marray, mmeta = read_target(mpath)
            marray = align_to_image_grid(
                marray, mmeta.get("affine"), meta.get("affine"),
                image_shape=tuple(image.shape[1:]), sample_id=str(row["id"]),
                image_path=path, mask_path=mpath,
            )
            sample["mask"] = torch.as_tensor(np.ascontiguousarray(marray)).long()
        return sample

class PathManifestDataset(ManifestDataset):
    """A manifest dataset whose rows each name one file, in the ``path`` column (relative to
    ``root``); subclasses implement ``load``."""

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None,
        classes: Sequence[str] | None = None,
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(
            manifest,
            root=root,
            path_columns=("path",),
            classes=classes,
            transform=transform,
            name=name,
        )


def dataset_root(root: str | Path | None, name: str) -> Path:
    """``root`` as an existing directory; raises naming dataset ``name`` when it is unset
    (``None``, empty or Hydra's ``???``) or not a directory."""
    if root is None or str(root) in ("", "???"):
        raise ValueError(f"{name}: set root= to the dataset directory as downloaded")
    p = Path(root).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"{name}: root {str(p)!r} is not a directory")
    return p
