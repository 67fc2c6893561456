"""The task contract: every hook the engine calls is declared on ``Task`` (no probing of a task
for optional methods), and ``Task.score`` scores each sample once for the metrics and the
records together."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
from pathlib import Path

import pytest

import medimg_bench as mb
from medimg_bench.models.vlm.base import GenerationResponse
from medimg_bench.registry import TASKS, create_task
from medimg_bench.tasks.base import Task, TaskScores
from tests.tasks.test_vqa import Scripted, _vqa_rad

PACKAGE = Path(mb.__file__).parent


def _task_class(name: str) -> type:
    obj = TASKS.get(name)
    return obj if isinstance(obj, type) else obj.fn


@pytest.mark.parametrize("name", TASKS.list())
def test_every_public_hook_is_declared_on_the_base_class(name: str) -> None:
    cls = _task_class(name)
    assert issubclass(cls, Task)
    undeclared = sorted({attr for klass in inspect.getmro(cls) if klass not in (Task, object)
                         for attr in vars(klass) if not attr.startswith("_") and not hasattr(Task, attr)})
    assert not undeclared, f"task {name!r} defines {undeclared}, which Task does not declare"
    for attr in ("score", "predict", "metric_inputs", "sample_records", "plots", "write_outputs",
                 "manifest_notes", "key_files", "bind_dataset"):
        assert callable(getattr(cls, attr)), attr


def test_no_module_probes_a_task_for_a_hook() -> None:
    """``getattr(task, "...")`` / ``hasattr(task, ...)`` nowhere in the package: hooks are
    declared on Task with their defaults."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and node.args):
                continue
            target = ast.unparse(node.args[0])
            if target == "task" or target.endswith(".task") or target.startswith("task."):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "task hooks probed instead of declared on Task:\n" + "\n".join(found)


def test_default_score_is_metric_inputs_and_records() -> None:
    import torch

    task = create_task("classification")
    batch = {"id": ["a", "b"], "label": torch.tensor([[1.0, 0.0], [0.0, 1.0]])}
    outputs = {"probs": torch.tensor([[0.9, 0.2], [0.3, 0.6]])}
    got = task.score(batch, outputs, classes=["x", "y"])
    assert isinstance(got, TaskScores)
    preds, targets = task.metric_inputs(batch, outputs)
    assert torch.equal(got.preds, preds) and torch.equal(got.targets, targets)
    assert len(got.records) == len(task.sample_records(batch, outputs, ["x", "y"]))


def _counting(monkeypatch: pytest.MonkeyPatch, profile: str = "medimg_bench") -> list[str]:
    from medimg_bench.metrics.text import vqa_profiles

    calls: list[str] = []
    original = vqa_profiles.PROFILES[profile]

    def score(text, **kw):
        calls.append(text)
        return original.score(text, **kw)

    monkeypatch.setitem(vqa_profiles.PROFILES, profile, dataclasses.replace(original, score=score))
    return calls


def test_vqa_scores_each_answer_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    ds = mb.create_dataset("vqa_rad", root=_vqa_rad(tmp_path / "rad"))
    answers = {"1": "Yes, there is.", "2": "The left lung", "3": "There is not a nodule", "4": "1"}
    res = mb.evaluate(Scripted(answers), ds, task="vqa", batch_size=3, progress=False, n_resamples=20)
    assert sorted(calls) == sorted(answers.values())  # once per sample, for metrics and records
    assert res.summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(0.75)
    rows = res.samples.drop_duplicates("id").set_index("id")
    assert rows.loc["3", "unparsed"] == 1.0 and rows.loc["1", "correct"] == 1.0


def test_vqa_circular_scores_each_rotation_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    task = create_task("vqa", circular=True)
    batch = {"id": ["q"], "question": ["Which?"], "answer": ["B"], "answer_type": ["mcq"],
             "options": [["x", "y", "z"]]}
    # the right option is "y": B, then A and C as the options rotate
    rotations = [(0, GenerationResponse(text="B")), (1, GenerationResponse(text="A")),
                 (2, GenerationResponse(text="C"))]
    got = task.score(batch, {"responses": [rotations]})
    assert calls == ["B", "A", "C"]
    assert got.preds[0]["circular_correct"] == 1.0 and got.records[0]["circular_correct"] == 1.0


def test_moaks_grades_each_reply_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from medimg_bench.metrics.text import moaks

    calls: list[str] = []
    original = moaks.score_answer

    def score_answer(text, reference, **kw):
        calls.append(text)
        return original(text, reference, **kw)

    monkeypatch.setattr(moaks, "score_answer", score_answer)
    task = create_task("moaks_vqa")
    ref = {"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 1}}}
    replies = [json.dumps(ref), "no JSON here"]
    batch = {"id": ["a", "b"], "question": ["Grade the patella.", "Grade it."], "answer": [json.dumps(ref)] * 2,
             "meta": [{}, {}]}
    got = task.score(batch, {"responses": [GenerationResponse(text=t) for t in replies]})
    assert calls == replies
    assert [r["response"] for r in got.records] == replies
    assert got.targets == [s["n_items"] for s in got.preds] and got.preds[1]["parse_error"]
