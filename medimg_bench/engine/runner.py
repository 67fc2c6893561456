"""The evaluation: one pass of a model over a dataset, scored, as a short sequence of named
phases over one :class:`EvalOptions`:

``plan_samples`` (shard, rank) → ``open_run_state`` (resume from the checkpoint) →
``run_batches`` (predict and score, engine/loop.py) → ``gather`` (distributed ranks, dataset
order) → ``build_table`` (per-sample table) → ``summarize_run`` (aggregates, intervals,
subgroups) → ``make_results`` (manifest, :class:`Results`).

Per-sample records and failures are kept, metrics are updated on the device the predictions
are on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from medimg_bench.engine.loader import (  # noqa: F401  (imported from here by tests)
    Failure,
    SafeDataset,
    make_loader,
    sample_ids,
    split_collate,
)
from medimg_bench.engine.loop import BatchSteps, run_batches
from medimg_bench.engine.options import EvalOptions, parse_shard, resolve_device
from medimg_bench.engine.plan import (
    RunIdentity,
    RunState,
    SamplePlan,
    metric_settings,
    model_fingerprint,
    object_settings,
    open_run_state,
    plan_samples,
    shard_of,
)
from medimg_bench.engine.results import EvaluationFailed, Records, Results, build_samples_table
from medimg_bench.engine.summary import exclusion_summary, summarize
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import create_task
from medimg_bench.tasks.base import Task

__all__ = ["evaluate", "EvaluationFailed", "run_evaluation", "EvalOptions", "resolve_device", "parse_shard", "shard_of",
           "model_fingerprint"]

# the names these had when they lived here (benchmarks, merge and tests import them)
_split_collate = split_collate
_ids_of = sample_ids
_metric_settings = metric_settings
_settings = object_settings

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
    retry_failed: bool = False,
    max_failure_rate: float | None = 1.0,
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
            an error naming the fields. Under ``torchrun`` each rank keeps its own part. A run
            with failed samples saves its last part at the end. The caller deletes it when the
            results are written (or keeps it, to retry the failed samples).
        retry_failed: on resuming from ``checkpoint``, predict again the samples that failed
            before (their failure records are replaced by the new outcome, nothing else is
            recomputed); the results are in dataset order as if they had never failed.
        shard: ``"i/n"``: evaluate only the samples whose id hashes to shard ``i`` of ``n``
            (:func:`shard_of`); merge the shards' run directories with ``medimg-bench merge``.
        subgroups: manifest columns (``sex``, ``site``, ``age`` binned…) to break every metric
            down by, with gaps and the equity-scaled score (``summary["subgroups"]``).
        n_resamples, confidence, seed: bootstrap settings for the summary's intervals
            (clustered by ``patient_id``).
        max_failure_rate: a fraction in [0, 1]. When no sample was scored, or more than this
            share of them failed, :class:`EvaluationFailed` is raised, carrying the
            :class:`Results` (``exc.results``) — the CLI exits 3 in the same case. ``1.0`` (the
            default) fails only a run that scored nothing; ``None`` never raises (the caller
            judges ``results.exceeds_failure_rate(rate)`` itself).

    The keywords after ``metrics`` are :class:`EvalOptions` fields; :func:`run_evaluation` takes
    the object itself. Returns :class:`Results` (per-sample table, summary, manifest); nothing is
    written to disk. ``manifest["wall_time_s"]`` is the total over every segment of a resumed run
    (``manifest["segments"]``); ``manifest["timings_s"]`` splits the last one into loop, table
    and summary.
    """
    options = EvalOptions(
        batch_size=batch_size, num_workers=num_workers, device=device, amp=amp, fail_fast=fail_fast,
        progress=progress, n_resamples=n_resamples, confidence=confidence, seed=seed, name=name,
        subgroups=tuple(subgroups), checkpoint=checkpoint, checkpoint_every=checkpoint_every,
        checkpoint_interval_s=checkpoint_interval_s, shard=shard, retry_failed=retry_failed,
    )
    if max_failure_rate is not None and not 0.0 <= float(max_failure_rate) <= 1.0:
        raise ValueError(f"max_failure_rate={max_failure_rate!r}: expected a fraction between 0 and 1")
    task_obj = create_task(task) if isinstance(task, str) else task
    results = run_evaluation(model, dataset, task_obj, build_metrics(task_obj, metrics, dataset), options)
    if max_failure_rate is not None and results.exceeds_failure_rate(float(max_failure_rate)):
        raise EvaluationFailed(results, float(max_failure_rate))
    return results


def build_metrics(
    task: Task, metrics: Mapping[str, Mapping[str, Any] | None] | Mapping[str, Metric] | None, dataset: Any
) -> dict[str, Metric]:
    """The run's metric objects: ready ``Metric`` objects (reset: they may hold another run's
    samples), or the task's metrics built from ``{name: options}`` with the dataset's classes."""
    if metrics and all(isinstance(m, Metric) for m in metrics.values()):
        ready: dict[str, Metric] = dict(metrics)  # type: ignore[arg-type]
        for m in ready.values():
            m.reset()
        return ready
    return task.build_metrics(metrics, getattr(dataset, "classes", None))  # type: ignore[arg-type]


@dataclass
class _Clock:
    """When the run (this segment of it) started, and when each phase ended."""

    start: datetime
    t0: float
    marks: dict[str, float]

    @classmethod
    def begin(cls) -> _Clock:
        return cls(datetime.now(timezone.utc), time.perf_counter(), {})

    def mark(self, phase: str) -> None:
        self.marks[phase] = time.perf_counter()

    def seconds(self, phase: str, since: str | None = None) -> float:
        return round(self.marks[phase] - (self.marks[since] if since else self.t0), 3)


@dataclass
class _Run:
    """One evaluation on its way through the phases."""

    model: Any
    dataset: Any
    task: Task
    metrics: dict[str, Metric]
    options: EvalOptions
    device: torch.device
    clock: _Clock
    plan: SamplePlan
    identity: RunIdentity
    state: RunState

    @property
    def label(self) -> str:
        return self.options.name or getattr(self.dataset, "name", "eval")


def run_evaluation(model: Any, dataset: Any, task: Task, metrics: dict[str, Metric], options: EvalOptions) -> Results:
    """:func:`evaluate` with its options in one object: the phases of the module docstring."""
    device = resolve_device(options.device)
    task.bind_dataset(dataset)  # single- vs multi-label from the dataset unless set
    _check_model_agrees(model, task, dataset)
    model.to(device)
    model.eval()
    if getattr(model, "needs_pixels", True) is False and hasattr(dataset, "skip_pixels"):
        dataset.skip_pixels()  # the adapter declares it reads no pixel (stored predictions)
    if hasattr(model, "bind_dataset"):  # model=predictions: score columns matched to these classes
        model.bind_dataset(dataset)
    clock = _Clock.begin()
    plan = plan_samples(dataset, options)
    identity = RunIdentity(dataset, task, model, metrics, options)
    state = open_run_state(plan, identity, clock.start.isoformat())
    run = _Run(model, dataset, task, metrics, options, device, clock, plan, identity, state)
    steps, loader = _loop_parts(run)
    run_batches(steps, loader, state, options, t0=clock.t0, label=run.label,
                total=len(state.done) + len(loader.sampler), progress=options.progress and plan.rank == 0)
    clock.mark("loop")
    gather(state, metrics, plan, dataset)
    patients = _patients(dataset)
    clock.mark("table_start")
    samples = build_samples_table(state.records, metrics, state.failures, patients)
    clock.mark("table")
    summary, subgroup_map = summarize_run(metrics, samples, patients, dataset, options)
    clock.mark("summary")
    return make_results(run, samples, summary, patients, subgroup_map)


def _loop_parts(run: _Run) -> tuple[BatchSteps, Any]:
    """The batch steps and the loader over the samples still to do."""
    options, device = run.options, run.device
    loader, refetch = make_loader(run.dataset, run.plan.indices, batch_size=options.batch_size,
                                  num_workers=options.num_workers, fail_fast=options.fail_fast,
                                  pin_memory=device.type == "cuda")
    autocast = None
    if options.amp:
        amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16

        def autocast() -> Any:
            return torch.autocast(device.type, dtype=amp_dtype)

    steps = BatchSteps(task=run.task, model=run.model, metrics=run.metrics, classes=getattr(run.dataset, "classes", None),
                       state=run.state, autocast=autocast, fail_fast=options.fail_fast, refetch=refetch)
    return steps, loader


def _check_model_agrees(model: Any, task: Task, dataset: Any) -> None:
    """A classifier whose scores are multi-label (sigmoid) on single-label data, or the reverse,
    fails every sample at scoring: say so once, naming both, before anything runs."""
    want, has = task.multilabel, getattr(model, "multilabel", None)
    if not isinstance(want, bool) or not isinstance(has, bool) or want == has:
        return
    if getattr(dataset, "multilabel", None) is None:
        return  # the task's own setting, nothing the data says
    kinds = {True: "multi-label (sigmoid scores)", False: "single-label (softmax scores)"}
    name = getattr(dataset, "name", type(dataset).__name__)
    raise ValueError(f"model {getattr(model, 'name', type(model).__name__)!r} gives {kinds[has]} but dataset "
                     f"{name!r} is {kinds[want].split(' (')[0]}: create the model with multilabel={want}")


def gather(state: RunState, metrics: Mapping[str, Metric], plan: SamplePlan, dataset: Any) -> None:
    """Bring every rank's records, failures and metric states together (under ``torchrun``)
    and put them in dataset order where that may have changed: several ranks, failures, a
    shard, samples predicted again after failing."""
    if plan.world_size > 1:
        from medimg_bench.engine.distributed import gather_lists

        for metric in metrics.values():
            metric.sync()
        state.records = Records.concat(gather_lists([state.records]))
        state.failures = gather_lists(state.failures)
    if not (plan.world_size > 1 or state.failures or plan.shard is not None or state.retried):
        return
    order = {sid: i for i, sid in enumerate(plan.all_ids(dataset))}
    state.failures.sort(key=lambda r: order.get(r["id"], len(order)))
    if plan.world_size > 1 or state.retried:  # results equal a single-process run exactly
        state.records = state.records.sorted_by(order)
        for metric in metrics.values():
            metric.reorder(order)


def summarize_run(
    metrics: Mapping[str, Metric], samples: Any, patients: Mapping[str, str], dataset: Any, options: EvalOptions
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """``(summary, subgroup labels)``: aggregates with bootstrap intervals, the rows the loader
    dropped on request, and the per-subgroup breakdowns (computed at the merge for a shard)."""
    summary = summarize(metrics, samples, patients=patients, **options.bootstrap)
    if getattr(dataset, "dropped", None):  # rows the loader dropped on request, by reason
        summary["n_dropped"] = dict(dataset.dropped)
    summary.update(exclusion_summary(dataset))  # items the layout lists that are not samples
    subgroup_map: dict[str, dict[str, str]] = {}
    if options.subgroups:
        from medimg_bench.engine.subgroups import subgroup_labels, subgroup_summary

        manifest_df = getattr(dataset, "manifest", None)
        if manifest_df is None:
            raise ValueError("subgroups need a dataset with a manifest (a ManifestDataset)")
        subgroup_map = {attr: subgroup_labels(manifest_df, attr) for attr in options.subgroups}
        if options.shard is None:
            summary["subgroups"] = {attr: subgroup_summary(metrics, subgroup_map[attr], **options.bootstrap)
                                    for attr in options.subgroups}
        else:  # a shard's groups can be too small to score: `medimg-bench merge` computes them
            summary["subgroups_note"] = "subgroup breakdowns are computed when the shards are merged"
    return summary, subgroup_map


def make_results(run: _Run, samples: Any, summary: dict[str, Any], patients: dict[str, str],
                 subgroup_map: dict[str, Any]) -> Results:
    """The :class:`Results`: table, summary, manifest (segments, timings, fingerprints) and the
    parts a merge of shards needs."""
    results = Results(name=run.label, task=run.task, samples=samples, summary=summary, manifest=_manifest(run),
                      metrics=run.metrics)
    results.parts = {  # what `medimg-bench merge` needs to rebuild a single run from shards
        "records": run.state.records, "failures": run.state.failures, "patients": patients,
        "ids": run.plan.ids, "subgroups": subgroup_map, "settings": run.options.bootstrap,
    }
    return results


def _manifest(run: _Run) -> dict[str, Any]:
    options, state, clock, dataset = run.options, run.state, run.clock, run.dataset
    end = datetime.now(timezone.utc)
    segment = {"index": len(state.segments), "start_time": clock.start.isoformat(), "end_time": end.isoformat(),
               "wall_time_s": clock.seconds("summary")}
    segments = [*state.segments, segment]
    ckpt = state.checkpoint
    classes = getattr(dataset, "classes", None)
    manifest = {
        "name": run.label,
        "task": run.task.name,
        "model": getattr(run.model, "name", type(run.model).__name__),
        # hub id, revision, resolved commit and SHA-256 of every weight file (medimg_bench/hub.py)
        "model_weights": getattr(run.model, "weight_sources", None),
        # hashing the weights costs ~1 s per GB: done when a checkpoint or a shard needs it
        "model_fingerprint": ckpt.key["model"] if ckpt is not None
        else model_fingerprint(run.model) if options.shard is not None else None,
        "dataset": {
            "name": getattr(dataset, "name", type(dataset).__name__),
            "n_samples": len(dataset),
            "fingerprint": run.identity.data.get("fingerprint"),
            "identity": run.identity.data,  # manifest, file contents and options (datasets/base.py)
            "classes": list(classes) if classes else None,
            "classes_note": getattr(dataset, "classes_note", None),  # e.g. nifti_pairs label_<k>
            # root=hf://…: repository, revision, commit and SHA-256 of every file (medimg_bench/hub.py)
            "source": getattr(dataset, "hub_source", None),
            "dropped": dict(getattr(dataset, "dropped", None) or {}),  # e.g. on_missing_label=skip
            "exclusions": exclusion_summary(dataset)["exclusions"],  # a merge of shards keeps them
            # the label file's release and digests where a loader reads one of several (nih_cxr14)
            "label_release": getattr(dataset, "label_release", None),
        },
        "device": _device_name(run.device),
        "amp": options.amp,
        "batch_size": options.batch_size,
        "start_time": segments[0]["start_time"],
        "end_time": end.isoformat(),
        "wall_time_s": round(sum(float(sg["wall_time_s"]) for sg in segments), 3),
        "segments": segments,
        "timings_s": {"loop": clock.seconds("loop"), "table": clock.seconds("table", "table_start"),
                      "summary": clock.seconds("summary", "table")},
        "seed": options.seed,
        # content digests of the files task / metric options name (models of scoring=rexrank, a
        # judge's prompt folder …): a comparison of two runs notes when they differ
        "option_files": run.identity.option_files()[0] or None,
    }
    if options.shard is not None:
        manifest["shard"] = {"index": options.shard[0], "count": options.shard[1], "n_selected": len(state.done)}
    if state.retried:
        failed = {f["id"] for f in state.failures}
        manifest["retried"] = {"n": len(state.retried), "recovered": sum(sid not in failed for sid in state.retried)}
    return manifest


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
