"""Checkpoint parts as safetensors files: a write is a header plus a memcpy of each buffer.

A part (the nested dict :class:`~medimg_bench.engine.checkpoint.Checkpoint` builds: tensors,
strings, numbers, lists, tuples, dicts) is written as a standard safetensors file. Its tensors,
and its long strings as UTF-8 bytes (``uint8`` tensors), are the file's tensors; everything
else is a JSON skeleton, stored as the UTF-8 tensor named ``state`` (a string in the header
would be escaped twice), where a tensor is ``{"$t": name}``, a long string ``{"$s": name}``, a
tuple ``{"$tuple": [...]}`` and a part of the state encoded once for every part (the run's key,
:func:`freeze`) ``{"$j": name}``, a tensor of its JSON. The header's ``__metadata__`` says ``format``. Equal strings and
the same tensor object are stored once. Nothing is pickled either way; the file is read back
with the ``safetensors`` library's own (validating) parser.

Pickling a part with ``torch.save`` cost ~1.3 ms of CPU for a part of 320 samples x 14 labels,
this ~0.5 ms (docs/scale.md). A state this cannot represent exactly (a dtype safetensors has no
name for, a dict with non-string keys, a NumPy scalar, ...) raises :class:`Unencodable`; the
checkpoint then writes that part with ``torch.save`` as before.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

__all__ = ["Unencodable", "write_part", "read_part_file", "freeze", "FORMAT"]

FORMAT = "medimg_bench.checkpoint_part"
_LONG = 1024  # strings at least this long are stored as bytes, not inside the JSON header
_DTYPES = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
           torch.uint16: "U16", torch.int32: "I32", torch.uint32: "U32", torch.int64: "I64",
           torch.uint64: "U64", torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32",
           torch.float64: "F64"}
_NUMPY = frozenset(_DTYPES) - {torch.bfloat16}
_SCALARS = (str, int, float, bool, type(None))
_IOV_MAX = 1024


class Unencodable(TypeError):
    """The state holds something this format cannot give back exactly."""


class _Encoder:
    """Walks a state into a JSON skeleton, collecting the buffers to write."""

    def __init__(self, frozen: dict[int, tuple[Any, bytes]]) -> None:
        self.buffers: list[tuple[str, str, list[int], memoryview]] = []  # name, dtype, shape, bytes
        self._tensors: dict[int, tuple[str, torch.Tensor]] = {}  # id → name (the tensor kept alive)
        self._strings: dict[str, str] = {}
        # id → (container, skeleton): a container met twice in one state (the metrics share their
        # packed ids, scores and labels) is walked once; ``frozen`` ones (the run's key) once a run
        self._seen: dict[int, tuple[Any, Any]] = dict(frozen)

    def _add(self, dtype: str, shape: list[int], data: memoryview) -> str:
        name = str(len(self.buffers))
        self.buffers.append((name, dtype, shape, data))
        return name

    def tensor(self, t: torch.Tensor) -> dict[str, str]:
        seen = self._tensors.get(id(t))
        if seen is not None:
            return {"$t": seen[0]}
        if t.layout != torch.strided or t.device.type != "cpu" or t.dtype not in _DTYPES or t.is_quantized:
            raise Unencodable(f"tensor of {t.dtype} on {t.device} ({t.layout})")
        if not t.numel():
            data = memoryview(b"")
        elif t.is_contiguous() and t.dtype in _NUMPY and not (t.requires_grad or t.is_conj() or t.is_neg()):
            data = memoryview(t.numpy()).cast("B")  # the tensor's own memory, no copy
        else:
            flat = t.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
            data = memoryview(flat.view(torch.uint8).numpy())
        name = self._add(_DTYPES[t.dtype], list(t.shape), data)
        self._tensors[id(t)] = (name, t)
        return {"$t": name}

    def string(self, s: str) -> dict[str, str]:
        name = self._strings.get(s)
        if name is None:
            data = s.encode("utf-8", "surrogatepass")
            name = self._strings[s] = self._add("U8", [len(data)], memoryview(data))
        return {"$s": name}

    def value(self, v: Any) -> Any:
        kind = type(v)
        if kind is str:
            return self.string(v) if len(v) >= _LONG else v
        if kind in _SCALARS:
            return v
        if kind is list or kind is dict or kind is tuple:
            seen = self._seen.get(id(v))
            if seen is None:
                seen = self._seen[id(v)] = (v, self._container(v))
            elif type(seen[1]) is bytes:  # frozen: its JSON, encoded once, as one buffer
                seen = self._seen[id(v)] = (v, {"$j": self._add("U8", [len(seen[1])], memoryview(seen[1]))})
            return seen[1]
        if isinstance(v, torch.Tensor) and kind in (torch.Tensor, torch.nn.Parameter):
            return self.tensor(v)
        raise Unencodable(f"a value of type {kind.__name__}")

    def _container(self, v: list[Any] | tuple[Any, ...] | dict[str, Any]) -> Any:
        if type(v) is list:
            return [self.value(x) for x in v]
        if type(v) is tuple:
            return {"$tuple": [self.value(x) for x in v]}
        out = {}
        for k, x in v.items():  # type: ignore[union-attr]
            if type(k) is not str or k[:1] == "$":
                raise Unencodable(f"a dict key {k!r}")
            out[k] = self.value(x)
        return out


def freeze(value: Any) -> dict[int, tuple[Any, bytes]]:
    """What :func:`write_part` takes as ``frozen``: ``value`` (a container that will not change,
    holding no tensor or long string: the run's key) as JSON, encoded once and stored as one
    buffer (``{"$j": name}``). Empty when it cannot be."""
    enc = _Encoder({})
    try:
        skeleton = enc.value(value)
    except Unencodable:
        return {}
    return {} if enc.buffers else {id(value): (value, json.dumps(skeleton, separators=(",", ":")).encode())}


def write_part(state: dict[str, Any], path: Path, *, frozen: dict[int, tuple[Any, bytes]] | None = None) -> None:
    """Write ``state`` to ``path`` as a safetensors file; :class:`Unencodable` (nothing written)
    when it holds anything that would not read back exactly. ``frozen``: from :func:`freeze`."""
    if sys.byteorder != "little":  # safetensors is little-endian; the bytes are written as they are
        raise Unencodable("a big-endian machine")
    enc = _Encoder(frozen or {})
    skeleton = json.dumps(enc.value(state), separators=(",", ":")).encode()
    enc.buffers.append(("state", "U8", [len(skeleton)], memoryview(skeleton)))
    header: dict[str, Any] = {"__metadata__": {"format": FORMAT}}
    offset = 0
    for name, dtype, shape, data in enc.buffers:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # the spec's alignment of the data that follows
    _write_all(path, [memoryview(len(head).to_bytes(8, "little") + head), *(b[3] for b in enc.buffers)])


def _write_all(path: Path, views: list[memoryview]) -> None:
    """The buffers one after another into a new file: one ``writev`` call where the system has it
    (a write per buffer cost ~0.1 ms more a part)."""
    if not hasattr(os, "writev"):
        with open(path, "wb") as f:
            for view in views:
                f.write(view)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        views = [v for v in views if v.nbytes]
        while views:
            n = os.writev(fd, views[:_IOV_MAX])
            while views and n >= views[0].nbytes:  # a short write: go on after what was written
                n -= views.pop(0).nbytes
            if n:
                views[0] = views[0][n:]
    finally:
        os.close(fd)


def read_part_file(path: str | Path) -> dict[str, Any]:
    """The state a :func:`write_part` file holds; ``ValueError`` naming the file when it is not
    one (not safetensors, another format tag, a broken skeleton)."""
    from safetensors.torch import load

    data = Path(path).read_bytes()
    try:
        tensors = load(data)  # validates the header, offsets and sizes
        n = int.from_bytes(data[:8], "little")
        meta = json.loads(data[8:8 + n]).get("__metadata__") or {}
    except Exception as exc:
        raise ValueError(f"{str(path)!r} is not a readable safetensors file: {exc}") from exc
    if meta.get("format") != FORMAT or "state" not in tensors:
        raise ValueError(f"{str(path)!r} is a safetensors file but not a medimg_bench checkpoint part "
                         f"(format {meta.get('format')!r})")
    try:
        return _decode(json.loads(bytes(tensors.pop("state").numpy())), tensors, path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"checkpoint part {str(path)!r} holds a broken state: {exc}") from exc


def _decode(v: Any, tensors: dict[str, torch.Tensor], path: str | Path) -> Any:
    if type(v) is list:
        return [_decode(x, tensors, path) for x in v]
    if type(v) is not dict:
        return v
    if len(v) == 1:
        (tag, x), = v.items()
        if tag == "$t":
            return tensors[x].clone()  # own memory, not a view of the file's bytes
        if tag == "$s":
            return bytes(tensors[x].numpy()).decode("utf-8", "surrogatepass")
        if tag == "$tuple":
            return tuple(_decode(y, tensors, path) for y in x)
        if tag == "$j":
            return _decode(json.loads(bytes(tensors[x].numpy())), tensors, path)
    if any(k.startswith("$") for k in v):
        raise ValueError(f"checkpoint part {str(path)!r}: unknown entry {sorted(v)[:3]}")
    return {k: _decode(x, tensors, path) for k, x in v.items()}
