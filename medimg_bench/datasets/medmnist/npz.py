"""Reading single arrays out of the official ``.npz`` files without unpickling (``allow_pickle=False``)."""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["npz_member"]


def _default_cache() -> Path:
    base = os.environ.get("MEDIMG_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "medimg_bench"
    )
    return Path(base) / "medmnist"


def npz_member(
    path: str | Path, key: str, *, mmap: bool = True, cache_dir: str | Path | None = None
) -> np.ndarray:
    """Array ``key`` of an ``.npz`` file, memory-mapped when possible (see the module docstring).

    Returns a read-only ``np.memmap`` (stored member, or cached ``.npy`` of a compressed one) or,
    with ``mmap=False``, an in-memory array. Never unpickles: object arrays raise ``ValueError``."""
    path = Path(path)
    name = f"{key}.npy"
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ValueError(f"cannot read {str(path)!r} as .npz: {exc}") from exc
    with zf:
        if name not in zf.namelist():
            raise KeyError(
                f"{str(path)!r} has no array {key!r} (has {[n[:-4] for n in zf.namelist()]})"
            )
        info = zf.getinfo(name)
        if not mmap:
            with zf.open(info) as f:
                return _read_npy(f, path, key)
        if info.compress_type == zipfile.ZIP_STORED:
            with open(path, "rb") as raw:
                raw.seek(info.header_offset)
                header = raw.read(30)
                if header[:4] != b"PK\x03\x04":
                    raise ValueError(f"{str(path)!r}: corrupt zip entry for {key!r}")
                name_len, extra_len = struct.unpack("<HH", header[26:30])
                raw.seek(info.header_offset + 30 + name_len + extra_len)
                shape, fortran, dtype = _npy_header(raw, path, key)
                offset = raw.tell()
            return np.memmap(
                path,
                dtype=dtype,
                mode="r",
                shape=shape,
                order="F" if fortran else "C",
                offset=offset,
            )
        cache = Path(cache_dir) if cache_dir is not None else _default_cache()
        stat = path.stat()
        target = cache / f"{path.stem}-{stat.st_size}-{int(stat.st_mtime)}" / name
        if not target.exists():
            from filelock import FileLock

            from medimg_bench._fs import atomic_write

            target.parent.mkdir(parents=True, exist_ok=True)
            # one process extracts (the others wait, then find it); the rename is atomic, so
            # no reader ever memory-maps a partial file
            with FileLock(str(target.parent / f".{name}.lock")):
                if not target.exists():
                    with zf.open(info) as f:
                        arr = _read_npy(f, path, key)
                    with atomic_write(target) as out:
                        np.save(out, arr, allow_pickle=False)
        return np.load(target, mmap_mode="r", allow_pickle=False)


def _npy_header(f: Any, path: Path, key: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: member {key!r} is not a .npy array ({exc})") from exc
    if dtype.hasobject:
        raise ValueError(
            f"{str(path)!r}: member {key!r} holds Python objects; refusing to unpickle"
        )
    return shape, fortran, dtype


def _read_npy(f: Any, path: Path, key: str) -> np.ndarray:
    try:
        return np.lib.format.read_array(f, allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: member {key!r} could not be read ({exc})") from exc
