"""Task base class: what the engine needs to know about a kind of problem."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import create_metric

__all__ = ["Task", "TaskScores"]


class TaskScores(NamedTuple):
    """What :meth:`Task.score` returns for a batch: the inputs of every metric's ``update``
    (``preds``, ``targets``) and the per-sample record columns (``records``: what
    :meth:`Task.sample_records` returns)."""

    preds: Any
    targets: Any
    records: Any


class Task:
    """Maps model outputs and batch targets to metric inputs, per-sample records, loss and plots.

    Every hook the engine calls is declared here with its default, so a subclass overrides
    only what it changes (``tests/tasks/test_base.py`` checks that a registered task defines
    no public method the base class lacks)."""

    name: str = "task"
    default_metrics: Mapping[str, Mapping[str, Any]] = {}
    #: True when :meth:`score` on several batches concatenated equals its per-batch results
    #: concatenated (the engine may then defer scoring, ``engine/loop.py``); None: only when the
    #: scoring methods are the classification task's own
    rowwise: bool | None = None
    #: single- (False) or multi-label (True) classification; None: a task without that choice
    multilabel: bool | None = None

    def loss(self, logits: torch.Tensor, batch: dict[str, Any]) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError(f"task {self.name!r} has no training loss")

    def predict(self, model: Any, batch: dict[str, Any]) -> dict[str, Any]:
        """Model outputs for ``batch``. Discriminative tasks call ``model.predict(batch)``;
        generative tasks override this to build prompts and call ``model.generate(requests)``."""
        return model.predict(batch)

    def score(self, batch: dict[str, Any], outputs: dict[str, Any], *,
              classes: Sequence[str] | None = None) -> TaskScores:
        """The metric inputs and the record columns of ``batch``, each sample scored once. The
        default calls :meth:`metric_inputs` and :meth:`sample_records`; a task whose records
        repeat what it scores (VQA, MOAKS) overrides this to build both from one pass."""
        preds, targets = self.metric_inputs(batch, outputs)
        return TaskScores(preds, targets, self.sample_records(batch, outputs, classes))

    def metric_inputs(self, batch: dict[str, Any], outputs: dict[str, Any]) -> tuple[Any, Any]:  # pragma: no cover
        """``(preds, targets)`` every metric's ``update`` takes for ``batch``."""
        raise NotImplementedError

    def metric_kwargs(self, classes: Sequence[str] | None) -> dict[str, Any]:
        """Keyword arguments every metric of this task gets from the dataset (e.g. class names)."""
        return {}

    def build_metrics(
        self, spec: Mapping[str, Mapping[str, Any] | None] | None, classes: Sequence[str] | None
    ) -> dict[str, Metric]:
        """Instantiate the stateful metrics named in ``spec`` (name → options, where an option
        ``metric`` names the registry entry; None → the task's defaults), each by
        :meth:`build_metric`."""
        spec = dict(spec) if spec else dict(self.default_metrics)
        metrics = {}
        for name, options in spec.items():
            options = dict(options or {})
            registry_name = options.pop("metric", name)
            metrics[name] = self.build_metric(name, registry_name, options, classes)
        return metrics

    def build_metric(
        self, name: str, registry_name: str, options: dict[str, Any], classes: Sequence[str] | None
    ) -> Metric:
        """The metric ``name`` of a spec: registry entry ``registry_name`` with ``options`` over
        :meth:`metric_kwargs`. Tasks whose metrics need other keywords override this."""
        return create_metric(registry_name, **{**self.metric_kwargs(classes), **options})

    def sample_records(
        self, batch: dict[str, Any], outputs: dict[str, Any], classes: Sequence[str] | None
    ) -> list[dict[str, Any]]:
        """Rows for the per-sample table beyond metric values (one per sample, or sample × class)."""
        return [{"id": sid} for sid in batch["id"]]

    def plots(self, results: Any, out_dir: Path) -> list[Path]:
        """PNG plots for a finished run; returns the files written."""
        return []

    def write_outputs(self, results: Any, run_dir: Path) -> list[Path]:
        """Task-level files of a finished run beside ``summary.json`` (called by
        ``Results.save``); returns the files written."""
        return []

    def bind_dataset(self, dataset: Any) -> None:
        """Take what the dataset decides (the classification task: single- vs multi-label)
        before the run; nothing by default."""

    def manifest_notes(self) -> dict[str, Any]:
        """Task-level facts ``manifest.json`` pins (e.g. a judge's identity); none by default."""
        return {}

    def key_files(self) -> dict[str, str]:
        """``{option: path}`` of the files whose content decides the numbers (a run's key holds
        their content, not their path); none by default."""
        return {}
