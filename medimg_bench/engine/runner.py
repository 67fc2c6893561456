"""The evaluation loop: one pass over a dataset, per-sample records, failures kept, metrics updated
on the device the predictions are on."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from medimg_bench.datasets.base import dataset_identity
from medimg_bench.engine.loop import BatchSteps
from medimg_bench.engine.results import Records, Results, build_samples_table
from medimg_bench.engine.summary import summarize
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import create_task
from medimg_bench.sample import collate
from medimg_bench.tasks.base import Task

__all__ = ["evaluate", "resolve_device", "parse_shard", "shard_of", "model_fingerprint"]

log = logging.getLogger(__name__)


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``/None → CUDA if available, else CPU; anything else is passed to ``torch.device``."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class _Failure(dict):
    """Marker for a sample that could not be loaded."""


class _SafeDataset(torch.utils.data.Dataset):
    """Returns a :class:`_Failure` instead of raising, so one bad file cannot stop the loader."""

    def __init__(self, dataset: Any, fail_fast: bool) -> None:
        self.dataset = dataset
        self.fail_fast = fail_fast

    def __len__(self) -> int:
        return len(self.dataset)

    def _sid(self, index: int) -> str:
        sample_id = getattr(self.dataset, "sample_id", None)
        return sample_id(index) if callable(sample_id) else f"index_{index}"

    def __getitem__(self, index: int) -> Any:
        try:
            return self.dataset[index]
        except Exception as exc:
            return self._failure(index, exc)

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A batch's samples (the DataLoader's batched fetch): one ``try`` for the whole batch."""
        out: list[Any] = []
        try:
            for i in indices:
                out.append(self.dataset[i])
        except Exception as exc:
            j = len(out)
            out.append(self._failure(indices[j], exc))
            out.extend(self[i] for i in indices[j + 1:])
        return out

    def _failure(self, index: int, exc: Exception) -> _Failure:
        if self.fail_fast:
            raise exc
        # a dataset may tag its errors (``exc.stage = "target"`` for an unreadable label)
        return _Failure(id=self._sid(index), stage=str(getattr(exc, "stage", "load")),
                        error=f"{type(exc).__name__}: {exc}")


def _split_collate(items: Sequence[Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    ok = [s for s in items if not isinstance(s, _Failure)]
    failed = [dict(s) for s in items if isinstance(s, _Failure)]
    return (collate(ok) if ok else None), failed


def parse_shard(shard: str | Sequence[int] | None) -> tuple[int, int] | None:
    """``"i/n"`` (or ``(i, n)``) → ``(i, n)`` with ``0 <= i < n``; ``ValueError`` otherwise."""
    if shard is None or shard == "":
        return None
    if isinstance(shard, str):
        parts = shard.split("/")
        try:
            if len(parts) != 2:
                raise ValueError
            i, n = int(parts[0]), int(parts[1])
        except ValueError:
            raise ValueError(f"shard={shard!r}: expected 'i/n' with integers, 0 <= i < n "
                             "(e.g. shard=0/3, shard=1/3, shard=2/3)") from None
    else:
        i, n = (int(x) for x in shard)
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"shard={i}/{n}: the shard index must satisfy 0 <= i < n "
                         f"(for n={n}: 0..{max(n - 1, 0)}); shards are numbered from 0")
    return i, n


def shard_of(sample_id: str, n: int) -> int:
    """The shard (``0..n-1``) of a sample: BLAKE2b of its id, so it is the same in every process,
    on every machine and in every Python version (unlike ``hash()``)."""
    digest = hashlib.blake2b(str(sample_id).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def model_fingerprint(model: Any) -> dict[str, Any]:
    """What produced the predictions (see ``ModelAdapter.fingerprint``); generative adapters add
    their default generation settings. A model without ``fingerprint()`` is known by its name."""
    fp = getattr(model, "fingerprint", None)
    if callable(fp):
        out = dict(fp())
        settings = getattr(model, "settings", None)
        if settings is not None and hasattr(settings, "to_dict"):
            out.setdefault("settings", settings.to_dict())
        return out
    name = getattr(model, "name", type(model).__name__)
    log.warning("model %r has no fingerprint(): a resumed run can only check its name and class", name)
    return {"name": name, "class": f"{type(model).__module__}.{type(model).__qualname__}",
            "note": "the model has no fingerprint(): only its name and class are checked on resume"}


def _stable_repr(value: Any) -> str:
    """``repr`` without memory addresses (``<Foo object at 0x7f…>``), the same in every process."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _settings(obj: Any) -> str:
    """An object's class and public options (not its states), as a string."""
    opts = {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    return f"{type(obj).__name__}{sorted((k, _stable_repr(v)) for k, v in opts.items())}"


def _ids_of(dataset: Any) -> list[str]:
    """Every sample id in dataset order (from the manifest when there is one)."""
    manifest = getattr(dataset, "manifest", None)
    if manifest is not None and "id" in getattr(manifest, "columns", ()) and len(manifest) == len(dataset):
        return manifest["id"].astype(str).tolist()
    sample_id = getattr(dataset, "sample_id", None)
    return [sample_id(i) if callable(sample_id) else f"index_{i}" for i in range(len(dataset))]


def _batches(loader: Any, *, inference: bool) -> Any:
    """The loader's batches; collated under ``torch.inference_mode`` when ``inference`` (what a
    bare inference loop does: cheaper tensors, ~4 µs a batch). Only for deferred scoring, whose
    known row-wise steps never modify batch tensors in place (inference tensors refuse that
    outside inference mode)."""
    if not inference:
        yield from loader
        return
    it = iter(loader)
    while True:
        with torch.inference_mode():
            item = next(it, None)
        if item is None:
            return
        yield item


def _progress(enabled: bool, total: int, label: str) -> Any:
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("samples"),
        TimeElapsedColumn(), transient=False,
    )


def evaluate(
    model: Any,
    dataset: Any,
    *,
    task: str | Task = "classification",
    metrics: Mapping[str, Mapping[str, Any] | None] | Mapping[str, Metric] | None = None,
    batch_size: int = 1,
    num_workers: int = 0,
    device: str | torch.device | None = "auto",
    amp: bool = False,
    fail_fast: bool = False,
    progress: bool = True,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    name: str | None = None,
    subgroups: Sequence[str] = (),
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 20,
    checkpoint_interval_s: float = 0.0,
    shard: str | Sequence[int] | None = None,
) -> Results:
    """Run ``model`` over ``dataset`` once and score it.

    Args:
        model: an adapter with ``predict(batch) -> dict`` (see :mod:`medimg_bench.models`).
        dataset: a map-style dataset of sample dicts (a ``ManifestDataset`` gives ids and patients).
        task: task name or :class:`Task`; decides metric inputs, records and plots.
        metrics: ``{name: options}`` for registered metrics, or ready ``Metric`` objects.
        amp: autocast to bfloat16 (CPU) / float16 (CUDA) during inference.
        fail_fast: re-raise the first failing sample instead of recording it and going on.
        checkpoint: a directory to save progress to every ``checkpoint_every`` batches (and at
            most once per ``checkpoint_interval_s`` seconds); each save appends only what is new
            (linear total cost). If it holds a checkpoint of the same run (same dataset, task,
            model fingerprint, metrics, AMP and shard) the run resumes from it; any difference is
            an error naming the fields. Under ``torchrun`` each rank keeps its own part. The
            caller deletes it when the results are written.
        shard: ``"i/n"``: evaluate only the samples whose id hashes to shard ``i`` of ``n``
            (:func:`shard_of`); merge the shards' run directories with ``medimg-bench merge``.
        subgroups: manifest columns (``sex``, ``site``, ``age`` binned…) to break every metric
            down by, with gaps and the equity-scaled score (``summary["subgroups"]``).
        n_resamples, confidence, seed: bootstrap settings for the summary's intervals
            (clustered by ``patient_id``).

    Returns :class:`Results` (per-sample table, summary, manifest); nothing is written to disk.
    ``manifest["wall_time_s"]`` is the total over every segment of a resumed run
    (``manifest["segments"]``); ``manifest["timings_s"]`` splits the last one into loop, table
    and summary.
    """
    task_obj = create_task(task) if isinstance(task, str) else task
    classes = getattr(dataset, "classes", None)
    if metrics and all(isinstance(m, Metric) for m in metrics.values()):
        metric_objs: dict[str, Metric] = dict(metrics)  # type: ignore[arg-type]
        for m in metric_objs.values():  # ready objects may hold another run's samples
            m.reset()
    else:
        metric_objs = task_obj.build_metrics(metrics, classes)  # type: ignore[arg-type]
    shard_spec = parse_shard(shard)
    dev = resolve_device(device)
    model.to(dev)
    model.eval()
    if hasattr(model, "bind_dataset"):  # model=predictions: score columns matched to these classes
        model.bind_dataset(dataset)
    start = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    from medimg_bench.engine.distributed import ShardSampler, gather_lists, world

    rank, world_size = world()
    records = Records()
    failures: list[dict[str, Any]] = []
    done: list[str] = []
    all_ids: list[str] | None = None
    indices: list[int] | None = None  # None: every index, in order
    if shard_spec is not None:
        all_ids = _ids_of(dataset)
        i_shard, n_shard = shard_spec
        indices = [i for i, sid in enumerate(all_ids) if shard_of(sid, n_shard) == i_shard]
    if world_size > 1:
        base = indices if indices is not None else range(len(dataset))
        indices = [base[j] for j in ShardSampler(len(base))]
    ds_identity = dataset_identity(dataset)  # hashes file contents (cached by path, size, mtime)
    ckpt = None
    segments: list[dict[str, Any]] = []
    pending_restore: dict[str, dict[str, int]] = {}
    if checkpoint is not None:
        from medimg_bench.engine.checkpoint import Checkpoint

        ckpt_key = {
            "dataset": ds_identity,
            "task": _settings(task_obj),
            "model": model_fingerprint(model),
            "metrics": {k: _metric_settings(m) for k, m in sorted(metric_objs.items())},
            "amp": bool(amp),
            "shard": list(shard_spec) if shard_spec else None,
        }
        ckpt = Checkpoint(checkpoint, key=ckpt_key, rank=rank, world_size=world_size)
        saved = ckpt.load()
        if saved is not None:
            from medimg_bench.engine.checkpoint import restore_metrics

            restore_metrics(metric_objs, saved["metrics"])  # on the CPU; moved on first update
            pending_restore = {k: {s: len(v) for s, v in saved["metrics"][k].items() if isinstance(v, list)}
                               for k in metric_objs}
            records, failures, done = saved["records"], saved["failures"], saved["done"]
            segments = saved["segments"]
            ckpt.mark_saved(done=done, records=records, failures=failures, metrics=metric_objs)
            seen = set(done)
            all_ids = all_ids if all_ids is not None else _ids_of(dataset)
            base = indices if indices is not None else range(len(dataset))
            indices = [i for i in base if all_ids[i] not in seen]
        ckpt.begin_segment(start.isoformat(), index=len(segments))
    safe_dataset = _SafeDataset(dataset, fail_fast)
    loader = torch.utils.data.DataLoader(
        safe_dataset,
        batch_size=batch_size,
        sampler=indices,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=_split_collate,
        pin_memory=dev.type == "cuda",
    )
    amp_dtype = torch.float16 if dev.type == "cuda" else torch.bfloat16

    def autocast() -> Any:
        return torch.autocast(dev.type, dtype=amp_dtype) if amp else contextlib.nullcontext()

    positions = indices if indices is not None else range(len(dataset))

    def refetch(n_batch: int) -> dict[str, Any] | None:
        """The loader's ``n_batch``-th batch, loaded again (the samples that load)."""
        return _split_collate(safe_dataset.__getitems__(positions[(n_batch - 1) * batch_size:n_batch * batch_size]))[0]

    steps = BatchSteps(task=task_obj, model=model, metrics=metric_objs, classes=classes, records=records,
                       failures=failures, autocast=autocast, fail_fast=fail_fast,
                       pending_restore=pending_restore, refetch=refetch)

    label = name or getattr(dataset, "name", "eval")
    n_todo = len(loader.sampler)
    last_save = bar_last = time.perf_counter()
    bar_pending = 0
    with _progress(progress and rank == 0, len(done) + n_todo, label) as bar:
        bar_task = bar.add_task(label, total=len(done) + n_todo, completed=len(done)) if bar is not None else None
        for n_batch, (batch, failed) in enumerate(_batches(loader, inference=steps.defer), start=1):
            if batch is not None:
                steps.run(batch, n_batch)  # scored now, or with the next block (engine/loop.py)
                done.extend(batch["id"])
            if failed:
                failures.extend(failed)
                done.extend(f["id"] for f in failed)
            if (ckpt is not None and n_batch % max(1, checkpoint_every) == 0
                    and time.perf_counter() - last_save >= checkpoint_interval_s):
                steps.flush()  # a checkpoint holds every sample in `done`, scored
                ckpt.save(done=done, records=records, failures=failures, metrics=metric_objs,
                          elapsed_s=time.perf_counter() - t0)
                last_save = time.perf_counter()
            if bar is not None:  # at most 10 refreshes a second: a bar update costs ~0.1 ms
                bar_pending += (len(batch["id"]) if batch else 0) + len(failed)
                if time.perf_counter() - bar_last >= 0.1:
                    bar.update(bar_task, advance=bar_pending)
                    bar_pending, bar_last = 0, time.perf_counter()
        steps.flush()
        if bar is not None and bar_pending:
            bar.update(bar_task, advance=bar_pending)
    t_loop = time.perf_counter() - t0

    if world_size > 1:
        for metric in metric_objs.values():
            metric.sync()
        records = Records.concat(gather_lists([records]))
        failures = gather_lists(failures)
    order: dict[str, int] | None = None
    if world_size > 1 or failures or shard_spec is not None:
        all_ids = all_ids if all_ids is not None else _ids_of(dataset)
        order = {sid: i for i, sid in enumerate(all_ids)}
        failures.sort(key=lambda r: order.get(r["id"], len(order)))  # type: ignore[union-attr]
    if world_size > 1:  # back to dataset order: results equal a single-process run exactly
        records = records.sorted_by(order)  # type: ignore[arg-type]
        for metric in metric_objs.values():
            _reorder_states(metric, order)  # type: ignore[arg-type]
    patients = _patients(dataset)
    t1 = time.perf_counter()
    samples = build_samples_table(records, metric_objs, failures, patients)
    t2 = time.perf_counter()
    summary = summarize(
        metric_objs, samples, patients=patients, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    if getattr(dataset, "dropped", None):  # rows the loader dropped on request, by reason
        summary["n_dropped"] = dict(dataset.dropped)
    subgroup_map: dict[str, dict[str, str]] = {}
    if subgroups:
        from medimg_bench.engine.subgroups import subgroup_labels, subgroup_summary

        manifest_df = getattr(dataset, "manifest", None)
        if manifest_df is None:
            raise ValueError("subgroups need a dataset with a manifest (a ManifestDataset)")
        subgroup_map = {attr: subgroup_labels(manifest_df, attr) for attr in subgroups}
        if shard_spec is None:
            summary["subgroups"] = {
                attr: subgroup_summary(metric_objs, subgroup_map[attr], n_resamples=n_resamples,
                                       confidence=confidence, seed=seed) for attr in subgroups
            }
        else:  # a shard's groups can be too small to score: `medimg-bench merge` computes them
            summary["subgroups_note"] = "subgroup breakdowns are computed when the shards are merged"
    t3 = time.perf_counter()
    end = datetime.now(timezone.utc)
    segment = {"index": len(segments), "start_time": start.isoformat(), "end_time": end.isoformat(),
               "wall_time_s": round(t3 - t0, 3)}
    all_segments = [*segments, segment]
    manifest = {
        "name": label,
        "task": task_obj.name,
        "model": getattr(model, "name", type(model).__name__),
        # hashing the weights costs ~1 s per GB: done when a checkpoint or a shard needs it
        "model_fingerprint": ckpt.key["model"] if ckpt is not None
        else model_fingerprint(model) if shard_spec is not None else None,
        "dataset": {
            "name": getattr(dataset, "name", type(dataset).__name__),
            "n_samples": len(dataset),
            "fingerprint": ds_identity.get("fingerprint"),
            "identity": ds_identity,  # manifest, file contents and options (datasets/base.py)
            "classes": list(classes) if classes else None,
            "dropped": dict(getattr(dataset, "dropped", None) or {}),  # e.g. on_missing_label=skip
        },
        "device": _device_name(dev),
        "amp": amp,
        "batch_size": batch_size,
        "start_time": all_segments[0]["start_time"],
        "end_time": end.isoformat(),
        "wall_time_s": round(sum(float(sg["wall_time_s"]) for sg in all_segments), 3),
        "segments": all_segments,
        "timings_s": {"loop": round(t_loop, 3), "table": round(t2 - t1, 3), "summary": round(t3 - t2, 3)},
        "seed": seed,
    }
    if shard_spec is not None:
        manifest["shard"] = {"index": shard_spec[0], "count": shard_spec[1], "n_selected": len(done)}
    results = Results(
        name=label, task=task_obj, samples=samples, summary=summary, manifest=manifest, metrics=metric_objs
    )
    results.parts = {  # what `medimg-bench merge` needs to rebuild a single run from shards
        "records": records, "failures": failures, "patients": patients,
        "ids": all_ids if all_ids is not None else None, "subgroups": subgroup_map,
        "settings": {"n_resamples": n_resamples, "confidence": confidence, "seed": seed},
    }
    return results


def _metric_settings(metric: Metric) -> str:
    """A metric's class and options (not its states): a checkpoint made with other settings
    must not be resumed."""
    opts = {k: v for k, v in vars(metric).items() if k not in metric._defaults and not k.startswith("_")}
    return f"{type(metric).__name__}{sorted((k, _stable_repr(v)) for k, v in opts.items())}"


def _reorder_states(metric: Metric, order: dict[str, int]) -> None:
    """Sort a metric's per-sample ``cat`` states into dataset order (after a distributed sync)."""
    ids = list(metric.ids)
    perm = sorted(range(len(ids)), key=lambda i: order.get(ids[i], len(order)))
    if perm == list(range(len(ids))):
        return
    index = torch.as_tensor(perm, dtype=torch.long)
    for name, reduction in metric._reductions.items():
        value = getattr(metric, name)
        if reduction != "cat" or not value:
            continue
        if name == "ids" or (len(value) == len(ids) and not isinstance(value[0], torch.Tensor)):
            setattr(metric, name, [value[i] for i in perm])
            continue
        try:
            flat = torch.cat([v if v.ndim else v[None] for v in value])
        except RuntimeError:  # per-sample tensors of different shapes
            flat = None
        if flat is not None and flat.shape[0] == len(ids):
            setattr(metric, name, [flat[index.to(flat.device)]])
        elif len(value) == len(ids):
            setattr(metric, name, [value[i] for i in perm])


def _patients(dataset: Any) -> dict[str, str]:
    manifest = getattr(dataset, "manifest", None)
    if manifest is not None and "patient_id" in manifest.columns:
        return dict(zip(manifest["id"].astype(str), manifest["patient_id"].astype(str)))
    return {}


def _device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(dev)}"
    import platform

    return f"cpu:{platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"
