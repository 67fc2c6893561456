"""The bootstrap equals the code before the sufficient-statistics rewrite (commit 496e5e6) to
1e-12 with the same seeds: fixtures from ``tools/bootstrap_reference.py`` on the seeded corpus
of ``bootstrap_corpus.py`` (ties, constant / single-positive / unannotated labels, single-class
and empty resamples, uneven patient clusters, every average, BCa, multi-class / multi-label /
binary)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.engine.summary import summarize
from medimg_bench.metrics.stats import bootstrap_ci
from medimg_bench.registry import create_metric
from tests.metrics import bootstrap_corpus as corpus

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(DATA / "bootstrap_reference.npz") as f:
        return {k: f[k] for k in f.files}


def test_corpus_covers_the_hard_cases(reference):
    kinds = {corpus.case(i)["kind"] for i in range(corpus.N_CASES)}
    assert kinds == {"binary", "multilabel", "multiclass"}
    methods = {corpus.case(i)["method"] for i in range(corpus.N_CASES)}
    assert methods == {"percentile", "bca"}
    partial = sum(bool((reference[f"{i}/n_valid"] < corpus.case(i)["n_resamples"]).any())
                  for i in range(corpus.N_CASES))
    undefined = sum(bool(np.isnan(reference[f"{i}/low"]).any()) for i in range(corpus.N_CASES))
    assert partial >= 20 and undefined >= 10  # resamples where a label is undefined, NaN bounds


@pytest.mark.parametrize("i", range(corpus.N_CASES))
def test_bootstrap_ci_equals_reference(i, reference):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = corpus.run_case(i, bootstrap_ci, create_metric)
    c = corpus.case(i)
    for key, value in got.items():
        want = reference[f"{i}/{key}"]
        assert value.shape == want.shape, (c["name"], c["options"], key)
        np.testing.assert_allclose(value, want, rtol=0, atol=1e-12, equal_nan=True,
                                   err_msg=f"case {i}: {c['name']} {c['options']} {c['kind']} {key}")


def test_summary_equals_reference():
    want = json.loads((DATA / "bootstrap_reference_summary.json").read_text())
    want.pop("commit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = json.loads(json.dumps(corpus.run_summary(summarize, create_metric)))
    assert _numbers(got) == _numbers(want)


def _numbers(node):
    """The summary without the keys added after the fixture was recorded (each metric's value
    ``range``; ``value`` beside ``mean`` for per-sample entries, the same number): the numbers
    the bootstrap computes are compared, all of them."""
    if isinstance(node, dict):
        out = {k: _numbers(v) for k, v in node.items() if k != "range"}
        if "mean" in out and "value" in out and out["mean"] == out["value"]:
            out.pop("value")
        return out
    if isinstance(node, list):
        return [_numbers(v) for v in node]
    return node
