"""Planning an evaluation before any batch runs: which samples this process evaluates (shard,
rank), what a resumed run already holds (its checkpoint), and what identifies the run (the
fingerprints a checkpoint is keyed to, each computed once, when first needed)."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from medimg_bench.datasets.base import dataset_identity
from medimg_bench.engine.loader import sample_ids
from medimg_bench.engine.options import EvalOptions
from medimg_bench.engine.results import Records
from medimg_bench.metrics.base import Metric

if TYPE_CHECKING:
    from medimg_bench.tasks.base import Task

__all__ = ["SamplePlan", "RunState", "RunIdentity", "plan_samples", "open_run_state", "shard_of",
           "model_fingerprint", "metric_settings", "key_files", "files_identity"]

log = logging.getLogger(__name__)


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


def object_settings(obj: Any) -> dict[str, Any]:
    """A task's (or any component's) class and declared, non-neutral parameters
    (:func:`medimg_bench.identity.param_identity`; declared files by content, in ``files``)."""
    from medimg_bench.identity import component_identity

    return component_identity(obj, files=False)


def metric_settings(metric: Metric) -> dict[str, Any]:
    """A metric's class and declared parameters (not its states): a checkpoint made with other
    settings must not be resumed."""
    return object_settings(metric)


def key_files(obj: Task | Metric) -> dict[str, str]:
    """``{option: local path}`` of the files and folders whose content decides the numbers of a
    task or metric (its ``key_files()`` hook, declared on both base classes: none by default)."""
    return {str(k): os.fspath(v) for k, v in (obj.key_files() or {}).items() if v is not None}


def files_identity(task: Task, metrics: Mapping[str, Metric]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(content digests, paths)`` of the files the task's and the metrics' options name, each
    ``{"task": {option: …}, "metrics": {name: {option: …}}}`` with empty parts left out. Digests
    come from :func:`medimg_bench._hashing.content_digests` (a file is read once per version)."""
    from medimg_bench._hashing import content_digests

    paths: dict[str, Any] = {}
    if files := key_files(task):
        paths["task"] = files
    per_metric = {name: f for name, m in sorted(metrics.items()) if (f := key_files(m))}
    if per_metric:
        paths["metrics"] = per_metric
    digests = {part: content_digests(v) if part == "task" else {n: content_digests(f) for n, f in v.items()}
               for part, v in paths.items()}
    return digests, paths


@dataclass
class SamplePlan:
    """The dataset positions this process evaluates, in order (``indices`` None: all of them)."""

    n_dataset: int
    indices: list[int] | None = None
    ids: list[str] | None = None  # every id in dataset order, once something needed them
    shard: tuple[int, int] | None = None
    rank: int = 0
    world_size: int = 1

    def all_ids(self, dataset: Any) -> list[str]:
        """Every sample id in dataset order (read once)."""
        if self.ids is None:
            self.ids = sample_ids(dataset)
        return self.ids

    @property
    def positions(self) -> Sequence[int]:
        return self.indices if self.indices is not None else range(self.n_dataset)


def plan_samples(dataset: Any, options: EvalOptions) -> SamplePlan:
    """Shard selection (``shard=i/n``: the ids hashing to ``i``), then this rank's share under
    ``torchrun`` (every ``world_size``-th sample, no padding)."""
    from medimg_bench.engine.distributed import ShardSampler, world

    rank, world_size = world()
    plan = SamplePlan(n_dataset=len(dataset), shard=options.shard, rank=rank, world_size=world_size)
    if options.shard is not None:
        i_shard, n_shard = options.shard
        plan.indices = [i for i, sid in enumerate(plan.all_ids(dataset)) if shard_of(sid, n_shard) == i_shard]
    if world_size > 1:
        base = plan.positions
        plan.indices = [base[j] for j in ShardSampler(len(base))]
    return plan


class RunIdentity:
    """What produced a run's numbers: the data's identity (manifest, file contents, options;
    ``datasets/base.py``), computed for every run since the manifest of the results holds it
    (file hashes are cached), and the checkpoint key, computed when first needed (hashing the
    weights takes ~1 s per GB: a run that never saves a checkpoint does not)."""

    def __init__(self, dataset: Any, task: Any, model: Any, metrics: Mapping[str, Metric],
                 options: EvalOptions) -> None:
        self.dataset, self.task, self.model, self.metrics, self.options = dataset, task, model, metrics, options
        self.data = dataset_identity(dataset)
        self._option_files: tuple[dict[str, Any], dict[str, Any]] | None = None

    def option_files(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(content digests, paths)`` of the files the task's and metrics' options name
        (:func:`files_identity`), computed once per run: the checkpoint key and the manifest
        both hold the digests."""
        if self._option_files is None:
            self._option_files = files_identity(self.task, self.metrics)
        return self._option_files

    def checkpoint_key(self) -> dict[str, Any]:
        """The key every checkpoint part carries: a part of another run is refused by field.
        Options naming files enter by content (``files``); their paths (``file_paths``) are
        shown in a refusal, never compared."""
        from medimg_bench.identity import IDENTITY_VERSION

        key = {
            "identity": IDENTITY_VERSION,  # the rule the parts below were derived by
            "dataset": self.data,
            "task": object_settings(self.task),
            "model": model_fingerprint(self.model),
            "metrics": {k: metric_settings(m) for k, m in sorted(self.metrics.items())},
            "amp": bool(self.options.amp),
            "shard": list(self.options.shard) if self.options.shard else None,
        }
        from medimg_bench.engine.checkpoint import DISPLAY_ONLY

        digests, paths = self.option_files()
        if digests:  # absent when no option names a file: earlier checkpoints keep resuming
            key["files"], key[DISPLAY_ONLY] = digests, paths
        return key


@dataclass
class RunState:
    """What the run holds so far: restored from its checkpoint, then grown by the loop."""

    records: Records = field(default_factory=Records)
    failures: list[dict[str, Any]] = field(default_factory=list)
    done: list[str] = field(default_factory=list)  # ids processed, scored or failed
    segments: list[dict[str, Any]] = field(default_factory=list)  # earlier process lifetimes
    #: metric name → ``cat`` state → items restored (moved to the device of the first update)
    pending_restore: dict[str, dict[str, int]] = field(default_factory=dict)
    checkpoint: Any = None  # engine.checkpoint.Checkpoint, or None
    retried: list[str] = field(default_factory=list)  # failed earlier, predicted again now
    #: predictions the checkpoint holds unscored (engine/loop.py scores them with its first block)
    unscored: list[dict[str, Any]] = field(default_factory=list)


def open_run_state(plan: SamplePlan, identity: RunIdentity, start_time: str) -> RunState:
    """The run's state: empty, or restored from ``options.checkpoint`` when it holds parts of
    this run (then ``plan`` keeps only the samples not done). With ``retry_failed`` the samples
    that failed before are taken out of the restored state and evaluated again."""
    options = identity.options
    state = RunState()
    if options.checkpoint is None:
        return state
    from medimg_bench.engine.checkpoint import Checkpoint, restore_metrics

    ckpt = Checkpoint(options.checkpoint, key=identity.checkpoint_key, rank=plan.rank, world_size=plan.world_size)
    state.checkpoint = ckpt
    saved = ckpt.load()
    if saved is not None:
        metrics = identity.metrics
        restore_metrics(metrics, saved["metrics"])  # on the CPU; moved on first update
        state.pending_restore = {k: {s: len(v) for s, v in saved["metrics"][k].items() if isinstance(v, list)}
                                 for k in metrics}
        state.records, state.failures, state.done = saved["records"], saved["failures"], saved["done"]
        state.segments = saved["segments"]
        state.unscored = saved.get("unscored") or []
        if options.retry_failed and state.failures:
            state.retried = [f["id"] for f in state.failures]
            again = set(state.retried)
            state.done = [sid for sid in state.done if sid not in again]
            state.failures = []
            ckpt.drop_on_next_save(state.retried)
        ckpt.mark_saved(done=state.done, records=state.records, failures=state.failures, metrics=metrics)
        seen = set(state.done)
        all_ids = plan.all_ids(identity.dataset)
        plan.indices = [i for i in plan.positions if all_ids[i] not in seen]
    ckpt.begin_segment(start_time, index=len(state.segments))
    return state
