"""Readers shared by the VQA loaders: image decoding, row-error policy, JSON/JSONL files,
lazily read parquet image cells and base64 TSV images. Imported by :mod:`vqa` and
:mod:`reports`; the leading underscore keeps the registry from scanning it."""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.datasets.io import ImageReadError
from medimg_bench.sample import SampleError

log = logging.getLogger("medimg_bench.datasets.vqa")


def decode_image(source: str | Path | bytes, *, where: str | None = None) -> torch.Tensor:
    """Float32 ``C×H×W`` tensor in ``[0, 1]`` from an image file or encoded bytes.

    8-bit images are divided by 255, 16-bit by 65535; grey stays 1 channel, colour (RGB, RGBA,
    palette, CMYK) becomes 3-channel RGB. ``where`` names the source in errors (default: path).
    """
    from PIL import Image, UnidentifiedImageError

    name = where or str(source if not isinstance(source, bytes) else "<bytes>")
    if isinstance(source, bytes):
        if not source:
            raise ImageReadError(name, "empty image bytes")
        handle: Any = io.BytesIO(source)
    else:
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"image {str(path)!r} does not exist")
        handle = path
    try:
        with Image.open(handle) as im:
            im.load()
            mode = im.mode
            if mode.startswith("I;16") or mode == "I":
                a = np.asarray(im, dtype=np.float32) / 65535.0
            elif mode == "F":
                a = np.asarray(im, dtype=np.float32)
            elif mode in ("L", "1", "LA"):
                a = np.asarray(im.convert("L"), dtype=np.float32) / 255.0
            else:
                a = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ImageReadError(name, f"not a readable image ({exc})") from exc
    a = a[None] if a.ndim == 2 else np.moveaxis(a, -1, 0)
    return torch.from_numpy(np.ascontiguousarray(a))


class RowErrors:
    """Raise on a bad row (default) or record it and log the count at the end."""

    def __init__(self, name: str, on_error: str) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"{name}: on_error must be 'raise' or 'skip', got {on_error!r}")
        self.name, self.on_error, self.skipped = name, on_error, 0

    def __call__(self, file: str | Path, row: Any, problem: str) -> None:
        message = f"{self.name}: {str(file)!r} row {row}: {problem}"
        if self.on_error == "raise":
            raise ValueError(message)
        self.skipped += 1
        log.debug("skipping %s", message)

    def finish(self) -> None:
        if self.skipped:
            log.warning("%s: skipped %d bad row(s) (on_error='skip')", self.name, self.skipped)


def load_json(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"{str(path)!r} does not exist")
    try:
        with open(path, encoding="utf-8-sig") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{str(path)!r} is not valid JSON: {exc}") from exc


def json_list(path: Path, name: str, what: str) -> list[Any]:
    """The JSON list in ``path``; raises naming the loader and file when it cannot be read or
    holds something else (``what`` says what the list should hold)."""
    try:
        items = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{name}: cannot read {str(path)!r}: {exc}") from exc
    if not isinstance(items, list):
        raise ValueError(f"{name}: {str(path)!r} must hold a JSON list of {what}")
    return items


def only_file(found: list[Path], root: Path, *, name: str, missing: str, what: str, hint: str = "") -> Path:
    """The one file of ``found`` (files under ``root``): none raises ``missing``, several raise
    naming them (``what`` files), ``hint`` ending both messages' advice."""
    if not found:
        raise FileNotFoundError(f"{name}: {missing}")
    if len(found) > 1:
        raise ValueError(f"{name}: several {what} files under {str(root)!r}: {[p.name for p in found]}{hint}")
    return found[0]


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise FileNotFoundError(f"{str(path)!r} does not exist")
    out = []
    with open(path, encoding="utf-8-sig") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{str(path)!r} line {n}: not valid JSON ({exc})") from exc
    return out


def text_or_none(value: Any) -> str | None:
    """Stripped string, or None for missing values (None, NaN, empty)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    s = str(value).strip()
    return s or None


class ParquetImages:
    """Reads the image cell(s) of one row from a parquet file, one row group at a time (the
    last group read is kept, so sequential access decodes each group once)."""

    def __init__(self, root: Path, column: str) -> None:
        self.root, self.column = root, column
        self._key: tuple[str, int] | None = None
        self._cells: list[Any] = []

    def __call__(self, row: Mapping[str, Any]) -> list[tuple[bytes, str]]:
        import pyarrow.parquet as pq

        file, group, offset = str(row["parquet_file"]), int(row["row_group"]), int(row["row_offset"])
        if self._key != (file, group):
            table = pq.ParquetFile(self.root / file).read_row_group(group, columns=[self.column])
            self._cells, self._key = table.column(self.column).to_pylist(), (file, group)
        cell = self._cells[offset]
        where = f"{self.root / file} row {int(row['row_number'])}"
        items = cell if isinstance(cell, list) else [cell]
        out = []
        for k, item in enumerate(items):
            data = item.get("bytes") if isinstance(item, dict) else item
            if not isinstance(data, bytes | bytearray) or not data:
                raise SampleError(f"image {k} has no bytes", sample_id=str(row["id"]), path=where)
            out.append((bytes(data), where if len(items) == 1 else f"{where} image {k}"))
        return out


def parquet_rows(files: Iterable[Path], root: Path, image_column: str) -> Iterable[dict[str, Any]]:
    """Every row of ``files`` without the image column, with its location for lazy reading."""
    import pyarrow.parquet as pq

    number = 0
    for f in files:
        pf = pq.ParquetFile(f)
        names = [n for n in pf.schema_arrow.names if n != image_column]
        if image_column not in pf.schema_arrow.names:
            raise ValueError(f"{str(f)!r} has no {image_column!r} column (columns: {names})")
        for g in range(pf.metadata.num_row_groups):
            for offset, rec in enumerate(pf.read_row_group(g, columns=names).to_pylist()):
                rec.update(
                    parquet_file=str(f.relative_to(root)), row_group=g, row_offset=offset,
                    row_number=number,
                )
                number += 1
                yield rec


class Base64Images:
    """Decodes the base64 image of a TSV row; the strings are held in memory (the TSV is read
    once at construction)."""

    def __init__(self, images: dict[str, str], file: Path) -> None:
        self.images, self.file = images, file

    def __call__(self, row: Mapping[str, Any]) -> list[tuple[bytes, str]]:
        where = f"{self.file} index {row['image_ref']}"
        text = self.images[str(row["image_ref"])]
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SampleError(f"image is not valid base64 ({exc})", sample_id=str(row["id"]), path=where) from exc
        return [(data, where)]
