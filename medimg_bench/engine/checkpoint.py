"""Evaluation checkpoints: an interrupted run resumes where it stopped, at a linear total cost.

A checkpoint is a directory (``<run dir>/checkpoint``; under ``torchrun`` one sub-directory per
rank, ``rank<r>-of-<w>``). Every save appends one file, ``part-<n>.safetensors``, holding only
what is new since the previous save: the ids processed, the per-sample record chunks, the
failures, the new items of every metric's ``cat`` states and the (fixed-size) other states. So the
total cost of checkpointing grows linearly with the number of samples, not quadratically.

Each part is written to a temporary name and renamed atomically. Parts are safetensors files
(:mod:`~medimg_bench.engine.partfile`: tensors and long strings as buffers, the rest as JSON;
nothing pickled). A part that format cannot represent exactly is written as ``part-<n>.pt`` with
``torch.save``, as every part was before version 4, and read back with
``torch.load(weights_only=True)``: only tensors, strings, numbers, lists and dicts, never
arbitrary objects. Parts of versions 2 and 3 (``.pt``, earlier releases) are read as before;
``.pt`` and ``.safetensors`` parts share one numbering. Every part carries the run's key
(dataset fingerprint, task, model fingerprint — architecture, options and weights hash —,
metrics, AMP, shard): a checkpoint of another run is an error that names each field that
differs, with the saved and the current value.

A part may also hold *unscored* predictions (``unscored``, version 5): with deferred scoring
(engine/loop.py) a save does not score the batches pending in the current block; it stores
them as they are — the batch less its image, and the model's outputs, concatenated with the
batch sizes — and a resume scores them with its first block, as the uninterrupted run would
have (failing samples isolated as always). ``unscored["reset"]`` says that the predictions of
earlier parts have been scored since (their outcome is in this part's records and metrics).
Only the safetensors format stores them; what it cannot hold exactly is scored before the save.

A run that resumes with ``retry_failed`` (a finished run's failed samples, predicted again)
writes the ids it takes back into its next part (``retry``): reading the parts, their earlier
``done`` entries and failure records are dropped there, so the parts stay append-only.
"""

from __future__ import annotations

import ctypes
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench._fs import atomic_path
from medimg_bench.engine.partfile import Unencodable, freeze, read_part_file, write_part
from medimg_bench.engine.results import Records
from medimg_bench.metrics.base import Metric

__all__ = ["Checkpoint", "restore_metrics", "key_differences", "has_checkpoint", "remove_checkpoint", "read_part"]

VERSION = 5
# version 3 added the optional ``retry`` entry; 4 the safetensors file and text columns stored as
# runs or a repeated period (``_text_column``); 5 the optional ``unscored`` entry
_READABLE = (2, 3, 4, 5)
_PART = re.compile(r"^part-(\d{6})\.(pt|safetensors)$")


def _cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, list):
        return [_cpu(v) for v in value]
    return value


_SEP = "\x1f"  # ASCII unit separator


def pack(values: list[Any]) -> Any:
    """A list of strings as one joined string (pickling one object, not thousands); other lists
    as they are. ``unpack`` reverses it."""
    if values and set(map(type, values)) == {str}:
        joined = _SEP.join(values)
        if joined.count(_SEP) == len(values) - 1:  # no value contains the separator
            return {"strs": joined, "n": len(values)}
    return values


def unpack(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"strs", "n"}:
        return value["strs"].split(_SEP) if value["n"] else []
    if isinstance(value, dict) and set(value) == {"runs", "lengths"}:
        return np.repeat(_objects(unpack(value["runs"])), np.asarray(value["lengths"]))
    if isinstance(value, dict) and set(value) == {"tile", "reps"}:
        return np.tile(_objects(unpack(value["tile"])), int(value["reps"]))
    if isinstance(value, dict) and set(value) == {"cat", "sizes"}:
        return list(torch.split(value["cat"], value["sizes"]))
    return value


def _item_key(items: list[Any]) -> tuple[Any, ...] | None:
    """What makes two lists of tensors pack to the same value: each tensor's memory (storage
    pointer, dtype, device, shape, strides, offset); the same view holds the same numbers. None
    (not shared) for anything else: lists of ids are cheap to store and costly to compare."""
    key: list[Any] = []
    for x in items:
        if not isinstance(x, torch.Tensor) or x.layout != torch.strided:
            return None
        key.append((x.untyped_storage().data_ptr(), x.dtype, x.device, tuple(x.shape), x.stride(),
                    x.storage_offset()))
    return tuple(key)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _pack_text_shared(items: list[Any], memo: dict[tuple[Any, ...], Any]) -> Any:
    """``_pack_items`` of a list of strings, reusing the packed value of an equal list packed
    before in this part (every metric keeps the engine's ids, the same as ``done``): comparing
    lists of the same string objects is cheap, joining and scanning them is not."""
    key = ("text", len(items), id(items[0]), id(items[-1]))
    hit = memo.get(key)
    if hit is not None and hit[0] == items:
        return hit[1]
    packed = _pack_items(items)
    memo[key] = (items, packed)
    return packed


def _pack_shared(items: list[Any], memo: dict[tuple[Any, ...], Any]) -> Any:
    """``_pack_items``, giving metrics that hold the same scores, labels or ids the same packed
    object, which the part stores once."""
    ident = ("same objects", *map(id, items)) if 0 < len(items) <= 16 else None
    if ident in memo:  # the very objects packed before (a metric handed the engine's tensors)
        return memo[ident][1]
    key = _item_key(items)
    if key is None:
        packed = _pack_text_shared(items, memo) if items and type(items[0]) is str else _pack_items(items)
    else:
        packed = memo[key] if key in memo else memo.setdefault(key, _pack_items(items))
    if ident is not None:
        memo[ident] = (items, packed)  # ``items`` kept: its objects' ids stay theirs
    return packed


def _pack_items(items: list[Any]) -> Any:
    """Per-batch tensors of one state as one tensor plus the split sizes (lossless: ``unpack``
    gives back the same items), strings as one string, anything else as it is."""
    if items and type(items[0]) is str:
        packed = pack(items)
        if not isinstance(packed, list):
            return packed
    items = _cpu(items)
    if (len(items) > 1 and all(isinstance(t, torch.Tensor) and t.ndim >= 1 for t in items)
            and len({(t.dtype, tuple(t.shape[1:])) for t in items}) == 1):
        return {"cat": torch.cat(items), "sizes": [int(t.shape[0]) for t in items]}
    return pack(items)


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        if not d and prefix:
            out[prefix] = {}
        return out
    return {prefix: d}


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


#: the key field shown in a refusal but never compared: where the files that enter the key by
#: content (``files``) lie, so the same files elsewhere resume
DISPLAY_ONLY = "file_paths"


def _compared(key: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in key.items() if k != DISPLAY_ONLY}


def _where(saved: Mapping[str, Any], now: Mapping[str, Any], diffs: Sequence[str]) -> str:
    """`` (files: option = path now, saved from path then; …)`` for the differing ``files`` fields."""
    a, b = flatten(saved.get(DISPLAY_ONLY) or {}), flatten(now.get(DISPLAY_ONLY) or {})
    fields = {d.split(": ", 1)[0].removeprefix("files.") for d in diffs if d.startswith("files.")}
    notes = [f"{f.split('.', 1)[-1] if f.startswith('task.') else f} = {b.get(f, '<not set>')!s}"
             + (f", saved from {a[f]!s}" if a.get(f) not in (None, b.get(f)) else "")
             for f in sorted(fields)]
    return f" (files: {'; '.join(notes)})" if notes else ""


def key_differences(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``["model.weights_sha256: saved '…', now '…'", …]`` for every field that differs."""
    a, b = flatten(saved), flatten(now)
    diffs = []
    for k in sorted(set(a) | set(b)):
        if a.get(k, "<absent>") != b.get(k, "<absent>"):
            diffs.append(f"{k}: saved {_short(a.get(k, '<absent>'))}, now {_short(b.get(k, '<absent>'))}")
    return diffs


def read_part(path: str | Path) -> Any:
    """One part as it was saved: a ``.safetensors`` part through :mod:`partfile`, a ``.pt`` part
    with ``torch.load(weights_only=True)`` (tensors, strings, numbers, lists, dicts)."""
    if str(path).endswith(".safetensors"):
        return read_part_file(path)
    return torch.load(path, map_location="cpu", weights_only=True)


def has_checkpoint(path: str | Path) -> bool:
    """True when ``path`` holds at least one saved part (of any rank)."""
    path = Path(path)
    return path.is_dir() and any(_PART.match(p.name) for p in path.rglob("part-*"))


def remove_checkpoint(path: str | Path) -> None:
    """Delete a checkpoint directory (after its results were written)."""
    path = Path(path)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


class Checkpoint:
    """The checkpoint of one process of one run, in ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path, *, key: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
                 rank: int = 0, world_size: int = 1) -> None:
        self.root = Path(root)
        self._key_source = key  # a callable is called when the key is first needed
        self._key: dict[str, Any] | None = None
        self.rank, self.world_size = rank, world_size
        self.dir = self.root / f"rank{rank}-of-{world_size}" if world_size > 1 else self.root
        self._n_part = 0
        self._saved: dict[str, int] = {"done": 0, "records": 0, "failures": 0}
        self._cat: dict[tuple[str, str], tuple[int, int, int]] = {}  # (len, id(list), id(last))
        self._segment: dict[str, Any] = {}
        self._retry: list[str] = []
        self._frozen: dict[int, tuple[Any, bytes]] = {}

    @property
    def key(self) -> dict[str, Any]:
        """The run's key (secrets redacted), computed once: only a resume that finds parts or a
        save needs it, so a run that never saves does not hash its data and weights for it."""
        if self._key is None:
            from medimg_bench.engine.results import redact_secrets

            source = self._key_source() if callable(self._key_source) else self._key_source
            self._key = redact_secrets({**dict(source), "world_size": self.world_size, "rank": self.rank})
            self._frozen = freeze(self._key)  # encoded once for every part
        return self._key

    # -- reading --------------------------------------------------------------------------------
    def _check_layout(self) -> None:
        if not self.root.exists():
            return
        if self.root.is_file():
            raise ValueError(f"checkpoint {str(self.root)!r} is a file; expected a checkpoint directory "
                             "(written by a newer medimg_bench); delete it to start over")
        ranks = sorted(p.name for p in self.root.glob("rank*-of-*") if p.is_dir() and any(p.iterdir()))
        if self.world_size == 1 and ranks:
            raise ValueError(f"checkpoint {str(self.root)!r} was written by a distributed run ({ranks[0]}…); "
                             "resume it under torchrun with the same number of processes")
        # other ranks of this run may already be writing theirs: only another count is an error
        if self.world_size > 1 and any(not r.endswith(f"-of-{self.world_size}") for r in ranks):
            raise ValueError(f"checkpoint {str(self.root)!r} was written with other process counts ({ranks}); "
                             f"resume it with the same number of processes, not {self.world_size}")
        if self.world_size > 1 and any(_PART.match(p.name) for p in self.root.glob("part-*")):
            raise ValueError(f"checkpoint {str(self.root)!r} was written by a single process; "
                             "resume it without torchrun")

    def load(self) -> dict[str, Any] | None:
        """The saved state (None when nothing was saved): ``done``, ``records`` (:class:`Records`),
        ``failures``, ``metrics`` (name → state → value, on the CPU), ``segments`` and
        ``unscored`` (the saved predictions not scored yet, as saved). ``ValueError`` if it belongs to another run or a part cannot be read safely."""
        self._check_layout()
        if not self.dir.is_dir():
            return None
        for tmp in self.dir.glob(".part-*.tmp*"):  # a save killed half-way: never read
            tmp.unlink(missing_ok=True)
        parts = _numbered_parts(self.dir)
        if not parts:
            return None
        acc = _Parts()
        for n, part in parts:
            acc.add(self._read_checked(part))
            self._n_part = n
        return acc.result()

    def _read_checked(self, part: Path) -> dict[str, Any]:
        """One part, read safely; ``ValueError`` for another version or another run's key."""
        try:
            state = read_part(part)
        except Exception as exc:
            raise ValueError(f"checkpoint part {str(part)!r} cannot be read safely: {exc}") from exc
        if not isinstance(state, dict) or state.get("version") not in _READABLE:
            found = state.get("version") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"checkpoint part {str(part)!r} has version {found}, expected {VERSION}")
        made, now = state["key"].get("identity"), self.key.get("identity")
        if made != now:
            raise ValueError(
                f"checkpoint {str(self.dir)!r} was made by an older version of medimg_bench, whose "
                f"keys were derived by another rule (identity {made or 1}, now {now or 1}): it cannot "
                "be checked against this run; re-run (delete the checkpoint or pass overwrite=true)")
        if _compared(state["key"]) != _compared(self.key):
            diffs = key_differences(_compared(state["key"]), _compared(self.key))
            raise ValueError(
                f"checkpoint {str(self.dir)!r} belongs to another run; fields that differ: "
                + "; ".join(diffs) + _where(state["key"], self.key, diffs)
                + ". Resume with the same model, weights, options, files and data, "
                "or delete the checkpoint (or pass overwrite=true) to start over"
            )
        return state

    # -- writing --------------------------------------------------------------------------------
    def has_unsaved(self, done: Sequence[str]) -> bool:
        """True when ``done`` holds samples the parts on disk do not (or none was saved)."""
        return self._n_part == 0 or len(done) != self._saved["done"] or bool(self._retry)

    def drop_on_next_save(self, ids: Sequence[str]) -> None:
        """Samples whose earlier outcome (in the parts on disk) the next save declares void:
        they are being predicted again."""
        self._retry.extend(ids)

    def begin_segment(self, start_time: str, *, index: int) -> None:
        """Start a new segment (one process lifetime) of the run."""
        self._segment = {"index": index, "start_time": start_time}

    def mark_saved(
        self, *, done: Sequence[str], records: Records, failures: Sequence[Any], metrics: Mapping[str, Metric]
    ) -> None:
        """Record that everything held now is already on disk (after a resume)."""
        self._saved = {"done": len(done), "records": len(records.chunks), "failures": len(failures)}
        for name, metric in metrics.items():
            for s, red in metric.state_reductions.items():
                value = getattr(metric, s)
                if red == "cat" and isinstance(value, list):
                    self._cat[(name, s)] = (len(value), id(value), id(value[-1]) if value else 0)

    def _metric_delta(self, name: str, metric: Metric, memo: dict[tuple[Any, ...], Any]) -> dict[str, Any]:
        """``{state: ("append", new items) or ("replace", value)}`` since the last save; ``memo``
        is shared by the metrics of one part (see ``_pack_shared``)."""
        out: dict[str, Any] = {}
        for s, red in metric.state_reductions.items():
            value = getattr(metric, s)
            if red == "cat" and isinstance(value, list):
                n0, list_id, last_id = self._cat.get((name, s), (0, id(value), 0))
                appended = (list_id == id(value) and len(value) >= n0
                            and (n0 == 0 or id(value[n0 - 1]) == last_id))
                items = _pack_shared(value[n0:] if appended else list(value), memo)
                out[s] = ("append" if appended else "replace", items)
                self._cat[(name, s)] = (len(value), id(value), id(value[-1]) if value else 0)
            else:
                out[s] = ("replace", _cpu(value))
        return out

    def save(
        self,
        *,
        done: Sequence[str],
        records: Records,
        failures: Sequence[Mapping[str, Any]],
        metrics: Mapping[str, Metric],
        elapsed_s: float,
        unscored: Mapping[str, Any] | None = None,
    ) -> Path:
        """Append what is new since the last save as one part; returns its path. ``unscored``:
        predictions not scored yet (see the module docstring); a part holding them is only
        written as safetensors: :class:`Unencodable` (nothing written, nothing marked saved)
        when that format cannot hold the part."""
        if not self._n_part:
            self.dir.mkdir(parents=True, exist_ok=True)
        cat_before = dict(self._cat)
        memo: dict[tuple[Any, ...], Any] = {}
        state = {
            "version": VERSION,
            "key": self.key,
            "segment": {**self._segment, "wall_time_s": round(float(elapsed_s), 3)},
            "done": _pack_shared(list(done[self._saved["done"]:]), memo),
            "records": _records_state(records, self._saved["records"]),
            "failures": [dict(f) for f in failures[self._saved["failures"]:]],
            "metrics": {name: self._metric_delta(name, m, memo) for name, m in metrics.items()},
        }
        if self._retry:
            state["retry"] = pack(list(self._retry))
        if unscored is not None:
            state["unscored"] = dict(unscored)
        n = self._n_part + 1
        path = self.dir / f"part-{n:06d}.safetensors"
        # no fsync: a killed process leaves its page cache written; after a power loss a torn part
        # fails to read, naming it (an fsync cost ~8 ms of wall time a part, docs/scale.md)
        try:
            with atomic_path(path, fsync=False) as tmp:
                write_part(state, tmp, frozen=self._frozen)
        except Unencodable:  # nothing written: this part as before, pickled tensors and plain data
            if unscored is not None and unscored.get("batches") is not None:
                self._cat = cat_before  # the caller scores the pending batches and saves again
                raise
            path = path.with_suffix(".pt")
            with atomic_path(path, fsync=False) as tmp:
                torch.save(state, tmp)
        self._n_part = n
        self._saved = {"done": len(done), "records": len(records.chunks), "failures": len(failures)}
        self._retry = []
        return path


def _numbered_parts(folder: Path) -> list[tuple[int, Path]]:
    """The parts in ``folder`` in the order they were written (``.pt`` and ``.safetensors`` share
    one numbering); ``ValueError`` when a number is taken twice."""
    parts: dict[int, Path] = {}
    for p in folder.iterdir():
        m = _PART.match(p.name)
        if m is None:
            continue
        n = int(m.group(1))
        if n in parts:
            raise ValueError(f"checkpoint {str(folder)!r} holds two parts numbered {n}: "
                             f"{parts[n].name} and {p.name}; delete the checkpoint to start over")
        parts[n] = p
    return sorted(parts.items())


def _joined(records: Records, start: int) -> Records:
    """Chunks ``start:`` as one chunk when they share their columns (fewer objects to save)."""
    new = records.chunks[start:]
    if len(new) > 1 and len({tuple(c) for c in new}) == 1:
        return Records([Records(new).columns()])
    return Records(new)


def _packed_text(values: np.ndarray) -> dict[str, Any] | None:
    """A text column (object array of strings) as ``pack`` would store it, joined straight from
    the array; None when it holds anything but strings or a string holds the separator."""
    if values.dtype.kind != "O" or not len(values):
        return None
    try:
        joined = _SEP.join(values)
    except TypeError:
        return None
    return {"strs": joined, "n": len(values)} if joined.count(_SEP) == len(values) - 1 else None


def _pointers(values: np.ndarray) -> np.ndarray | None:
    """The object pointers of a 1-D C-contiguous object array, read in place as integers (the
    array must outlive the result): equal pointers are one object, so runs and periods are found
    without comparing strings. None for any other array."""
    if values.dtype.kind != "O" or values.ndim != 1 or not values.flags.c_contiguous or not len(values):
        return None
    return np.frombuffer((ctypes.c_size_t * len(values)).from_address(values.ctypes.data), dtype=np.uintp)


def _text_column(values: np.ndarray) -> dict[str, Any] | None:
    """A text column as a part stores it: the values of its runs of one object and the run
    lengths (``np.repeat(ids, k)``: a task's id column), one period and the number of repeats
    (``np.tile(names, b)``: a class column), or all values joined; None when it holds anything
    but strings (or a string holds the separator)."""
    ptr = _pointers(values)
    if ptr is None:
        return _packed_text(values)
    n = len(values)
    change = ptr[1:] != ptr[:-1]
    if np.count_nonzero(change) < n // 2:
        starts = np.zeros(np.count_nonzero(change) + 1, dtype=np.intp)
        starts[1:] = np.flatnonzero(change)
        starts[1:] += 1
        packed = _packed_text(values[starts])
        lengths = np.empty(len(starts), dtype=np.int64)
        np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
        lengths[-1] = n - starts[-1]
        return None if packed is None else {"runs": packed, "lengths": torch.from_numpy(lengths)}
    again = np.flatnonzero(ptr == ptr[0])
    period = int(again[1]) if len(again) > 1 else n
    if period <= n // 2 and n % period == 0 and bool((ptr.reshape(-1, period) == ptr[:period]).all()):
        packed = _packed_text(values[:period])
        return None if packed is None else {"tile": packed, "reps": n // period}
    return _packed_text(values)


def _records_state(records: Records, start: int) -> list[dict[str, Any]]:
    """Chunks ``start:`` as a part stores them: ``Records.to_state`` with text columns packed
    (joined from the arrays directly, as runs or a period where the same string objects repeat:
    no list of strings built and scanned)."""
    out = []
    for c in _joined(records, start).chunks:
        text = {k: _text_column(v) for k, v in c.items()}
        other = [k for k, t in text.items() if t is None]
        enc = Records([{k: c[k] for k in other}]).to_state()[0] if other else {}
        out.append({k: text[k] if text[k] is not None else pack(enc[k]) if isinstance(enc[k], list) else enc[k]
                    for k in c})
    return out


class _Parts:
    """The parts of a checkpoint read in order, joined into one saved state."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.chunks: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.metrics: dict[str, dict[str, Any]] = {}
        self.segments: dict[int, dict[str, Any]] = {}
        self.unscored: list[dict[str, Any]] = []  # unscored predictions, one entry per part

    def add(self, state: Mapping[str, Any]) -> None:
        again = set(unpack(state.get("retry") or []))
        if again:  # samples predicted again (retry_failed): their earlier outcome is void
            self.done = [sid for sid in self.done if sid not in again]
            self.failures = [f for f in self.failures if f["id"] not in again]
        self.done.extend(unpack(state["done"]))
        self.chunks.extend({k: unpack(v) for k, v in c.items()} for c in state["records"])
        self.failures.extend(state["failures"])
        for name, delta in state["metrics"].items():
            mine = self.metrics.setdefault(name, {})
            for s, (kind, value) in delta.items():
                value = unpack(value)
                if kind == "append":
                    mine.setdefault(s, []).extend(value)
                else:  # "replace": a full list, or a fixed-size state
                    mine[s] = list(value) if isinstance(value, list) else value
        seg = state["segment"]
        self.segments[int(seg["index"])] = seg
        unscored = state.get("unscored")
        if unscored is not None:
            if unscored.get("reset"):  # scored since: their outcome is in this part
                self.unscored = []
            if unscored.get("batches") is not None:
                self.unscored.append(unscored["batches"])

    def result(self) -> dict[str, Any]:
        return {"done": self.done, "records": Records.from_state(self.chunks), "failures": self.failures,
                "metrics": self.metrics, "segments": [self.segments[i] for i in sorted(self.segments)],
                "unscored": self.unscored}


def restore_metrics(metrics: Mapping[str, Metric], saved: Mapping[str, Mapping[str, Any]]) -> None:
    """Put saved states back into freshly built metrics. Tensors stay on the CPU: the runner moves
    restored ``cat`` items to the device of the first new update (any device type)."""
    missing = sorted(set(metrics) - set(saved))
    if missing:
        raise ValueError(f"checkpoint has no state for metric(s) {missing}")
    for name, metric in metrics.items():
        unknown = sorted(set(saved[name]) - set(metric.state_reductions))
        if unknown:
            raise ValueError(f"checkpoint state {unknown[0]!r} is not a state of metric {name!r}")
        metric.load_state({**metric.state_dict(), **saved[name]})
