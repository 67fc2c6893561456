"""CXReasonBench's figures (metrics/text/cxreasonbench.py) against ttumyche/CXReasonBench
72357fe's own ``evaluation/metric.py`` run on a generated corpus (fixture from
``tools/cxreasonbench_metric_fixtures.py``), and its Wilson interval against statsmodels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

from medimg_bench.metrics.text.cxreasonbench import (
    collapse_stages,
    gather_figures,
    guidance_figures,
    measurement_match,
    path1_figures,
    printed_scores,
    wilson_score,
)
from medimg_bench.tasks.cxreasonbench import GUIDANCE_HEADER, PATH1_HEADER

FIXTURE = Path(__file__).parent / "data" / "cxreasonbench_metric_72357fe.json"
# keys of the harness we do not produce: its run labels, the conquered-stage lists, a count it
# fills from the unrefined list (metric.py line 447), and the review (_r_) figures (not built)
_SKIP = ("model", "num_conquer_stage_refined", "num_conquer_stage_r", "num_conquer_stage_r_refined")


def _close(ours, theirs, where):
    if theirs is None:
        assert ours is None, where
    elif isinstance(theirs, str):
        assert ours == theirs, where
    else:
        assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12), where


def _ours(corpus):
    per_task = {}
    for task, rows in sorted(corpus["cases"].items()):
        if corpus["kind"] == "reasoning":
            cols = {k: [] for k in (*PATH1_HEADER, "match")}
            for r in rows:
                s = {k.removeprefix("stage-"): v for k, v in r["scoring"].items()}
                for k, v in collapse_stages(s, PATH1_HEADER).items():
                    cols[k].append(v)
                cols["match"].append("measured_value" in s and measurement_match(task, r["measurement_answer"], r["final_response"]))
            fig = path1_figures(cols, task=task, has_custom=corpus["custom"][task])
        else:
            cols = {k: [] for k in ("g_bodypart", "g_measurement", "g_final", "g_match")}
            for r in rows:
                s = {k.removeprefix("stage-"): v for k, v in r["scoring"].items()}
                for k, v in collapse_stages(s, GUIDANCE_HEADER).items():
                    cols["g_" + k.split("-", 1)[1]].append(v)
                cols["g_match"].append("measured_value_guidance" in s
                                       and measurement_match(task, r["measurement_answer"], r["final_response"]))
            fig = guidance_figures(cols, task=task)
        if fig:
            per_task[task] = fig
    return per_task


@pytest.mark.parametrize("index", range(20))
def test_figures_equal_the_harness(index):
    corpus = json.loads(FIXTURE.read_text())["corpora"][index]
    ours = _ours(corpus)
    theirs = corpus["per_task"]
    assert sorted(ours) == sorted(theirs)
    for task, fig in theirs.items():
        for key, value in fig.items():
            if key in _SKIP or key.startswith("conquer_stage_lst") or "_r_" in key or key.startswith(("r_", "num_idk_init_review", "ratio_idk_init_review")):
                continue
            assert key in ours[task], (task, key)
            _close(ours[task][key], value, (index, task, key))
    groups = gather_figures(ours) if ours else {}
    assert sorted(groups) == sorted(corpus["groups"])
    for group, fig in corpus["groups"].items():
        for key, value in fig.items():
            if key in ours.get(next(iter(ours)), {}) and key not in ("dx", "inference_type"):
                _close(groups[group][key], value, (index, group, key))
    printed = printed_scores(ours, step=None if corpus["kind"] == "reasoning" else "g")
    for key, value in corpus["printed"].items():
        _close(printed[key], value, (index, key))


def test_fixture_covers_the_branches():
    corpora = json.loads(FIXTURE.read_text())["corpora"]
    kinds = {c["kind"] for c in corpora}
    reasoning = [f for c in corpora if c["kind"] == "reasoning" for f in c["per_task"].values()]
    assert kinds == {"reasoning", "guidance"} and len(corpora) == 20
    assert any(f["flag_num_correct_custom_pass"] is not None for f in reasoning)  # custom criteria
    assert any(f["num_correct_measurement_matching"] for f in reasoning)  # values in range
    dropped = [c for c in corpora if c["kind"] == "reasoning" and len(c["per_task"]) < len(c["cases"])]
    assert dropped  # a task whose every initial answer was IDK is left out, as the harness does


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (3, 10), (7, 9), (50, 50), (1, 200), (123, 456)])
def test_wilson_interval_equals_statsmodels(k, n):
    alpha = 2 * norm.sf(1.96)  # the harness's z = 1.96 (statsmodels' default 0.05 gives z = 1.959964)
    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    w = wilson_score(k, n)
    assert w["lower_bound"] == pytest.approx(lo, abs=1e-12) and w["upper_bound"] == pytest.approx(hi, abs=1e-12)
    assert w["wilson_score"] == pytest.approx((lo + hi) / 2, abs=1e-12)
    assert w["adjusted_wilson"] == pytest.approx(w["wilson_score"] - 1.96 * (hi - lo) / 2, abs=1e-12)
    assert (w["bayesian"], w["naive_score"]) == ((k + 1) / (n + 2), k / n)
    lo5, hi5 = proportion_confint(k, n, alpha=0.05, method="wilson")
    if 0 < k < n:
        assert abs(lo5 - lo) > 1e-9  # the z differs, and shows


def test_wilson_without_trials_is_none():
    assert set(wilson_score(0, 0).values()) == {None}
    assert set(wilson_score(-2, 3).values()) == {None}  # the harness's sqrt fails here


def test_measurement_match_rules():
    assert measurement_match("cardiomegaly", "(b) 0.5 - 0.6", "VALUE: 0.55")
    assert not measurement_match("cardiomegaly", "(b) 0.5 - 0.6", "between 0.5-0.6, VALUE: 0.65")
    assert not measurement_match("cardiomegaly", "(b) 0.5 - 0.6", "0.55 or 0.58")  # two values
    assert measurement_match("cardiomegaly", "(b) 0.5 - 0.6", "0.55, so 0.55")  # one distinct value
    assert measurement_match("projection", "Right: [0.1, 0.3], Left: [0.5, 0.7]", "Right - 0.2, Left - 0.6")
    assert not measurement_match("projection", "Right: [0.1, 0.3], Left: [0.5, 0.7]", "Right - 0.2")
    assert np.isclose(wilson_score(1, 2)["naive_score"], 0.5)
