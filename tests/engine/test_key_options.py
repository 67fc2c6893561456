"""Every option a registered metric or task is built with is in a run's checkpoint key, or is
declared neutral with its reason: a run resumed with another option must be refused, never mixed
(radgraph_f1's ``model`` and RaTEScore's ``ner`` once were not)."""

from __future__ import annotations

import inspect
import json

import pytest

from medimg_bench._hashing import callable_identity
from medimg_bench.engine.plan import key_files, metric_settings
from medimg_bench.identity import neutral_params
from medimg_bench.registry import METRICS, TASKS


class _Judge:
    name = "judge"

    def fingerprint(self) -> dict:
        return {"name": "judge"}

    def generate(self, requests):  # pragma: no cover - never called
        raise AssertionError


def _build(registry, name: str):
    for options in ({}, {"num_classes": 3}, {"generate": lambda prompts: prompts}, {"judge": _Judge()}):
        try:
            return registry.create(name, **options)
        except (TypeError, ValueError):
            continue
    pytest.skip(f"{name}: no default construction")


def _entries():
    yield from ((METRICS, name, name) for name in sorted(METRICS.list()))
    yield from ((TASKS, name, f"{name}:task" if name in METRICS.list() else name) for name in sorted(TASKS.list()))


@pytest.mark.parametrize(("registry", "name", "label"), list(_entries()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_constructor_option_is_in_the_key(registry, name, label):
    """Every parameter of the constructor is in the checkpoint key (by value, or a declared file
    by content) or declared neutral with its reason (``medimg_bench/identity.py``)."""
    obj = _build(registry, name)
    params = [p.name for p in inspect.signature(type(obj).__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    keyed = set(metric_settings(obj)["params"]) | set(neutral_params(obj))
    missing = [p for p in params if p not in keyed]
    assert not missing, f"{label}: options not in the checkpoint key: {missing}"
    for option in key_files(obj):  # a declared file by content, never by its path
        head = option.replace("/", ".").split(".")[0]
        assert "<content: files>" in json.dumps(metric_settings(obj)["params"].get(head)), (label, option)


def _differs(name: str, base: dict, **changed) -> bool:
    return metric_settings(METRICS.create(name, **base)) != metric_settings(METRICS.create(name, **{**base, **changed}))


def _upper(texts):
    return [t.upper() for t in texts]


def _lower(texts):
    return [t.lower() for t in texts]


def test_models_and_callables_that_score_text_are_in_the_key():
    assert _differs("radgraph_f1", {}, model="radgraph-xl")
    assert _differs("radgraph_f1", {}, annotator=_upper)
    assert _differs("ratescore", {"ner": _upper}, ner=_lower)
    assert _differs("ratescore", {"ner": _upper, "encode": _upper}, encode=_lower)
    assert _differs("green", {"generate": _upper}, generate=_lower)
    # the same code, another model behind it: the identity the callable carries
    a, b = (lambda p: p), (lambda p: p)
    a.identity, b.identity = {"model": "green-a"}, {"model": "green-b"}  # type: ignore[attr-defined]
    assert metric_settings(METRICS.create("green", generate=a)) != metric_settings(METRICS.create("green", generate=b))
    # stable: the same options give the same key in every process (no memory addresses)
    assert metric_settings(METRICS.create("ratescore", ner=_upper)) == metric_settings(METRICS.create("ratescore", ner=_upper))
    assert " at 0x" not in json.dumps(metric_settings(METRICS.create("radgraph_f1", annotator=lambda t: t)))


def test_the_key_of_a_loaded_model_is_what_was_given():
    """RaTEScore loads its models on the first update: the key (computed at the first save) must
    not change when ``ner`` goes from None to the loaded model."""
    metric = METRICS.create("ratescore", ner_model="/nonexistent/ner", encode=_upper)
    before = metric_settings(metric)
    metric._ner = _lower  # what loading ner_model does
    assert metric_settings(metric) == before


def test_callable_identity_parts():
    def scaled(factor):
        def score(texts):
            return [len(t) * factor for t in texts]
        return score

    class Adapter:
        def fingerprint(self):
            return {"weights": "sha256:abc"}

        def generate(self, prompts):
            return prompts

    assert callable_identity(None) is None
    assert callable_identity(scaled(2))["closure"] == {"factor": 2}
    assert callable_identity(scaled(2)) != callable_identity(scaled(3))
    assert callable_identity(Adapter().generate)["identity"] == {"weights": "sha256:abc"}
    assert callable_identity(_upper)["source_sha256"] != callable_identity(_lower)["source_sha256"]


def test_generation_settings_captured_by_a_generate_closure_are_in_its_identity():
    """``text_model_generate`` captures the judge's generation settings (a dataclass): another
    ``max_new_tokens`` is another key."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Settings:
        max_new_tokens: int
        temperature: float = 0.0

    def make(settings):
        def generate(prompts):
            return [p[: settings.max_new_tokens] for p in prompts]
        return generate

    assert callable_identity(make(Settings(16)))["closure"] == {"settings": {"max_new_tokens": 16, "temperature": 0.0}}
    assert callable_identity(make(Settings(16))) != callable_identity(make(Settings(32)))
