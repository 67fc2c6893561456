"""Every registered metric rejects NaN / inf / empty / mismatched input with a clear ValueError.

The suite is parametrised over the METRICS registry: a metric declares which input it takes with
its ``input_kind`` class attribute, and each kind has a valid batch and the bad variants built
from it. A new metric with a new ``input_kind`` fails here until its kind gets cases; text
metrics (``input_kind = "text"``) take strings and are skipped. The test prints how many cases it
tried and how many passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

from medimg_bench.registry import METRICS, create_metric


def _scores() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(0)
    pred = torch.rand(8, 3, generator=g, dtype=torch.float64)
    target = torch.tensor([[0, 1, 0], [1, 0, 1]] * 4, dtype=torch.float64)
    return pred, target


def _label_maps() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 3, (2, 12, 12), generator=g), torch.randint(0, 3, (2, 12, 12), generator=g)


def _images() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(0)
    t = torch.rand(2, 1, 16, 16, generator=g, dtype=torch.float64)
    return t + 0.05 * torch.rand(2, 1, 16, 16, generator=g, dtype=torch.float64), t


def _measurements() -> tuple[Any, Any]:
    t = torch.linspace(10, 30, 8, dtype=torch.float64)
    return t + torch.tensor([0.5, -0.3, 0.2, 0.1, -0.4, 0.3, 0.0, 0.2], dtype=torch.float64), t


def _detections() -> tuple[Any, Any]:
    # per scan: candidates (x, y, z, score) and findings (x, y, z, diameter)
    cands = [np.array([[10.0, 10, 10, 0.9], [40, 40, 40, 0.3]]), np.array([[5.0, 5, 5, 0.8]])]
    finds = [np.array([[10.0, 10, 10, 6.0]]), np.array([[20.0, 20, 20, 6.0]])]
    return cands, finds


def _phases() -> tuple[Any, Any]:
    return [np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 1, 2])], [np.array([0, 0, 1, 2, 2, 2]), np.array([0, 1, 2, 2])]


def _phase_frames() -> tuple[Any, Any]:
    # frames of one video (no meta: the order given), 7 phases as Cholec80's
    g = torch.Generator().manual_seed(0)
    return torch.rand(8, 7, generator=g, dtype=torch.float64), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def _prob_maps() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(2, 12, 12, generator=g, dtype=torch.float64), torch.randint(0, 2, (2, 12, 12), generator=g)


def _boxes() -> tuple[Any, Any]:
    # 3D boxes (x1, y1, z1, x2, y2, z2): predicted and reference, one per question
    t = torch.tensor([[0, 0, 0, 4, 4, 4], [2, 2, 2, 6, 8, 5], [1, 0, 3, 2, 9, 4]], dtype=torch.float64)
    return t + 0.5, t


def _poison(x: Any, value: float) -> Any:
    """A copy of ``x`` (tensor, or list of arrays) as float with one entry set to ``value``."""
    if isinstance(x, list):
        out = [np.asarray(a, dtype=np.float64).copy() for a in x]
        out[0].reshape(-1)[-1] = value
        return out
    out = torch.as_tensor(x).to(torch.float64).clone()
    out.reshape(-1)[-1] = value
    return out


def _empty(x: Any) -> Any:
    return [] if isinstance(x, list) else torch.as_tensor(x)[:0]


def _shorter(x: Any) -> Any:
    return x[:-1] if isinstance(x, list) else torch.as_tensor(x)[:-1]


def _narrower(x: Any) -> Any:
    """One less entry along the last axis (per item for lists)."""
    if isinstance(x, list):
        return [np.asarray(a)[..., :-1] if np.asarray(a).ndim == 1 else np.asarray(a)[:, :-1] for a in x]
    return torch.as_tensor(x)[..., :-1]


@dataclass
class Kind:
    valid: Callable[[], tuple[Any, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    # cases that are not bad input for this kind, with the reason
    legal: dict[str, str] = field(default_factory=dict)


KINDS: dict[str, Kind] = {
    "scores": Kind(_scores, legal={"nan_target": "NaN target = unlabelled (documented)"}),
    "label_maps": Kind(_label_maps, options={"num_classes": 3}),
    "images": Kind(_images),
    "measurements": Kind(_measurements),
    "detections": Kind(_detections),
    "phases": Kind(_phases, options={"num_classes": 3}),
    "prob_maps": Kind(_prob_maps),
    "phase_frames": Kind(_phase_frames, options={"num_classes": 7}),
    "boxes": Kind(_boxes),
}

# case → (how the batch is broken, what the error message must mention)
CASES: dict[str, tuple[Callable[[Any, Any], tuple[Any, Any]], str]] = {
    "nan_pred": (lambda p, t: (_poison(p, float("nan")), t), r"nan"),
    "inf_pred": (lambda p, t: (_poison(p, float("inf")), t), r"inf"),
    "nan_target": (lambda p, t: (p, _poison(t, float("nan"))), r"nan"),
    "inf_target": (lambda p, t: (p, _poison(t, float("inf"))), r"inf|not a class|integer|label"),
    "empty": (lambda p, t: (_empty(p), _empty(t)), r"empty|no |0 "),
    "length_mismatch": (lambda p, t: (_shorter(p), t), r"differ|length|shape|match"),
    "shape_mismatch": (lambda p, t: (_narrower(p), t), r"differ|shape|match|coordinates|length|expected"),
}


def _is_text(cls: type) -> bool:
    return getattr(cls, "input_kind", None) == "text" or cls.__module__.startswith("medimg_bench.metrics.text")


def _run_case(name: str, case: str) -> str | None:
    """None when the metric raised a clear ValueError, else what went wrong."""
    cls = METRICS.get(name)
    kind = KINDS[cls.input_kind]
    metric = create_metric(name, **kind.options)
    if case == "compute_before_update":
        call: Callable[[], Any] = metric.compute
        pattern = r"no |before|empty"
    else:
        breaker, pattern = CASES[case]
        pred, target = breaker(*kind.valid())

        def call() -> Any:
            metric.update(pred, target, ids=None)
            return metric.compute()

    try:
        out = call()
    except ValueError as err:
        if not re.search(pattern, str(err), re.IGNORECASE):
            return f"{name}/{case}: ValueError without a clear reason: {err}"
        return None
    except Exception as err:  # noqa: BLE001 - the point is to report the wrong exception type
        return f"{name}/{case}: {type(err).__name__} instead of ValueError: {err}"
    return f"{name}/{case}: no error, returned {out!r}"


def _cases() -> list[tuple[str, str]]:
    out = []
    for name in METRICS.list():
        cls = METRICS.get(name)
        if _is_text(cls):
            continue
        for case in [*CASES, "compute_before_update"]:
            out.append((name, case))
    return out


def test_every_kind_is_covered():
    """A registered metric must declare an input kind this suite has cases for (or "text")."""
    missing = {n: getattr(METRICS.get(n), "input_kind", None) for n in METRICS.list()
               if not _is_text(METRICS.get(n)) and getattr(METRICS.get(n), "input_kind", None) not in KINDS}
    assert not missing, f"metrics without bad-input cases for their input_kind: {missing}"


def test_every_registered_metric_rejects_bad_input(capsys):
    tried, failures, legal = 0, [], 0
    for name, case in _cases():
        kind = KINDS.get(getattr(METRICS.get(name), "input_kind", None))
        if kind is None:
            continue  # reported by test_every_kind_is_covered
        if case in kind.legal:
            legal += 1
            continue
        tried += 1
        problem = _run_case(name, case)
        if problem:
            failures.append(problem)
    n_metrics = len({n for n, _ in _cases()})
    skipped = len(METRICS.list()) - n_metrics
    with capsys.disabled():
        print(f"\nmetric bad-input suite: {n_metrics} metrics, {tried} cases tried, "
              f"{tried - len(failures)} passed, {legal} not bad input for their kind, "
              f"{skipped} text metric(s) skipped")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", list(CASES))
def test_functional_classification_rejects_bad_input(case):
    """The functional forms behind the dataset-level metrics raise too (not only ``update``)."""
    from medimg_bench.metrics.calibration import expected_calibration_error
    from medimg_bench.metrics.classification import auroc, sensitivity

    if case in KINDS["scores"].legal:
        pytest.skip(KINDS["scores"].legal[case])
    breaker, pattern = CASES[case]
    pred, target = breaker(*_scores())
    for fn in (auroc, sensitivity, expected_calibration_error):
        with pytest.raises(ValueError, match=re.compile(pattern, re.IGNORECASE)):
            fn(pred, target)
