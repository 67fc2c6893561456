"""The evaluation loop (:func:`run_batches`) and the steps of one batch (:class:`BatchSteps`):
predict, score (metric inputs, metric updates, per-sample records), and isolate the samples that
fail.

Scoring can be *deferred*: when every metric says ``concat_updates`` (one update on several
batches concatenated leaves the same states as one update per batch) and the task treats every
sample on its own (:func:`rowwise_task`), the runner only predicts each batch and keeps the
batch and its outputs; every few thousand samples (:data:`BLOCK_ROWS`, fewer for large batches:
:data:`BLOCK_BYTES`), before every checkpoint save and at the end, the pending batches are scored
at once, on their concatenation. That turns ~10 small tensor operations per batch into one
per block (the per-batch cost that dominates when the model is cheap), and the numbers are the
same bit for bit: the metric states are concatenations, the records are rows. If scoring a
block fails for any reason, its batches are scored one by one as without deferral, and a
failing batch one sample at a time, so a bad sample is still a failure record with its id.

A deferred loop runs under one ``torch.inference_mode`` (what a bare inference loop does: entering
it costs a few µs, once per batch was a third of the engine's overhead); scoring, the isolation
of failing samples and checkpoint saves leave it, so metric states are ordinary tensors.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.engine.partfile import Unencodable
from medimg_bench.engine.results import Records
from medimg_bench.metrics.base import Metric, shared_input_checks
from medimg_bench.sample import collate, decollate
from medimg_bench.tasks.base import Task

__all__ = ["BatchSteps", "run_batches", "rowwise_task", "BLOCK_ROWS", "BLOCK_BYTES", "BLOCK_ELEMENTS"]

#: pending samples that trigger scoring of a deferred block
BLOCK_ROWS = 4096
#: at most this many bytes of pending batches and outputs (large images: smaller blocks)
BLOCK_BYTES = 64 * 2**20
#: at most this many elements in any one tensor of a block: below PyTorch's intra-op grain size
#: (32768) its operations run on one thread. On tensors this small a parallel region saves
#: microseconds on an idle machine and costs milliseconds on a busy one (the other threads are
#: descheduled while the region waits for them: blocks of 4096 × 14 scores cost 30x more to
#: score with 2 threads than with 1 on the shared 2-core test machine)
BLOCK_ELEMENTS = 32767
#: batch keys not kept while a batch waits to be scored (the model's input)
DROP_KEYS = frozenset({"image"})


#: the methods a task scores with (the classification task's own are known to be row-wise)
_SCORING = ("score", "metric_inputs", "sample_records")


def _classification_scoring(task: Task) -> bool:
    from medimg_bench.tasks.classification import ClassificationTask

    cls = type(task)
    return all(getattr(cls, m) is getattr(ClassificationTask, m) for m in _SCORING)


def rowwise_task(task: Task) -> bool:
    """True when ``task.score`` on several batches concatenated equals its per-batch results
    concatenated, so scoring may be deferred: the task's ``rowwise`` (``Task.rowwise``), or
    when that is None, whether its scoring methods are the classification task's own."""
    if task.rowwise is not None:
        return bool(task.rowwise)
    return _classification_scoring(task)


def _outputs_read(task: Task) -> str | None:
    """The one model output a row-wise task reads when scoring (``probs`` for the classification
    task's own methods), or None (keep every output): the others need not wait for their
    block — the allocator reuses their memory at once, and checkpoint parts are smaller."""
    return "probs" if _classification_scoring(task) else None


def _normal_mode() -> Any:
    """Leave the loop's inference mode (metric states and saved parts are ordinary tensors)."""
    return torch.inference_mode(False) if torch.is_inference_mode_enabled() else contextlib.nullcontext()


class BatchSteps:
    """Predicts and scores batches into ``metrics`` and the run ``state``'s ``records`` and
    ``failures`` (see the module docstring); ``flush()`` scores what is pending (before a
    checkpoint and at the end). ``autocast``: a context factory for AMP, or None."""

    def __init__(
        self,
        *,
        task: Task,
        model: Any,
        metrics: Mapping[str, Metric],
        classes: Sequence[str] | None,
        state: Any,
        autocast: Callable[[], Any] | None,
        fail_fast: bool,
        refetch: Callable[[int], Mapping[str, Any] | None] | None = None,
        defer: bool | None = None,
    ) -> None:
        self.task, self.model, self.metrics, self.classes = task, model, metrics, classes
        self.records: Records = state.records
        self.failures: list[dict[str, Any]] = state.failures
        self.autocast = autocast or contextlib.nullcontext
        self.fail_fast = fail_fast
        self.pending_restore = state.pending_restore  # restored ``cat`` items to move on first update
        if defer is None:
            defer = bool(metrics) and all(m.concat_updates for m in metrics.values()) and rowwise_task(task)
        self.defer = defer
        # the deferred loop's prediction: already in inference mode, no AMP, the task's own
        # predict only when it has one (the base class's is ``model.predict``)
        self._fast = defer and autocast is None
        self._direct = False  # True inside loop_mode() when _fast
        self._call = model.predict if type(task).predict is Task.predict else (lambda b: task.predict(model, b))
        self.refetch = refetch  # batch number → the batch loaded again (all its keys)
        # keys not kept while a batch waits (the model's input: memory, and the allocator reuses
        # the next batch's buffers); reading one raises _DroppedKey and the batch is loaded again
        self._drop = DROP_KEYS if refetch is not None else frozenset()
        self._read = _outputs_read(task) if defer else None  # the one output kept, or None: all
        self._pending: list[tuple[int | None, dict[str, Any], dict[str, Any], frozenset[str]]] = []
        self._rows = 0
        self._limit = 0  # rows per block, set from the first pending batch
        # checkpoint parts may hold pending batches unscored: how many of ``_pending`` are in
        # one, and whether pending batches saved so have been scored since the last save
        self._on_disk, self._reset = 0, False
        self._restored = False  # unscored batches restored from the checkpoint, not yet placed
        for saved in getattr(state, "unscored", None) or ():
            self._pending.extend(_split_unscored(saved))
        if self._pending:
            self._rows = sum(len(p[1]["id"]) for p in self._pending)
            self._on_disk, self._restored = len(self._pending), True

    # -- the steps --------------------------------------------------------------------------------
    def predict(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        try:
            with torch.inference_mode(), self.autocast():
                return self.task.predict(self.model, batch)
        except Exception as exc:
            _staged("predict", exc)
            raise

    def score(self, batch: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        """Metric inputs and records of ``batch`` (one batch or a block, ``Task.score``), then the
        metric updates; on any error the metrics are rolled back, nothing is recorded, and the
        error is raised."""
        try:
            preds, targets, rows = self.task.score(batch, outputs, classes=self.classes)  # type: ignore[arg-type]
        except Exception as exc:
            _staged("target", exc)
            raise
        snaps = {k: _snapshot(m) for k, m in self.metrics.items()}
        try:
            with shared_input_checks():  # every metric gets the same inputs: check them once
                for k, metric in self.metrics.items():
                    metric.update(preds, targets, batch.get("meta"), ids=batch["id"])
                    if k in self.pending_restore and _move_restored(metric, self.pending_restore[k]):
                        del self.pending_restore[k]
        except Exception as exc:
            for k, m in self.metrics.items():
                _restore(m, snaps[k])
            _staged("metric", exc)
            raise
        self.records.add(rows)

    @contextlib.contextmanager
    def loop_mode(self) -> Iterator[None]:
        """The context the loop runs in: inference mode when scoring is deferred (then
        :meth:`run` calls the model directly, without a context of its own)."""
        if not self.defer:
            yield
            return
        with torch.inference_mode():
            self._direct = self._fast
            try:
                yield
            finally:
                self._direct = False

    def run(self, batch: dict[str, Any], n_batch: int = 0) -> None:
        """Predict ``batch`` (the loader's ``n_batch``-th) and score it now, or later when
        scoring is deferred."""
        try:
            if self._direct:
                outputs = self._call(batch)
            else:
                outputs = self.predict(batch)
                if not self.defer:
                    self.score(batch, outputs)
                    return
        except Exception as exc:
            self._isolate(batch, _staged("predict", exc))
            return
        if self._restored:
            self._place_restored(outputs)
        if self._read is not None and self._read in outputs:
            outputs = {self._read: outputs[self._read]}
        kept = batch
        if self._drop:  # a copy without the dropped keys (a dict comprehension costs 3x more)
            kept = batch.copy()
            for key in self._drop:
                kept.pop(key, None)
        if not self._limit:
            self._limit = _block_rows(kept, outputs)
        self._pending.append((n_batch, kept, outputs, self._drop))
        self._rows += len(batch["id"])
        if self._rows >= self._limit:
            self.flush()

    def flush(self) -> None:
        """Score the pending batches: as one block, else (if that fails) batch by batch."""
        if not self._pending:
            return
        with _normal_mode():
            self._flush()

    def _place_restored(self, outputs: Mapping[str, Any]) -> None:
        """Put the outputs of restored unscored batches where the model's outputs are now (they
        were saved from any device and read on the CPU), as restored metric states are."""
        self._restored = False
        for n_batch, _, saved, _ in self._pending:
            if n_batch is not None:
                break
            for k, v in saved.items():
                now = outputs.get(k)
                if isinstance(v, torch.Tensor) and isinstance(now, torch.Tensor) and v.device != now.device:
                    saved[k] = v.to(now.device)

    def unscored(self) -> dict[str, Any] | None:
        """What a checkpoint part holds of the pending batches: those not in a part yet,
        concatenated (``batches``: see :func:`_pack_unscored`), and ``reset`` (the pending batches
        of earlier parts have been scored since); None when they cannot be stored so (then the
        caller scores them before saving)."""
        new = self._pending[self._on_disk:]
        out: dict[str, Any] = {"reset": self._reset, "batches": None}
        if new:
            try:
                out["batches"] = _pack_unscored(new)
            except (TypeError, ValueError, RuntimeError, KeyError):
                return None
        return out

    def unscored_outcome(self) -> bool:
        """True when batches a part holds unscored have been scored since the last save."""
        return self._reset

    def mark_saved(self) -> None:
        """The pending batches are all in the checkpoint now."""
        self._on_disk, self._reset = len(self._pending), False

    def _flush(self) -> None:
        if self._on_disk:  # batches a part holds unscored: the next part holds their outcome
            self._on_disk, self._reset = 0, True
        pending, self._pending, self._rows = self._pending, [], 0
        if len(pending) > 1:
            dropped = frozenset().union(*{p[3] for p in pending})
            try:
                self.score(_Block([p[1] for p in pending], dropped), _Block([p[2] for p in pending]))
                return
            except _DroppedKey:  # the task reads a key not kept: keep every key from now on
                self._drop = frozenset()
            except Exception:  # find the culprits: exactly what scoring without deferral does
                pass
        for n_batch, kept, outputs, dropped in pending:
            self._score_one(n_batch, kept, outputs, dropped)

    def _score_one(self, n_batch: int | None, kept: dict[str, Any], outputs: dict[str, Any],
                   dropped: frozenset[str]) -> None:
        """Score one pending batch as scoring without deferral would, loading it again when it
        needs a key that was not kept or a failing sample must be predicted on its own."""
        try:
            self.score(_Block([kept], dropped) if dropped else kept, outputs)
            return
        except _DroppedKey:
            self._drop, exc = frozenset(), None
        except Exception as e:
            exc = e
        batch: Mapping[str, Any] | None = kept
        if dropped:
            batch = self._refetch(n_batch, kept["id"])
            if batch is None:
                return
            if exc is None:
                try:
                    self.score(batch, outputs)
                    return
                except Exception as e:
                    exc = e
        self._isolate(batch, exc)  # type: ignore[arg-type]

    def _refetch(self, n_batch: int | None, ids: Sequence[str]) -> dict[str, Any] | None:
        """Batch ``n_batch`` loaded again (None: a batch restored from the checkpoint, loaded by
        its ids), restricted to ``ids`` (the samples that loaded the first time); a sample that no
        longer loads is a failure."""
        batch = self.refetch(n_batch if n_batch is not None else list(ids))  # type: ignore[misc]
        if batch is not None and list(batch["id"]) == list(ids):
            return dict(batch)
        found = {s["id"]: s for s in decollate(batch)} if batch is not None else {}
        for sid in ids:
            if sid not in found:
                self.failures.append({"id": sid, "stage": "load", "error": "the sample loaded once but not "
                                      "when loaded again to isolate a failing sample of its batch"})
        keep = [found[sid] for sid in ids if sid in found]
        return collate(keep) if keep else None

    def _isolate(self, batch: Mapping[str, Any], exc: BaseException) -> None:
        """``batch`` failed with ``exc``: retry one sample at a time so only the bad ones fail."""
        if self.fail_fast:
            raise exc
        if len(batch["id"]) == 1:
            self.failures.append(_predict_failure(batch["id"][0], exc))
            return
        with _normal_mode():
            self._one_by_one(batch)

    def _one_by_one(self, batch: Mapping[str, Any]) -> None:
        for single in decollate(batch):
            try:
                one = collate([single])
                self.score(one, self.predict(one))
            except Exception as exc1:
                self.failures.append(_predict_failure(single["id"], exc1))


# -- the loop ---------------------------------------------------------------------------------------
def run_batches(steps: BatchSteps, loader: Iterable[Any], state: Any, options: Any, *, t0: float,
                label: str, total: int, progress: bool) -> None:
    """Run every batch of ``loader`` through ``steps`` into the run ``state`` (``done``,
    ``failures``), saving a checkpoint part every ``options.checkpoint_every`` batches and at
    most once per ``options.checkpoint_interval_s``; at the end everything pending is scored,
    and a run with failures saves what is left (so a resume can predict exactly them again).
    ``progress``: draw a bar of ``total`` samples."""
    ckpt = state.checkpoint
    every, interval = max(1, int(options.checkpoint_every)), float(options.checkpoint_interval_s)
    done, failures = state.done, state.failures
    last_save = time.perf_counter()
    with _Progress(progress, label, total, len(done)) as bar, steps.loop_mode():
        for n_batch, (batch, failed) in enumerate(loader, start=1):
            if batch is not None:
                steps.run(batch, n_batch)  # scored now, or with the next block
                done.extend(batch["id"])
            if failed:
                failures.extend(failed)
                done.extend(f["id"] for f in failed)
            if ckpt is not None and not n_batch % every and time.perf_counter() - last_save >= interval:
                save_checkpoint(steps, state, t0)
                last_save = time.perf_counter()
            if bar.on:
                bar.advance((len(batch["id"]) if batch else 0) + len(failed))
    steps.flush()
    if ckpt is not None and failures and (ckpt.has_unsaved(done) or steps.unscored_outcome()):
        save_checkpoint(steps, state, t0)


def save_checkpoint(steps: BatchSteps, state: Any, t0: float) -> None:
    """Append one part: what was scored since the last save, and the batches still pending
    unscored (the resume scores them); when those cannot be stored exactly, they are scored
    first."""
    ckpt = state.checkpoint
    with _normal_mode():
        unscored = steps.unscored() if steps.defer else None
        if unscored is not None:
            try:
                ckpt.save(done=state.done, records=state.records, failures=state.failures,
                          metrics=steps.metrics, elapsed_s=time.perf_counter() - t0, unscored=unscored)
                steps.mark_saved()
                return
            except Unencodable:
                pass
        steps.flush()
        ckpt.save(done=state.done, records=state.records, failures=state.failures, metrics=steps.metrics,
                  elapsed_s=time.perf_counter() - t0, unscored=steps.unscored() if steps.unscored_outcome() else None)
        steps.mark_saved()


class _Progress:
    """A rich progress bar of samples, updated at most 10 times a second (an update costs
    ~0.1 ms); ``on`` is False when disabled (then nothing is imported or drawn)."""

    def __init__(self, enabled: bool, label: str, total: int, completed: int) -> None:
        self.on, self.label, self.total, self.completed = enabled, label, total, completed
        self._bar: Any = None
        self._pending, self._last = 0, 0.0

    def __enter__(self) -> _Progress:
        if self.on:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("samples"), TimeElapsedColumn(), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.completed)
            self._last = time.perf_counter()
        return self

    def advance(self, n: int) -> None:
        self._pending += n
        now = time.perf_counter()
        if now - self._last >= 0.1:
            self._bar.update(self._task, advance=self._pending)
            self._pending, self._last = 0, now

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            if self._pending:
                self._bar.update(self._task, advance=self._pending)
            self._bar.__exit__(*exc)


# -- deferred blocks --------------------------------------------------------------------------------
class _DroppedKey(RuntimeError):
    """A key not kept for deferred scoring was read (not a ``KeyError``: ``get`` must not
    answer None for it)."""


class _Block(Mapping):
    """Several batch (or output) dicts seen as one: a key's values are concatenated on first
    access (tensors with ``torch.cat``, lists joined; one batch's values as they are), so keys
    nobody reads are never copied. Anything that cannot be concatenated exactly (other dtypes or
    trailing shapes, a key missing from some batches, other types) raises, and the block is
    scored batch by batch; reading a key in ``dropped`` raises :class:`_DroppedKey`."""

    def __init__(self, parts: Sequence[Mapping[str, Any]], dropped: frozenset[str] = frozenset()) -> None:
        self._parts = parts
        self._dropped = dropped
        self._cache: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self._dropped:
            raise _DroppedKey(f"batch key {key!r} was not kept for deferred scoring")
        if key not in self._cache:
            present = [key in p for p in self._parts]
            if not any(present):
                raise KeyError(key)
            if not all(present):
                raise ValueError(f"key {key!r} is in some batches of the block only")
            self._cache[key] = _concat([p[key] for p in self._parts])
        return self._cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter([*self._parts[0], *(k for k in self._dropped if k not in self._parts[0])])

    def __len__(self) -> int:
        return len(list(iter(self)))


def _concat(values: list[Any]) -> Any:
    """One value for the block. ``torch.cat`` itself refuses other devices, ranks and trailing
    shapes; other dtypes (which it would promote) are refused here."""
    first = values[0]
    if len(values) == 1:
        return first
    if isinstance(first, torch.Tensor):
        if not all(map(operator.is_, map(operator.attrgetter("dtype"), values), itertools.repeat(first.dtype))):
            raise ValueError("batch tensors of different dtypes")
        return torch.cat(values)
    if isinstance(first, np.ndarray):
        if len({(v.dtype, v.shape[1:]) for v in values}) != 1:
            raise ValueError("batch arrays of different dtypes or trailing shapes")
        return np.concatenate(values)
    if all(map(operator.is_, map(type, values), itertools.repeat(list))):
        return list(itertools.chain.from_iterable(values))
    raise TypeError(f"cannot concatenate batch values of type {type(first).__name__}")


def _pack_unscored(entries: Sequence[tuple[Any, dict[str, Any], dict[str, Any], frozenset[str]]]) -> dict[str, Any]:
    """Pending batches as a part stores them: every key of the batches (less the dropped ones)
    and of the outputs concatenated (tensors on the CPU), the batch sizes and the dropped keys.
    Raises when a value cannot be split back into exactly these batches."""
    keys_b, keys_o = list(entries[0][1]), list(entries[0][2])
    if any(list(e[1]) != keys_b or list(e[2]) != keys_o for e in entries):
        raise ValueError("pending batches with other keys")
    sizes = [len(e[1]["id"]) for e in entries]
    out: dict[str, Any] = {"sizes": sizes, "dropped": sorted(frozenset().union(*(e[3] for e in entries)))}
    for part, keys, i in (("batch", keys_b, 1), ("outputs", keys_o, 2)):
        values = {}
        for k in keys:
            v = _concat([e[i][k] for e in entries])
            if isinstance(v, torch.Tensor) and v.ndim and v.shape[0] == sum(sizes):
                v = v.detach().cpu()
            elif type(v) is not list or len(v) != sum(sizes):
                raise ValueError(f"pending value {k!r} is not one row per sample")
            else:
                v = _pack_list(v)
            values[k] = v
        out[part] = values
    return out


def _pack_list(values: list[Any]) -> Any:
    """A list column of pending batches as a part stores it: strings joined into one
    (``checkpoint.pack``), empty dicts (samples without meta) as their count, else as it is
    (walked by the part's encoder, which refuses what it cannot give back exactly)."""
    from medimg_bench.engine.checkpoint import pack

    if values and type(values[0]) is dict and len(set(map(type, values))) == 1 and not any(values):
        return {"empty_dicts": len(values)}
    packed = pack(values)
    return packed if packed is not values else {"list": values}


def _unpack_list(value: Any) -> list[Any]:
    from medimg_bench.engine.checkpoint import unpack

    if "empty_dicts" in value:
        return [{} for _ in range(int(value["empty_dicts"]))]
    return value["list"] if "list" in value else unpack(value)


def _split_unscored(saved: Mapping[str, Any]) -> list[tuple[None, dict[str, Any], dict[str, Any], frozenset[str]]]:
    """The batches :func:`_pack_unscored` stored, as pending entries (batch number None: loaded
    again by their ids when needed)."""
    sizes = [int(n) for n in saved["sizes"]]
    starts = list(itertools.accumulate([0, *sizes]))
    cols = [{k: (list(torch.split(v, sizes)) if isinstance(v, torch.Tensor)
                 else [w[a:b] for w in (_unpack_list(v),) for a, b in zip(starts, starts[1:])])
             for k, v in saved[part].items()} for part in ("batch", "outputs")]
    dropped = frozenset(saved["dropped"])
    return [(None, {k: v[j] for k, v in cols[0].items()}, {k: v[j] for k, v in cols[1].items()}, dropped)
            for j in range(len(sizes))]


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, list):
        return sum(_nbytes(v) for v in value if isinstance(v, torch.Tensor | np.ndarray))
    return 0


def _numel(value: Any) -> int:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return int(value.size if isinstance(value, np.ndarray) else value.numel())
    return 0


def _block_rows(batch: Mapping[str, Any], outputs: Mapping[str, Any]) -> int:
    """Rows per deferred block: :data:`BLOCK_ROWS`, fewer when batches are large
    (:data:`BLOCK_BYTES`) or rows wide (:data:`BLOCK_ELEMENTS`)."""
    rows = max(1, len(batch["id"]))
    per_row = sum(_nbytes(v) for d in (batch, outputs) for v in d.values()) / rows
    # the model's input is not scored (a task that reads it is given it batch by batch)
    widest = max((_numel(v) for d in (batch, outputs) for k, v in d.items() if k not in DROP_KEYS), default=0) / rows
    # a block is scored once it holds this many rows, so it may hold one batch more
    by_elements = int(BLOCK_ELEMENTS // max(widest, 1.0)) - rows
    return max(1, min(BLOCK_ROWS, int(BLOCK_BYTES // max(per_row, 1.0)), by_elements))


# -- failures and roll-back -------------------------------------------------------------------------
def _snapshot(metric: Metric) -> dict[str, Any]:
    """What a failed update must be rolled back to: the length of each ``cat`` list (no copy of
    the growing states) and a copy of the fixed-size tensor states."""
    snap: dict[str, Any] = {}
    for k in metric.state_reductions:
        v = getattr(metric, k)
        snap[k] = len(v) if isinstance(v, list) else (v.clone() if isinstance(v, torch.Tensor) else v)
    return snap


def _restore(metric: Metric, snap: Mapping[str, Any]) -> None:
    for k, v in snap.items():
        if isinstance(v, int) and isinstance(getattr(metric, k), list):
            del getattr(metric, k)[v:]
        else:
            setattr(metric, k, v)


def _staged(stage: str, exc: BaseException) -> BaseException:
    """Tag ``exc`` with the stage that failed unless an inner layer already did."""
    if not hasattr(exc, "_mb_stage"):
        try:
            exc._mb_stage = str(getattr(exc, "stage", stage))  # type: ignore[attr-defined]
        except AttributeError:  # exceptions with __slots__
            pass
    return exc


def _move_restored(metric: Metric, n_restored: Mapping[str, int]) -> bool:
    """After the first update that follows a resume, put the restored items of each ``cat``
    state on the device of the items the metric has just added; True when done."""
    for k, n in n_restored.items():
        lst = getattr(metric, k)
        if not isinstance(lst, list) or len(lst) <= n:
            continue
        new = lst[n]
        if isinstance(new, torch.Tensor):
            for j in range(n):
                if isinstance(lst[j], torch.Tensor) and lst[j].device != new.device:
                    lst[j] = lst[j].to(new.device)
    return True


def _predict_failure(sample_id: str, exc: BaseException) -> dict[str, Any]:
    """A failure record for a sample whose prediction, targets or metric update failed, tagged
    with the stage (``predict``, ``target``, ``metric``)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    stage = getattr(exc, "_mb_stage", "predict")
    if _is_oom(exc):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # let the next samples run
        hint = ("segmentation metrics: lower their chunk_mb option (metrics.<name>.chunk_mb=…) or use "
                "backend=kdtree" if stage == "metric" else "lower batch_size, or set roi_size for "
                "sliding-window inference / amp=true")
        return {"id": sample_id, "stage": stage,
                "error": f"out of memory while {_STAGE_WORDS.get(stage, stage)} sample {sample_id!r}; "
                         f"{hint} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"}
    return {"id": sample_id, "stage": stage, "error": f"{type(exc).__name__}: {exc}{where}"}


_STAGE_WORDS = {"predict": "predicting", "target": "reading the target of", "metric": "scoring"}


def _is_oom(exc: BaseException) -> bool:
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(exc, oom)) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())
