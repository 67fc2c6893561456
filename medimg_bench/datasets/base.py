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

from medimg_bench.sample import SampleError, pixels_wanted, without_pixels

__all__ = ["ManifestDataset", "TableDataset", "read_manifest", "PathManifestDataset", "dataset_root",
           "dataset_identity", "without_pixels", "pixels_wanted"]

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

    #: False: the model reads no pixel (stored predictions): ``load`` leaves the input image out
    #: (built inside :func:`without_pixels`, or after :meth:`skip_pixels`)
    pixels: bool = True

    def __new__(cls, *args: Any, **kwargs: Any) -> ManifestDataset:
        # every option the dataset was built with is part of its identity (see ``fingerprint``):
        # the outermost constructor call is recorded here, defaults filled in, as plain values
        obj = super().__new__(cls)
        if not pixels_wanted():
            obj.pixels = False
        if args or kwargs:
            from medimg_bench._hashing import describe_call

            obj._built_with = {"class": f"{cls.__module__}.{cls.__qualname__}",
                               "options": describe_call(cls.__init__, (obj, *args), kwargs)}
        return obj

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
        """A digest (16 hex) of everything that decides the samples: the manifest (ids, paths,
        labels, meta), the content of every file it names (SHA-256, see :meth:`data_files`) and
        every option the dataset was built with. See :meth:`identity` for the parts."""
        return self.identity()["fingerprint"]

    def identity(self) -> dict[str, Any]:
        """The parts of :meth:`fingerprint`: ``manifest_sha256``, ``content_sha256`` over
        ``(manifest path, file digest)`` pairs, ``n_files`` / ``n_missing``, and ``options``
        (the declared parameters of the factory and the constructor, defaults included, neutral
        ones — where the data lies: ``root``, ``cache_dir`` … — left out). Paths under the
        dataset's root (in the manifest, the file list and the options) count relative to it, so
        a byte-identical copy elsewhere has the same identity (each root is written ``<root>``)."""
        from medimg_bench._hashing import canonical_json

        h = hashlib.sha256()
        h.update(type(self).__name__.encode())
        h.update(pd.util.hash_pandas_object(self._relative_manifest(), index=False).values.tobytes())
        h.update(json.dumps(self.classes).encode())
        manifest_sha = h.hexdigest()
        content_sha, n_files, n_missing = self._content_digest()
        options = self.options()
        whole = hashlib.sha256(f"{manifest_sha}\0{content_sha}\0{canonical_json(options)}".encode())
        return {"fingerprint": whole.hexdigest()[:16], "manifest_sha256": manifest_sha,
                "content_sha256": content_sha, "n_files": n_files, "n_missing": n_missing,
                "options": options}

    def location_roots(self) -> list[str]:
        """The folders paths are taken relative to in the identity: ``root`` and every neutral
        location option (``cache_dir``, ``image_root`` …) the dataset was built with, as given
        and absolute, longest first."""
        import os

        from medimg_bench.identity import neutral_params

        given = [self.root]
        for call in (self.__dict__.get("_declared"), self.__dict__.get("_built_with")):
            params = (call or {}).get("params") or (call or {}).get("options") or {}
            given += [v for k, v in params.items() if k in neutral_params(self) and k != "transform"]
        roots = set()
        for g in given:
            if isinstance(g, (str, os.PathLike)) and os.fspath(g) not in ("", ".", "/"):
                roots |= {os.fspath(g).rstrip("/\\"), os.path.abspath(g), os.path.realpath(g)}
        return sorted(roots, key=len, reverse=True)

    def _relative(self, value: Any, roots: Sequence[str]) -> Any:
        """``value`` with every occurrence of one of ``roots`` (a path under it, a ``repr`` naming
        it) written ``<root>``."""
        if isinstance(value, str):
            for r in roots:
                value = value.replace(r, "<root>")
            return value
        if isinstance(value, dict):
            return {k: self._relative(v, roots) for k, v in value.items()}
        if isinstance(value, list):
            return [self._relative(v, roots) for v in value]
        return value

    def _relative_manifest(self) -> pd.DataFrame:
        table = self.manifest.astype(str)
        roots = self.location_roots()
        for c in table.columns:
            col = table[c]
            for r in roots:
                if col.str.contains(r, regex=False).any():
                    col = col.str.replace(r, "<root>", regex=False)
            table[c] = col
        return table

    #: parameters that say where the data lies, not what it is (its content is in the identity)
    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        "mmap": "how the file is read (memory-mapped or loaded), not what it holds",
        **{k: "where the data lies: the content of every file it names is in the identity"
           for k in ("root", "cache_dir", "image_root", "jpg_root", "mimic_root", "pnt_root",
                     "segmask_root", "volume_root")},
    }

    def options(self) -> dict[str, Any]:
        """Every option that decides how samples are read and preprocessed, as plain values: the
        registered factory's declared parameters (:mod:`medimg_bench.identity`; the constructor's
        when no factory built it) and the current ``transform``. Neutral options (``root``, ``cache_dir`` …)
        are left out; paths under the dataset's root are relative to it."""
        from medimg_bench._hashing import plain_value
        from medimg_bench._secrets import redact_secrets
        from medimg_bench.identity import (
            identity_value,
            neutral_params,
            recorded_factory,
            recorded_params,
        )

        out: dict[str, Any] = {}
        factory = recorded_params(self)
        if factory is not None:
            out["factory"] = {"name": recorded_factory(self),
                              "options": {k: identity_value(v) for k, v in sorted(factory.items())}}
        call = self.__dict__.get("_built_with") if factory is None else None  # the factory decides the call
        if call:
            neutral = neutral_params(self)
            out["constructor"] = {"class": call["class"],
                                  "options": {k: v for k, v in call["options"].items() if k not in neutral}}
        out["transform"] = plain_value(self.transform)
        # a token option (hub access) decides nothing: never written
        return redact_secrets(self._relative(out, self.location_roots()))

    def data_files(self) -> list[tuple[str, str]]:
        """``(manifest value, absolute path)`` of every file a sample reads: the values of
        ``path_columns`` and of any other manifest column whose values name existing files
        (masks, reports, containers such as HDF5 or ``.npz``), lists of paths included; a folder
        stands for every file under it; an Analyze ``.hdr`` brings its ``.img``. Subclasses that
        read other files add them by overriding :meth:`extra_files`."""
        import os

        cols = self._columns()
        columns = [c for c in self.path_columns if c in cols]
        columns += [c for c in cols if c not in columns and c != "id" and self._names_files(cols[c])]
        base = os.fspath(self.root) if self.root is not None else ""
        seen: dict[str, str] = {}
        for c in columns:
            for value in cols[c]:
                for v in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(v, str) and v and v not in seen:  # os.path: ~10x pathlib's speed
                        seen[v] = os.path.abspath(os.path.join(base, v))
        out: list[tuple[str, str]] = []
        for v, p in seen.items():
            if os.path.isdir(p):
                from medimg_bench._hashing import tree_files

                out += [(f"{v}/{f.relative_to(p).as_posix()}", os.fspath(f)) for f in tree_files(p)]
            else:
                out.append((v, p))
                if p.lower().endswith(".hdr") and os.path.exists(p[:-4] + ".img"):
                    out.append((v[:-4] + ".img", p[:-4] + ".img"))
        return out + [(str(p), os.path.abspath(p)) for p in self.extra_files()]

    def extra_files(self) -> list[Path]:
        """Files every sample depends on that the manifest does not name (none by default)."""
        return []

    def _names_files(self, values: Sequence[Any]) -> bool:
        """True when a column's first non-empty value is a path to an existing file or folder."""
        for value in values:
            v = value[0] if isinstance(value, (list, tuple)) and value else value
            if isinstance(v, str) and v.strip():
                # a path has a folder or a suffix: a class name that is also a folder is a label
                if len(v) > 4096 or "\n" in v or not ("/" in v or "\\" in v or Path(v).suffix):
                    return False
                try:
                    return self.resolve(v).exists()
                except (OSError, ValueError):
                    return False
            if v is not None and not (isinstance(v, float) and pd.isna(v)):
                return False
        return False

    def _content_digest(self) -> tuple[str, int, int]:
        """SHA-256 over ``(manifest value, content SHA-256)`` of :meth:`data_files`, sorted; the
        file count and how many are missing."""
        from medimg_bench._hashing import MISSING, hash_files

        files = self.data_files()
        digests = hash_files([p for _, p in files], what=f"dataset {self.name}")
        roots = self.location_roots()
        h = hashlib.sha256()
        missing = 0
        for v, p in sorted(((self._relative(v, roots), p) for v, p in files), key=lambda vp: vp[0]):
            d = digests[p]
            missing += d == MISSING
            h.update(f"{v}\0{d}\n".encode())
        return h.hexdigest(), len(files), missing

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

    # -- accounting: items the layout lists that are not samples -------------------------------
    @property
    def exclusions(self) -> list[dict[str, str]]:
        """Items the dataset's layout lists that are not samples, each ``{"id", "file",
        "reason"}`` (a slide without tissue, a reference row whose file is not on disk): filled
        by the loader while it builds the manifest (:meth:`exclude`), counted and shown by the
        engine (``summary.json`` ``n_excluded`` / ``exclusions``, the console, ``report.html``)
        and by ``datasets check``. Every item a layout lists is a sample or an exclusion."""
        return [dict(e) for e in self.__dict__.get("_exclusions", (None, {}))[1].values()]

    def exclude(self, item_id: str, *, reason: str, file: str | Path | None = None, kind: str = "excluded") -> None:
        """Record that the layout's item ``item_id`` (read from ``file``) is not a sample, and why.
        ``kind`` tells a protocol over larger units what the item is to it: ``"no_tiles"`` — a
        slide of the set that yields no tile, which a slide-level protocol (``protocol=mil``)
        counts as a failed slide; ``"excluded"`` — anything else."""
        entry = {"id": str(item_id), "file": "" if file is None else str(file), "reason": str(reason),
                 "kind": str(kind)}
        owner, table = self.__dict__.get("_exclusions", (None, {}))
        if owner != id(self):  # a filtered or subset copy still shares its parent's table: copy on write
            table = dict(table)
            self.__dict__["_exclusions"] = (id(self), table)
        table.setdefault(tuple(entry.values()), entry)  # recorded once however often it is found

    # -- samples --------------------------------------------------------------------------------
    def skip_pixels(self) -> None:
        """Samples from now on leave out the input image (the model reads none)."""
        self.pixels = False

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
            return pd.read_json(path, lines=True, dtype=False, encoding="utf-8-sig")
        if path.suffix.lower() == ".json":
            return pd.read_json(path, dtype=False, encoding="utf-8-sig")
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


def dataset_identity(dataset: Any) -> dict[str, Any]:
    """What a run's key holds of its data: :meth:`ManifestDataset.identity` (manifest, file
    contents, options), else the ``fingerprint()`` of a dataset that has one, else only its
    class and length (said in the key)."""
    if callable(getattr(dataset, "identity", None)):
        out = dict(dataset.identity())
    elif callable(getattr(dataset, "fingerprint", None)):
        out = {"fingerprint": dataset.fingerprint()}
    else:
        out = {"fingerprint": None, "class": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
               "n_samples": len(dataset),
               "note": "the dataset has no fingerprint(): only its class and length are checked"}
    hub = getattr(dataset, "hub_source", None)  # root=hf://…: set by DATASETS.create
    return out if not hub else {**out, "hub": hub_identity(hub)}


def hub_identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a key holds of a dataset read from the Hugging Face Hub: repository, revision asked,
    the commit it resolved to (so a resume across revisions is refused even where the files
    it reads are the same) and one SHA-256 over every file's digest; the manifest keeps the
    whole record (every file)."""
    from medimg_bench._hashing import canonical_json

    files = hashlib.sha256(canonical_json(record.get("files") or {}).encode()).hexdigest()
    return {k: record.get(k) for k in ("repo_id", "revision", "commit", "folder")} | {"files_sha256": files}
