"""The evaluation loop: one pass over a dataset, per-sample records, failures kept, metrics updated
on the device the predictions are on."""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from medimg_bench.engine.results import Results, build_samples_table
from medimg_bench.engine.summary import summarize
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import create_task
from medimg_bench.sample import collate, decollate
from medimg_bench.tasks.base import Task

__all__ = ["evaluate", "resolve_device"]


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
            if self.fail_fast:
                raise
            return _Failure(id=self._sid(index), stage="load", error=f"{type(exc).__name__}: {exc}")


def _split_collate(items: Sequence[Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    ok = [s for s in items if not isinstance(s, _Failure)]
    failed = [dict(s) for s in items if isinstance(s, _Failure)]
    return (collate(ok) if ok else None), failed


def _snapshot(metric: Metric) -> dict[str, Any]:
    return {
        k: (len(getattr(metric, k)) if isinstance(getattr(metric, k), list) else getattr(metric, k).clone())
        for k in metric._defaults
    }


def _restore(metric: Metric, snap: Mapping[str, Any]) -> None:
    for k, v in snap.items():
        if isinstance(v, int):
            del getattr(metric, k)[v:]
        else:
            setattr(metric, k, v)


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
) -> Results:
    """Run ``model`` over ``dataset`` once and score it.

    Args:
        model: an adapter with ``predict(batch) -> dict`` (see :mod:`medimg_bench.models`).
        dataset: a map-style dataset of sample dicts (a ``ManifestDataset`` gives ids and patients).
        task: task name or :class:`Task`; decides metric inputs, records and plots.
        metrics: ``{name: options}`` for registered metrics, or ready ``Metric`` objects.
        amp: autocast to bfloat16 (CPU) / float16 (CUDA) during inference.
        fail_fast: re-raise the first failing sample instead of recording it and going on.
        checkpoint: file to save progress to every ``checkpoint_every`` batches; if it exists,
            the run resumes from it (single process only). The caller deletes it when done.
        subgroups: manifest columns (``sex``, ``site``, ``age`` binned…) to break every metric
            down by, with gaps and the equity-scaled score (``summary["subgroups"]``).
        n_resamples, confidence, seed: bootstrap settings for the summary's intervals
            (clustered by ``patient_id``).

    Returns :class:`Results` (per-sample table, summary, manifest); nothing is written to disk.
    """
    task_obj = create_task(task) if isinstance(task, str) else task
    classes = getattr(dataset, "classes", None)
    if metrics and all(isinstance(m, Metric) for m in metrics.values()):
        metric_objs: dict[str, Metric] = dict(metrics)  # type: ignore[arg-type]
        for m in metric_objs.values():  # ready objects may hold another run's samples
            m.reset()
    else:
        metric_objs = task_obj.build_metrics(metrics, classes)  # type: ignore[arg-type]
    dev = resolve_device(device)
    model.to(dev)
    model.eval()
    start = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    from medimg_bench.engine.distributed import ShardSampler, gather_lists, world

    rank, world_size = world()
    records: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    done: list[str] = []
    sampler: Any = ShardSampler(len(dataset)) if world_size > 1 else None
    ckpt_key: dict[str, Any] = {}
    if checkpoint is not None and world_size > 1:
        raise ValueError("checkpoint/resume is supported in single-process runs only")
    if checkpoint is not None:
        from medimg_bench.engine.checkpoint import load_checkpoint, restore_metrics

        ckpt_key = {
            "dataset": dataset.fingerprint() if hasattr(dataset, "fingerprint") else str(len(dataset)),
            "task": task_obj.name,
            "model": getattr(model, "name", type(model).__name__),
            "metrics": {k: _metric_settings(m) for k, m in sorted(metric_objs.items())},
        }
        saved = load_checkpoint(checkpoint, key=ckpt_key)
        if saved is not None:
            restore_metrics(metric_objs, saved["metrics"], dev)
            records, failures, done = saved["records"], saved["failures"], saved["done"]
            seen = set(done)
            ids_of = getattr(dataset, "sample_id", lambda i: f"index_{i}")
            sampler = [i for i in range(len(dataset)) if ids_of(i) not in seen]
    loader = torch.utils.data.DataLoader(
        _SafeDataset(dataset, fail_fast),
        batch_size=batch_size,
        sampler=sampler,
        shuffle=False,
        num_workers=num_workers,
        collate_fn=_split_collate,
        pin_memory=dev.type == "cuda",
    )
    amp_dtype = torch.float16 if dev.type == "cuda" else torch.bfloat16

    def run_batch(batch: dict[str, Any]) -> None:
        with torch.inference_mode(), torch.autocast(dev.type, dtype=amp_dtype, enabled=amp):
            outputs = task_obj.predict(model, batch)
        preds, targets = task_obj.metric_inputs(batch, outputs)
        snaps = {k: _snapshot(m) for k, m in metric_objs.items()}
        try:
            for metric in metric_objs.values():
                metric.update(preds, targets, batch.get("meta"), ids=batch["id"])
            rows = task_obj.sample_records(batch, outputs, classes)
        except Exception:
            for k, m in metric_objs.items():
                _restore(m, snaps[k])
            raise
        records.extend(rows)

    label = name or getattr(dataset, "name", "eval")
    n_todo = len(loader.sampler)
    with _progress(progress and rank == 0, len(done) + n_todo, label) as bar:
        bar_task = bar.add_task(label, total=len(done) + n_todo, completed=len(done)) if bar is not None else None
        for n_batch, (batch, failed) in enumerate(loader, start=1):
            failures.extend(failed)
            if batch is not None:
                try:
                    run_batch(batch)
                except Exception as exc:
                    if fail_fast:
                        raise
                    if len(batch["id"]) == 1:
                        failures.append(_predict_failure(batch["id"][0], exc))
                    else:  # isolate the failing sample(s): retry one by one
                        for single in decollate(batch):
                            try:
                                run_batch(collate([single]))
                            except Exception as exc1:
                                failures.append(_predict_failure(single["id"], exc1))
            done.extend([*(batch["id"] if batch else []), *(f["id"] for f in failed)])
            if checkpoint is not None and n_batch % max(1, checkpoint_every) == 0:
                from medimg_bench.engine.checkpoint import save_checkpoint

                save_checkpoint(checkpoint, key=ckpt_key, done=done, records=records,
                                failures=failures, metrics=metric_objs)
            if bar is not None:
                bar.update(bar_task, advance=(len(batch["id"]) if batch else 0) + len(failed))

    for metric in metric_objs.values():
        metric.sync()
    records = gather_lists(records)
    failures = gather_lists(failures)
    order = _dataset_order(dataset)
    if world_size > 1:  # back to dataset order: results equal a single-process run exactly
        records.sort(key=lambda r: order.get(r["id"], len(order)))
        failures.sort(key=lambda r: order.get(r["id"], len(order)))
        for metric in metric_objs.values():
            _reorder_states(metric, order)
    patients = _patients(dataset)
    samples = build_samples_table(records, metric_objs, failures, patients)
    summary = summarize(
        metric_objs, samples, patients=patients, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    if subgroups:
        from medimg_bench.engine.subgroups import subgroup_labels, subgroup_summary

        manifest_df = getattr(dataset, "manifest", None)
        if manifest_df is None:
            raise ValueError("subgroups need a dataset with a manifest (a ManifestDataset)")
        summary["subgroups"] = {
            attr: subgroup_summary(metric_objs, subgroup_labels(manifest_df, attr)) for attr in subgroups
        }
    end = datetime.now(timezone.utc)
    manifest = {
        "name": label,
        "task": task_obj.name,
        "model": getattr(model, "name", type(model).__name__),
        "dataset": {
            "name": getattr(dataset, "name", type(dataset).__name__),
            "n_samples": len(dataset),
            "fingerprint": dataset.fingerprint() if hasattr(dataset, "fingerprint") else None,
            "classes": list(classes) if classes else None,
        },
        "device": _device_name(dev),
        "amp": amp,
        "batch_size": batch_size,
        "start_time": start.isoformat(),
        "end_time": end.isoformat(),
        "wall_time_s": round(time.perf_counter() - t0, 3),
        "seed": seed,
    }
    return Results(
        name=label, task=task_obj, samples=samples, summary=summary, manifest=manifest, metrics=metric_objs
    )


def _predict_failure(sample_id: str, exc: BaseException) -> dict[str, Any]:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return {"id": sample_id, "stage": "predict", "error": f"{type(exc).__name__}: {exc}{where}"}


def _metric_settings(metric: Metric) -> str:
    """A metric's class and options (not its states): a checkpoint made with other settings
    must not be resumed."""
    opts = {k: v for k, v in vars(metric).items() if k not in metric._defaults and not k.startswith("_")}
    return f"{type(metric).__name__}{sorted((k, repr(v)) for k, v in opts.items())}"


def _dataset_order(dataset: Any) -> dict[str, int]:
    sample_id = getattr(dataset, "sample_id", None)
    if not callable(sample_id):
        return {}
    return {sample_id(i): i for i in range(len(dataset))}


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
