"""metrics/base.py: the input checks metrics share inside one engine block; the optional hooks
declared on ``Metric``."""

from __future__ import annotations

import pytest
import torch

from medimg_bench.metrics import base, classification
from medimg_bench.metrics.base import Metric, checked_once, shared_input_checks
from medimg_bench.registry import METRICS

NAMES = ("auroc", "auprc", "sensitivity", "specificity", "ece")


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"finite": 0, "ids": 0}
    real_finite, real_ids = classification._all_finite, base._all_str

    def finite(t):
        calls["finite"] += 1
        return real_finite(t)

    def ids(v):
        calls["ids"] += 1
        return real_ids(v)

    monkeypatch.setattr(classification, "_all_finite", finite)
    monkeypatch.setattr(base, "_all_str", ids)
    return calls


def _inputs(n: int = 12, k: int = 3) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(n, k, generator=g), (torch.rand(n, k, generator=g) > 0.5).float(), [f"s{i}" for i in range(n)]


def test_checks_run_once_per_object_in_a_scope(monkeypatch):
    calls = _count_checks(monkeypatch)
    p, t, ids = _inputs()
    metrics = [METRICS.create(n) for n in NAMES]
    with shared_input_checks():
        for m in metrics:
            m.update(p, t, ids=ids)
    assert calls == {"finite": 1, "ids": 1}
    for m in metrics:  # outside a scope every metric checks again
        m.update(p, t, ids=ids)
    assert calls == {"finite": 1 + len(NAMES), "ids": 1 + len(NAMES)}


def test_a_scope_changes_no_value():
    p, t, ids = _inputs(40, 4)
    plain = [METRICS.create(n) for n in NAMES]
    shared = [METRICS.create(n) for n in NAMES]
    for m in plain:
        m.update(p, t, ids=ids)
    with shared_input_checks():
        for m in shared:
            m.update(p, t, ids=ids)
    for a, b in zip(plain, shared):
        assert a.ids == b.ids
        torch.testing.assert_close(a.compute(), b.compute(), equal_nan=True, rtol=0, atol=0)


def test_nan_scores_are_refused_by_every_metric_in_a_scope():
    p, t, ids = _inputs()
    p[3, 1] = float("nan")
    with shared_input_checks():
        for name in NAMES:
            with pytest.raises(ValueError, match=r"NaN or inf scores for sample\(s\) \['s3'\]"):
                METRICS.create(name).update(p, t, ids=ids)


def test_other_objects_and_other_scopes_are_checked_again():
    seen = []

    def check(value):
        seen.append(value)
        return value

    a, b = ["x"], ["x"]
    with shared_input_checks():
        assert checked_once("c", a, lambda: check(True))
        assert checked_once("c", a, lambda: check(False))  # memo: same object, same check
        assert not checked_once("c", b, lambda: check(False))  # an equal but other object
        assert not checked_once("other", a, lambda: check(False))  # another check
    with shared_input_checks():
        assert not checked_once("c", a, lambda: check(False))  # a new scope forgets
    assert seen == [True, False, False, False]


def test_ids_that_are_not_str_are_still_copied_as_str():
    p, t, _ = _inputs(4)
    ids = ["a", 2, "c", 4]
    m1, m2 = METRICS.create("auroc"), METRICS.create("auprc")
    with shared_input_checks():
        m1.update(p, t, ids=ids)
        m2.update(p, t, ids=ids)
    assert m1.ids == m2.ids == ["a", "2", "c", "4"]
    assert all(type(i) is str for i in m1.ids + m2.ids)


def test_optional_metric_hooks_are_declared_and_the_engine_does_not_probe_them():
    """Issue 35 item 5: every optional hook is declared on ``Metric`` with its default, so the
    engine calls it instead of ``getattr(metric, "hook", None)``."""
    import ast
    from pathlib import Path

    import medimg_bench.engine as engine

    m = _HookFree()
    assert m.summary_notes() == {} and m.key_files() == {}
    assert set(m.metric_values()) == {"hook_free"}
    hooks = {a for a, v in vars(Metric).items() if callable(v) and not a.startswith("_")}
    found = []
    for path in sorted(Path(engine.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in hooks
                    and "metric" in ast.unparse(node.args[0])):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "hooks probed instead of called:\n" + "\n".join(found)


class _HookFree(Metric):
    name = "hook_free"

    def update(self, preds, targets, meta=None, *, ids=None) -> None:  # pragma: no cover - not called
        raise AssertionError

    def values(self):
        return [], torch.zeros(0, 1)
