"""Stateful metric base class (torchmetrics style) with per-sample values and a distributed sync.

Every stateful metric declares its states with :meth:`Metric.add_state` and the reduction used
to merge them across processes. ``"cat"`` states are lists of per-batch tensors; together with
the ``ids`` state they keep one value per sample, so a distributed gather can drop the duplicate
samples a padding sampler adds and every sample is counted exactly once.

Two kinds of metric share the class:

* per-sample metrics (``per_sample = True``: Dice, HD95 ...) keep a value per sample × class;
  :meth:`values` returns them and the engine aggregates (mean, median, bootstrap CI) itself;
* dataset-level metrics (``per_sample = False``: AUROC ...) keep the predictions and targets
  and :meth:`functional` turns any (resampled) set of them into a value per class, which is what
  the bootstrap in the engine's summaries calls.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import torch

__all__ = ["Metric", "nan_reduce", "shared_input_checks", "checked_once"]

# the results of input checks inside one shared_input_checks() scope: (check, id(obj)) -> (obj, result)
_CHECKS: contextvars.ContextVar[dict[tuple[str, int], tuple[Any, bool]] | None] = contextvars.ContextVar(
    "medimg_bench_input_checks", default=None)


@contextlib.contextmanager
def shared_input_checks() -> Iterator[None]:
    """A scope in which each check of one input object (the ids are all ``str``, the scores are
    finite) runs once for all the metrics updated with it, not once per metric. The engine opens
    one around the updates of a batch or block, whose inputs nothing changes in between; outside
    a scope every check runs every time."""
    token = _CHECKS.set({})
    try:
        yield
    finally:
        _CHECKS.reset(token)


def checked_once(name: str, obj: Any, check: Callable[[], bool]) -> bool:
    """``check()`` for ``obj`` — the result of the same check of the same object earlier in the
    current :func:`shared_input_checks` scope, if any (the object is held, so its id is not reused)."""
    memo = _CHECKS.get()
    if memo is None:
        return check()
    key = (name, id(obj))
    hit = memo.get(key)
    if hit is not None and hit[0] is obj:
        return hit[1]
    result = bool(check())
    memo[key] = (obj, result)
    return result


def _all_str(ids: list[Any]) -> bool:
    # at C speed, 4x faster than collecting the element types in a set
    return all(map(operator.is_, map(type, ids), itertools.repeat(str)))


_REDUCTIONS = ("cat", "sum", "mean", "max", "min")


def nan_reduce(values: torch.Tensor, reduction: str = "mean", dim: int | None = 0) -> torch.Tensor:
    """Reduce ``values`` ignoring NaN (``"mean"``, ``"median"``, ``"sum"``, ``"count"``).

    Returns NaN where every value along ``dim`` is NaN (``"count"`` returns 0 there).
    """
    if reduction == "mean":
        return values.nanmean(dim=dim) if dim is not None else values.nanmean()
    if reduction == "median":
        return values.nanmedian(dim=dim).values if dim is not None else values.nanmedian()
    if reduction == "sum":
        return values.nansum(dim=dim) if dim is not None else values.nansum()
    if reduction == "count":
        return (~values.isnan()).sum(dim=dim) if dim is not None else (~values.isnan()).sum()
    raise ValueError(f"unknown reduction {reduction!r}; expected mean, median, sum or count")


class Metric:
    """Base class: ``update`` per batch, ``compute`` at the end, ``reset`` to start again.

    Subclasses set ``name``, ``per_sample`` and ``higher_is_better``, declare states in
    ``__init__`` and implement :meth:`update` and :meth:`compute` (and :meth:`functional` for
    dataset-level metrics).
    """

    name: str = "metric"
    per_sample: bool = True
    #: the direction every registered metric declares in its own class (``tests/metrics/
    #: test_direction.py`` checks it): True, False (distances, error rates) or None (signed:
    #: closer to 0 is better, or a statistic with no direction)
    higher_is_better: bool | None = True
    #: directions of single columns of a combined metric (VQA's ``unparsed_rate``) or of the
    #: statistics a dataset-level metric returns as classes (agreement's ``mae``), where they
    #: differ from :attr:`higher_is_better`
    directions: Mapping[str, bool | None] = MappingProxyType({})
    #: the interval every value lies in (AUROC, Dice: (0, 1); distances (0, inf)); seed tables
    #: clip their intervals to it. ``value_ranges``: per column / statistic where it differs
    value_range: tuple[float, float] = (-math.inf, math.inf)
    value_ranges: Mapping[str, tuple[float, float]] = MappingProxyType({})
    #: what ``update`` takes: "scores", "label_maps", "images", "measurements", "detections",
    #: "phases" or "text" (strings); the bad-input suite builds its cases from it
    input_kind: str = "tensors"
    #: True when one ``update`` on several batches concatenated leaves the same states as one
    #: ``update`` per batch (states that are concatenations or sums of per-sample parts), so the
    #: engine may group updates (``engine/loop.py``). A subclass that defines its own ``update``
    #: gets False unless it sets the flag again itself.
    concat_updates: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "update" in vars(cls) and "concat_updates" not in vars(cls):
            cls.concat_updates = False

    def __init__(self, *, class_names: Sequence[str] | None = None) -> None:
        self._defaults: dict[str, Any] = {}
        self._reductions: dict[str, str] = {}
        self.class_names: list[str] | None = list(class_names) if class_names else None
        self._synced_backup: dict[str, Any] | None = None
        self.add_state("ids", [], dist_reduce_fx="cat")

    # -- states ---------------------------------------------------------------------------------
    def add_state(self, name: str, default: Any, *, dist_reduce_fx: str = "cat") -> None:
        """Declare a state; ``default`` is a list (``"cat"``) or a tensor (sum/mean/max/min)."""
        if dist_reduce_fx not in _REDUCTIONS:
            raise ValueError(f"dist_reduce_fx must be one of {_REDUCTIONS}, got {dist_reduce_fx!r}")
        if dist_reduce_fx == "cat" and not isinstance(default, list):
            raise ValueError(f"state {name!r}: a 'cat' state must default to an empty list")
        self._defaults[name] = default
        self._reductions[name] = dist_reduce_fx
        setattr(self, name, self._fresh(default))

    @staticmethod
    def _fresh(default: Any) -> Any:
        if isinstance(default, list):
            return []
        if isinstance(default, torch.Tensor):
            return default.detach().clone()
        return default

    @property
    def state_reductions(self) -> Mapping[str, str]:
        """``{state name: reduction}`` of every declared state (read-only), ``ids`` first."""
        return MappingProxyType(self._reductions)

    def state_dict(self) -> dict[str, Any]:
        """Every declared state, on the CPU, as new lists / tensors (``"cat"`` states as lists of
        their items): what a checkpoint or a shard keeps and :meth:`load_state` takes back."""
        return {k: _to_cpu(getattr(self, k)) for k in self._defaults}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Replace every state by ``state``'s (a :meth:`state_dict`); ``ValueError`` on a name
        the metric does not declare or a declared state missing."""
        unknown = sorted(set(state) - set(self._defaults))
        if unknown:
            raise ValueError(f"{self.name}: {unknown} are not states of this metric "
                             f"(its states: {sorted(self._defaults)})")
        missing = sorted(set(self._defaults) - set(state))
        if missing:
            raise ValueError(f"{self.name}: the saved state lacks {missing}")
        for k, v in state.items():
            setattr(self, k, list(v) if self._reductions[k] == "cat" else v)
        self._synced_backup = None

    def merge_state(self, other: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Merge the state of other metric(s) of the same settings into this one, as the
        processes of a distributed run are merged: ``"cat"`` states concatenated in order (this
        metric's first) with samples whose id was already seen dropped, the others reduced."""
        others = [other] if isinstance(other, Mapping) else list(other)
        merged = _merge_states([{k: getattr(self, k) for k in self._defaults}, *others], self._reductions)
        for k, v in merged.items():
            setattr(self, k, v)

    def reorder(self, order: Mapping[str, int] | Sequence[str]) -> None:
        """Sort the per-sample ``"cat"`` states into ``order`` (ids in order, or ``{id:
        position}``); ids ``order`` lacks go last, in their present order."""
        if not isinstance(order, Mapping):
            order = {sid: i for i, sid in enumerate(order)}
        ids = list(self.ids)
        perm = sorted(range(len(ids)), key=lambda i: order.get(ids[i], len(order)))
        if perm == list(range(len(ids))):
            return
        for name, reduction in self._reductions.items():
            value = getattr(self, name)
            if reduction == "cat" and value:
                setattr(self, name, _permuted(value, perm, name == "ids"))

    def reset(self) -> None:
        """Forget everything seen so far."""
        for name, default in self._defaults.items():
            setattr(self, name, self._fresh(default))
        self._synced_backup = None

    def _add_ids(self, ids: Sequence[str] | None, n: int) -> None:
        if ids is None:
            start = len(self.ids)
            ids = [f"sample_{start + i}" for i in range(n)]
        if len(ids) != n:
            raise ValueError(f"{self.name}: got {len(ids)} ids for a batch of {n}")
        # the engine's ids (a list of exact str): no copies; checked once per block for all metrics
        if type(ids) is list and checked_once("ids_str", ids, lambda: _all_str(ids)):
            self.ids.extend(ids)
        else:
            self.ids.extend(map(str, ids))

    # -- interface ------------------------------------------------------------------------------
    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute(self) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def values(self) -> tuple[list[str], torch.Tensor]:
        """Per-sample metrics: the ids and a ``(N, C)`` tensor of values (NaN = undefined)."""
        raise NotImplementedError(f"{type(self).__name__} has no per-sample values")

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Dataset-level metrics: the value per class for any set of kept predictions/targets."""
        raise NotImplementedError(f"{type(self).__name__} is not a dataset-level metric")

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Dataset-level metrics: the concatenated predictions and targets kept so far."""
        raise NotImplementedError(f"{type(self).__name__} is not a dataset-level metric")

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.update(*args, **kwargs)

    def higher_is_better_of(self, column: str) -> bool | None:
        """Direction of one column (combined metrics) or statistic (classes of a dataset-level
        metric): its entry in :attr:`directions`, else :attr:`higher_is_better`."""
        return self.directions.get(column, self.higher_is_better)

    def range_of(self, column: str) -> tuple[float, float]:
        """``(low, high)`` bounds of one column or statistic's values (infinite: unbounded)."""
        return self.value_ranges.get(column, self.value_range)

    # -- optional hooks: declared here with their defaults, so no caller probes for them --------
    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        """Per-sample values ``{column: (ids, (N, C) tensor)}``: one column, the metric's own
        name, unless the metric computes several (combined metrics override this)."""
        return {self.name: self.values()}

    def summary_notes(self) -> dict[str, Any]:
        """The metric's own top-level facts for ``summary.json`` (VQA: answers withheld); none by
        default."""
        return {}

    def key_files(self) -> dict[str, Any]:
        """``{option: local path}`` of the files whose content decides the numbers (a run's key
        holds their content, not their path); none by default."""
        return {}

    # -- distributed ----------------------------------------------------------------------------
    def sync(self, *, group: Any = None) -> None:
        """Merge states from all processes in place (no-op when not distributed).

        ``cat`` states are gathered with ``all_gather_object``, which accepts shards of different
        lengths; samples whose id was already seen (duplicates added by a padding sampler) are
        dropped, so 1 and N processes give identical numbers.
        """
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
            return
        self._synced_backup = {k: getattr(self, k) for k in self._defaults}
        world = dist.get_world_size(group)
        gathered: list[dict[str, Any]] = [None] * world  # type: ignore[list-item]
        dist.all_gather_object(gathered, self.state_dict(), group=group)
        self.load_state(gathered[0])
        self.merge_state(gathered[1:])

    def unsync(self) -> None:
        """Restore the local states saved by :meth:`sync`."""
        if self._synced_backup is not None:
            for k, v in self._synced_backup.items():
                setattr(self, k, v)
            self._synced_backup = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={len(self.ids)})"


def _to_cpu(value: Any) -> Any:
    """``value`` with every tensor (in lists too) detached on the CPU; lists are new lists."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, list):
        return [_to_cpu(v) for v in value]
    return value


def _permuted(value: list[Any], perm: list[int], is_ids: bool) -> list[Any]:
    """A ``"cat"`` state's items in the order ``perm`` of its samples: one item per sample, or
    per-batch tensors concatenated and indexed (one tensor); left as it is when not per-sample."""
    n = len(perm)
    if is_ids or (len(value) == n and not isinstance(value[0], torch.Tensor)):
        return [value[i] for i in perm]
    try:
        flat = torch.cat([v if v.ndim else v[None] for v in value])
    except (RuntimeError, TypeError, AttributeError):  # per-sample items of different shapes / kinds
        flat = None
    if flat is not None and flat.shape[0] == n:
        return [flat[torch.as_tensor(perm, dtype=torch.long, device=flat.device)]]
    if len(value) == n:
        return [value[i] for i in perm]
    return value


def _merge_states(states: list[dict[str, Any]], reductions: dict[str, str]) -> dict[str, Any]:
    """Merge per-rank state dicts; per-sample ``cat`` states are de-duplicated by sample id.

    Each ``cat`` state must hold one entry per id, in the same order, either as one list item per
    sample or as per-batch tensors whose first dimension sums to the number of ids.
    """
    ops: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "sum": lambda t: t.sum(0),
        "mean": lambda t: t.mean(0),
        "max": lambda t: t.max(0).values,
        "min": lambda t: t.min(0).values,
    }
    merged: dict[str, Any] = {}
    keep_rank_rows: list[list[int]] = []
    seen: set[str] = set()
    for st in states:
        rows = []
        for j, sid in enumerate(st["ids"]):
            if sid not in seen:
                seen.add(sid)
                rows.append(j)
        keep_rank_rows.append(rows)
    for name, red in reductions.items():
        if red == "cat":
            out: list[Any] = []
            for st, rows in zip(states, keep_rank_rows):
                value = st[name]
                n_ids = len(st["ids"])
                if value and isinstance(value[0], torch.Tensor) and len(value) != n_ids:
                    flat = torch.cat(value) if value else torch.empty(0)
                    if flat.shape[0] == n_ids:
                        out.append(flat[rows])
                        continue
                    out.append(flat)  # not per-sample: keep everything
                    continue
                if len(value) == n_ids:
                    out.extend(value[j] for j in rows)
                else:
                    out.extend(value)
            merged[name] = out
        else:
            merged[name] = ops[red](torch.stack([st[name] for st in states]))
    return merged
