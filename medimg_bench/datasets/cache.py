"""Opt-in, bounded sample caches that wrap any dataset.

* :class:`CachedDataset` keeps loaded samples in memory, least recently used first out, within
  ``max_bytes``. The cache lives in the process that reads: with a ``DataLoader`` of
  ``num_workers > 0`` each worker fills its own copy (N workers → up to N × ``max_bytes``), so use
  it with ``num_workers=0`` or call :meth:`CachedDataset.warm` before the loader forks its workers
  (forked workers then share the warmed tensors' pages copy-on-write).
* :class:`DiskCache` stores each loaded sample once on disk as a safetensors file (tensors) with
  its non-tensor fields as JSON in the file's metadata — never pickle. Workers and concurrent
  jobs share the one directory (and the OS page cache), so nothing is duplicated per worker.
  Writes go to a temporary file renamed into place, so concurrent writers never expose a partial
  file. The key covers the manifest row, each file's path, size and mtime, and ``transform_key``.

Random augmentations should not be cached: give them as the wrapper's ``transform``, which runs
after the cache on every access; the wrapped dataset's own (deterministic) transform is cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench._fs import atomic_path, is_temporary

__all__ = ["CachedDataset", "DiskCache", "sample_nbytes"]

log = logging.getLogger(__name__)

_FORMAT_VERSION = 1


def sample_nbytes(obj: Any) -> int:
    """Approximate memory held by a sample: tensor/array bytes plus string lengths (bytes)."""
    if isinstance(obj, torch.Tensor):
        return obj.element_size() * obj.nelement()
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, Mapping):
        return sum(sample_nbytes(k) + sample_nbytes(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return sum(sample_nbytes(v) for v in obj)
    if isinstance(obj, (str, bytes)):
        return len(obj)
    return 8


def _copy(obj: Any, *, clone: bool) -> Any:
    """Copy containers (and tensors/arrays when ``clone``) so callers cannot alter the cache."""
    if isinstance(obj, torch.Tensor):
        return obj.clone() if clone else obj
    if isinstance(obj, np.ndarray):
        return obj.copy() if clone else obj
    if isinstance(obj, dict):
        return {k: _copy(v, clone=clone) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy(v, clone=clone) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_copy(v, clone=clone) for v in obj)
    return obj


class Wrapper(torch.utils.data.Dataset):
    """Forwards unknown attributes (manifest, classes, name, ...) to the wrapped dataset."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        # __getattr__ runs only for missing attributes; guard against recursion while unpickling
        if name.startswith("__") or "dataset" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def _key_of(self, index: int) -> str:
        sample_id = getattr(self.dataset, "sample_id", None)
        return str(sample_id(index)) if callable(sample_id) else str(index)


class CachedDataset(Wrapper):
    """In-memory LRU cache of ``dataset[i]`` bounded by ``max_bytes`` (per process).

    Args:
        dataset: any map-style dataset (a ``ManifestDataset`` is keyed by sample id).
        max_bytes: memory budget in bytes for cached samples; a sample larger than it is not kept.
        transform: applied to every returned sample after the cache (random augmentation).
        copy: return copies of cached tensors (True) or the cached tensors themselves (faster, but
            an in-place change by the caller would alter the cache).
    """

    def __init__(
        self,
        dataset: Any,
        *,
        max_bytes: int = 2 << 30,
        transform: Callable[[dict], dict] | None = None,
        copy: bool = True,
    ) -> None:
        super().__init__(dataset)
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.transform = transform
        self.copy = copy
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def __getitem__(self, index: int) -> Any:
        key = self._key_of(index)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
        if hit is None:
            sample = self.dataset[index]
            self._put(key, sample)
            out = _copy(sample, clone=self.copy)
        else:
            out = _copy(hit[0], clone=self.copy)
        return self.transform(out) if self.transform is not None else out

    def _put(self, key: str, sample: Any) -> None:
        size = sample_nbytes(sample)
        with self._lock:
            self.misses += 1
            if size > self.max_bytes or key in self._items:
                return
            while self._items and self._bytes + size > self.max_bytes:
                _, (_, old) = self._items.popitem(last=False)
                self._bytes -= old
                self.evictions += 1
            self._items[key] = (sample, size)
            self._bytes += size

    def warm(self, indices: Iterable[int] | None = None) -> int:
        """Load ``indices`` (default: all, until the budget is full) into the cache now; returns
        the number of samples cached. Call before creating a forking ``DataLoader``."""
        for i in range(len(self)) if indices is None else indices:
            key = self._key_of(i)
            if key in self._items:
                continue
            self._put(key, self.dataset[i])
            if indices is None and self._bytes >= self.max_bytes:
                break
        return len(self._items)

    def clear(self) -> None:
        """Drop every cached sample."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def cache_info(self) -> dict[str, int]:
        """Counters: ``hits``, ``misses``, ``evictions``, ``items``, ``bytes``, ``max_bytes``."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "items": len(self._items),
            "bytes": self._bytes,
            "max_bytes": self.max_bytes,
        }

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


# -- on-disk cache -----------------------------------------------------------------------------


def _encode(obj: Any, tensors: dict[str, torch.Tensor], path: str) -> Any:
    """JSON tree of ``obj`` with tensors/arrays moved to ``tensors`` (TypeError if unsupported)."""
    if isinstance(obj, torch.Tensor):
        tensors[path] = obj.detach().cpu().contiguous().clone()
        return {"__tensor__": path}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"array of dtype {obj.dtype} at {path!r} cannot be cached")
        tensors[path] = torch.from_numpy(np.array(obj, copy=True, order="C"))
        return {"__ndarray__": path}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"non-string key {k!r} at {path!r} cannot be cached")
            out[k] = _encode(v, tensors, f"{path}.{k}" if path else k)
        return {"__dict__": out}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else {"__float__": repr(obj)}
    raise TypeError(f"value of type {type(obj).__name__} at {path!r} cannot be cached")


def _decode(obj: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if "__ndarray__" in obj:
        return tensors[obj["__ndarray__"]].numpy()
    if "__dict__" in obj:
        return {k: _decode(v, tensors) for k, v in obj["__dict__"].items()}
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors) for v in obj["__tuple__"])
    if "__float__" in obj:
        return float(obj["__float__"])
    raise ValueError(f"unknown cache record {sorted(obj)}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and pd.isna(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


class DiskCache(Wrapper):
    """Cache of ``dataset[i]`` on disk, shared by workers and processes.

    Args:
        dataset: any map-style dataset; a ``ManifestDataset``'s keys include its manifest row and
            the path, size and mtime of every file in its ``path_columns`` (edits invalidate).
        cache_dir: directory of the cache files (created if needed).
        transform_key: a name for the wrapped dataset's transform (e.g. ``"resize512-v1"``);
            required when that dataset has a transform, since a changed transform must not hit
            old entries. Change it when the transform changes.
        transform: applied to every returned sample after the cache (random augmentation).
        max_bytes: optional disk budget in bytes; when exceeded, the least recently used files are
            deleted (checked every ``prune_every`` writes by each process).
    """

    suffix = ".safetensors"

    def __init__(
        self,
        dataset: Any,
        cache_dir: str | Path,
        *,
        transform_key: str | None = None,
        transform: Callable[[dict], dict] | None = None,
        max_bytes: int | None = None,
        prune_every: int = 64,
    ) -> None:
        super().__init__(dataset)
        inner_transform = getattr(dataset, "transform", None)
        if inner_transform is not None and transform_key is None:
            raise ValueError(
                f"DiskCache: {getattr(dataset, 'name', type(dataset).__name__)} has a transform "
                f"({inner_transform!r}); pass transform_key= naming it so that entries made with "
                "another transform are never returned"
            )
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.transform_key = transform_key or ""
        self.transform = transform
        self.max_bytes = max_bytes
        self.prune_every = max(1, int(prune_every))
        self._writes = 0
        self._warned = False
        self.hits = self.misses = 0

    # -- keys -----------------------------------------------------------------------------------
    def key(self, index: int) -> str:
        """The cache key (hex SHA-1) of sample ``index``."""
        parts: dict[str, Any] = {
            "v": _FORMAT_VERSION,
            "dataset": type(self.dataset).__name__,
            "transform": self.transform_key,
        }
        manifest = getattr(self.dataset, "manifest", None)
        if isinstance(manifest, pd.DataFrame):
            row = manifest.iloc[index].to_dict()
            parts["row"] = {str(k): _jsonable(v) for k, v in sorted(row.items(), key=lambda kv: str(kv[0]))}
            parts["classes"] = _jsonable(getattr(self.dataset, "classes", None))
            files = []
            resolve = getattr(self.dataset, "resolve", Path)
            for col in getattr(self.dataset, "path_columns", ()):
                value = row.get(col)
                for v in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(v, (str, Path)):
                        p = resolve(v)
                        try:
                            st = os.stat(p)
                            files.append([str(p), st.st_size, st.st_mtime_ns])
                        except OSError:
                            files.append([str(p), None, None])
            parts["files"] = files
        else:
            parts["index"] = index
        blob = json.dumps(parts, sort_keys=True, default=str).encode()
        return hashlib.sha1(blob, usedforsecurity=False).hexdigest()

    def path_for(self, key: str) -> Path:
        """The file holding entry ``key`` (two-level fan-out keeps directories small)."""
        return self.cache_dir / key[:2] / f"{key}{self.suffix}"

    # -- read / write -----------------------------------------------------------------------------
    def __getitem__(self, index: int) -> Any:
        key = self.key(index)
        path = self.path_for(key)
        sample = self._read(path)
        if sample is None:
            self.misses += 1
            sample = self.dataset[index]
            self._write(path, sample, index)
        else:
            self.hits += 1
        return self.transform(sample) if self.transform is not None else sample

    def _read(self, path: Path) -> Any | None:
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged entry: drop it and reload from the source
            log.warning("cache entry %s is unreadable (%s); reloading the sample", path, exc)
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(path)  # recency for pruning
        except OSError:
            pass
        return _decode(json.loads(meta["sample"]), tensors)

    def _write(self, path: Path, sample: Any, index: int) -> None:
        from safetensors.torch import save_file

        tensors: dict[str, torch.Tensor] = {}
        try:
            tree = _encode(sample, tensors, "")
        except TypeError as exc:
            if not self._warned:
                log.warning("sample %d not cached on disk: %s", index, exc)
                self._warned = True
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # atomic: readers see the old file, the new one, or none
        with atomic_path(path, fsync=False) as tmp:
            save_file(tensors, str(tmp), metadata={"sample": json.dumps(tree), "format": str(_FORMAT_VERSION)})
        self._writes += 1
        if self.max_bytes is not None and self._writes % self.prune_every == 0:
            self.prune()

    def warm(self, indices: Iterable[int] | None = None) -> int:
        """Write the entries of ``indices`` (default: all) that are missing; returns how many
        were written."""
        written = 0
        for i in range(len(self)) if indices is None else indices:
            path = self.path_for(self.key(i))
            if not path.exists():
                self._write(path, self.dataset[i], i)
                written += 1
        return written

    # -- housekeeping -----------------------------------------------------------------------------
    def _entries(self) -> list[tuple[Path, os.stat_result]]:
        out = []
        for p in self.cache_dir.glob(f"*/*{self.suffix}"):
            if is_temporary(p):
                continue
            try:
                out.append((p, p.stat()))
            except OSError:
                continue  # deleted by another process meanwhile
        return out

    def prune(self, max_bytes: int | None = None) -> int:
        """Delete least recently used entries until the cache holds at most ``max_bytes`` (default:
        the cache's budget); returns the number of files deleted."""
        budget = self.max_bytes if max_bytes is None else max_bytes
        if budget is None:
            return 0
        entries = sorted(self._entries(), key=lambda e: e[1].st_mtime_ns)
        total = sum(st.st_size for _, st in entries)
        removed = 0
        for p, st in entries:
            if total <= budget:
                break
            try:
                p.unlink()
                removed += 1
            except OSError:
                pass
            total -= st.st_size
        return removed

    def clear(self) -> None:
        """Delete every entry of this cache directory."""
        for p, _ in self._entries():
            try:
                p.unlink()
            except OSError:
                pass

    def cache_info(self) -> dict[str, Any]:
        """This process's ``hits``/``misses`` and the directory's ``items`` and ``bytes``."""
        entries = self._entries()
        return {
            "hits": self.hits,
            "misses": self.misses,
            "items": len(entries),
            "bytes": sum(st.st_size for _, st in entries),
            "max_bytes": self.max_bytes,
            "cache_dir": str(self.cache_dir),
        }
