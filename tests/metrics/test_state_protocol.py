"""The public state protocol of every registered metric (``state_dict`` / ``load_state`` /
``merge_state`` / ``reorder``), what checkpoints, ``merge`` and the distributed gather use:

* a state saved and loaded into a new metric gives the same ``compute()``;
* two halves of the samples scored by two metrics and merged give what one pass over all gives;
* per-sample metrics: samples scored in another order and reordered give the values and
  ``compute()`` of the samples scored in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from medimg_bench.registry import METRICS, create_metric
from tests.robustness.test_metric_bad_input import KINDS

TEXT = Path(__file__).parent / "text" / "data"


def _vqa() -> tuple[dict[str, Any], list[Any], list[Any]]:
    from medimg_bench.metrics.text.vqa import score_vqa_answer

    qa = [("yes", "yes", "closed"), ("no", "yes", "closed"), ("left lung", "left lung", "open"),
          ("a mass", "effusion", "open"), ("B", "B", "mcq")]
    preds = [score_vqa_answer(r, answer=a, answer_type=t, options=["x", "y"] if t == "mcq" else None)
             for r, a, t in qa]
    return {}, preds, [t for _, _, t in qa]


def _moaks() -> tuple[dict[str, Any], list[Any], list[Any]]:
    from medimg_bench.metrics.text.moaks import score_answer

    ref = {"bbox": [0, 10, 0, 10, 0, 10], "a": {"presence": 1, "size": 2}}
    replies = [json.dumps(ref), "not json", json.dumps({"bbox": [0, 10, 0, 10, 0, 20], "a": {"presence": 0}}),
               json.dumps({"a": {"presence": 1, "size": 1}})]
    scored = [score_answer(r, ref) for r in replies]
    return {}, scored, [s["n_items"] for s in scored]


def _cxreasonbench() -> tuple[dict[str, Any], list[Any], list[Any]]:
    from medimg_bench.metrics.text.cxreasonbench import ALL_TASKS, CASE_COLUMNS

    g = np.random.default_rng(0)
    cases = [{c: float(g.integers(-1, 2)) for c in CASE_COLUMNS[1:]} for _ in range(5)]
    return {}, cases, [ALL_TASKS[i] for i in range(5)]


def _green() -> tuple[dict[str, Any], list[Any], list[Any]]:
    cases = json.loads((TEXT / "green_reference.json").read_text())["cases"][:5]
    return {"replies": True}, [c["raw"] for c in cases], [""] * len(cases)


def _radgraph() -> tuple[dict[str, Any], list[Any], list[Any]]:
    def annotator(texts: list[str]) -> list[dict]:
        return [{"entities": {str(i): {"tokens": w, "label": "OBS-DP", "relations": []}
                              for i, w in enumerate(t.split(), 1)}} for t in texts]

    hyps = ["effusion", "clear lung", "", "small effusion", "edema"]
    refs = ["effusion", "effusion", "clear", "effusion small", "no edema"]
    return {"annotator": annotator}, hyps, refs


def _ratescore() -> tuple[dict[str, Any], list[Any], list[Any]]:
    vocab: dict[str, int] = {}

    def ner(texts: list[str]) -> list[list[tuple[str, str]]]:
        return [[(w, "ANATOMY" if w == "lung" else "ABNORMALITY") for w in t.split(",") if w] for t in texts]

    def encode(words: list[str]) -> torch.Tensor:
        return torch.stack([torch.nn.functional.one_hot(torch.tensor(vocab.setdefault(w, len(vocab)) % 8), 8).float()
                            for w in words])

    hyps = ["effusion,lung", "", "effusion", "lung", "edema,lung"]
    refs = ["effusion,lung", "lung", "edema", "lung", "edema"]
    return {"ner": ner, "encode": encode}, hyps, refs


_REPORTS = (["no acute findings .", "small left effusion .", "heart size normal .", "mild edema .",
             "right pneumothorax ."],
            ["no acute disease .", "left pleural effusion .", "normal heart size .", "pulmonary edema .",
             "no pneumothorax ."])

TEXT_INPUTS: dict[str, Callable[[], tuple[dict[str, Any], list[Any], list[Any]]]] = {
    "vqa": _vqa,
    "moaks": _moaks,
    "cxreasonbench_reasoning": _cxreasonbench,
    "green": _green,
    "radgraph_f1": _radgraph,
    "ratescore": _ratescore,
    "report_nlg": lambda: ({"tokenizer": "simple"}, *_REPORTS),
    "chexpert_f1": lambda: ({}, *_REPORTS),
}


def _phase_frames() -> tuple[dict[str, Any], Any, Any, list[dict[str, Any]]]:
    """Frames of two videos, with the meta that places each frame in its video."""
    g = torch.Generator().manual_seed(0)
    targets = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 1, 3, 3, 4])
    meta = [{"video_id": v, "frame_index": j, "timestamp": float(j)}
            for v, n in (("v1", 6), ("v2", 6)) for j in range(n)]
    return {"num_classes": 7}, torch.rand(12, 7, generator=g, dtype=torch.float64), targets, meta


def _inputs(name: str) -> tuple[dict[str, Any], Any, Any, list[dict[str, Any]] | None]:
    """``(options, preds, targets, meta)`` of a few valid samples for metric ``name``."""
    if name in TEXT_INPUTS:
        return *TEXT_INPUTS[name](), None
    if METRICS.get(name).input_kind == "phase_frames":
        return _phase_frames()
    kind = KINDS[METRICS.get(name).input_kind]
    return dict(kind.options), *kind.valid(), None


def _take(x: Any, idx: list[int]) -> Any:
    if isinstance(x, torch.Tensor):
        return x[torch.as_tensor(idx, dtype=torch.long)]
    return [x[i] for i in idx]


def _n(x: Any) -> int:
    return int(x.shape[0]) if isinstance(x, torch.Tensor) else len(x)


def _scored(name: str, idx: list[int]) -> Any:
    """A new metric updated with samples ``idx`` (ids ``s<i>``), one update per sample."""
    options, preds, targets, meta = _inputs(name)
    metric = create_metric(name, **options)
    for i in idx:
        metric.update(_take(preds, [i]), _take(targets, [i]), None if meta is None else [meta[i]], ids=[f"s{i}"])
    return metric


def _assert_same(a: Any, b: Any) -> None:
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-12, atol=1e-12)
    else:
        assert a == b


def _n_samples(name: str) -> int:
    return _n(_inputs(name)[1])


@pytest.fixture(params=METRICS.list())
def name(request: pytest.FixtureRequest) -> str:
    if request.param not in TEXT_INPUTS and METRICS.get(request.param).input_kind not in KINDS:
        pytest.fail(f"{request.param}: no inputs for input_kind {METRICS.get(request.param).input_kind!r}")
    return request.param


def test_state_dict_round_trip_gives_the_same_compute(name: str) -> None:
    n = _n_samples(name)
    metric = _scored(name, list(range(n)))
    state = metric.state_dict()
    assert set(state) == set(metric.state_reductions)
    back = create_metric(name, **_inputs(name)[0])
    back.load_state(state)
    _assert_same(back.compute(), metric.compute())
    assert back.ids == metric.ids
    with pytest.raises(ValueError, match="not states"):
        back.load_state({**state, "no_such_state": []})


def test_merge_of_two_halves_equals_one_pass(name: str) -> None:
    n = _n_samples(name)
    half = max(1, n // 2)
    first, second = _scored(name, list(range(half))), _scored(name, list(range(half, n)))
    # a sample both shards hold (a padding sampler's duplicate) is counted once
    second_dup = _scored(name, [0, *range(half, n)])
    whole = _scored(name, list(range(n)))
    first.merge_state(second_dup.state_dict())
    assert first.ids == whole.ids
    _assert_same(first.compute(), whole.compute())
    other = _scored(name, list(range(half)))
    other.merge_state([second.state_dict()])
    _assert_same(other.compute(), whole.compute())


def test_reorder_equals_scoring_in_that_order(name: str) -> None:
    if not METRICS.get(name).per_sample:
        pytest.skip(f"{name}: a dataset-level metric (no per-sample order)")
    n = _n_samples(name)
    order = list(range(n))
    shuffled = order[1:] + order[:1] if n > 1 else order
    shuffled = shuffled[::-1]
    metric = _scored(name, shuffled)
    metric.reorder([f"s{i}" for i in order])
    ref = _scored(name, order)
    assert metric.ids == ref.ids
    _assert_same(metric.values(), ref.values())
    _assert_same(metric.compute(), ref.compute())
