"""Subgroup metrics: hand-derived gaps and equity-scaled scores, scikit-learn per group, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from medimg_bench.metrics.fairness import (
    age_bins,
    equity_scaled,
    fairness_report,
    false_negative_rate,
    fnr_gap,
    groups_from_meta,
    per_group,
)


def _acc(p, t):
    return float((np.asarray(p) == np.asarray(t)).mean())


def test_hand_derived_gap_ratio_and_equity_scaled():
    pred = np.array([1, 0, 1, 0, 1, 1, 0, 0])
    target = np.array([1, 0, 1, 0, 1, 0, 1, 0])
    groups = ["A"] * 4 + ["B"] * 4  # A: 4/4 right, B: 2/4 right
    res = fairness_report(_acc, pred, target, groups)
    assert res.per_group == {"A": 1.0, "B": 0.5} and res.counts == {"A": 4, "B": 4}
    assert res.overall == pytest.approx(0.75)
    assert res.gap == pytest.approx(0.5) and res.ratio == pytest.approx(0.5)
    assert res.equity_scaled == pytest.approx(0.75 / (1 + 0.25 + 0.25))
    assert (res.worst_group, res.best_group) == ("B", "A")


def test_auroc_per_group_equals_sklearn_and_accepts_tensors():
    from medimg_bench.metrics.classification import auroc

    rng = np.random.default_rng(0)
    n = 300
    target = rng.integers(0, 2, n)
    sex = rng.choice(["F", "M"], n)
    score = target * np.where(sex == "F", 1.0, 0.4) + rng.normal(0, 1, n)
    res = fairness_report(auroc, torch.from_numpy(score), torch.from_numpy(target), sex)
    for g in ("F", "M"):
        assert res.per_group[g] == pytest.approx(roc_auc_score(target[sex == g], score[sex == g]), abs=1e-12)
    assert res.overall == pytest.approx(roc_auc_score(target, score), abs=1e-12)
    assert res.worst_group == "M"
    # any callable works, e.g. scikit-learn's own, on numpy inputs
    res_sk = fairness_report(lambda p, t: roc_auc_score(t, p), score, target, sex)
    assert res_sk.per_group["M"] == pytest.approx(res.per_group["M"], abs=1e-12)


def test_undefined_and_small_groups():
    score = np.array([0.1, 0.9, 0.3, 0.7, 0.5, 0.6])
    target = np.array([0, 1, 0, 1, 1, 1])
    groups = np.array(["a", "a", "a", "a", "b", "b"])  # group b has one class: AUROC undefined
    fn = lambda p, t: roc_auc_score(t, p) if len(set(t.tolist())) == 2 else math.nan  # noqa: E731
    with pytest.raises(ValueError, match="group 'b'"):
        fairness_report(fn, score, target, groups)
    with pytest.warns(UserWarning, match=r"\['b'\]"):
        res = fairness_report(fn, score, target, groups, small_groups="nan")
    assert math.isnan(res.per_group["b"]) and res.gap == 0.0 and res.worst_group == "a"
    with pytest.raises(ValueError, match="group 'b' has 2 sample"):
        per_group(_acc, score, target, groups, min_group_size=3)
    one_each = per_group(_acc, np.array([1, 0, 1]), np.array([1, 1, 1]), ["x", "y", "z"])[0]
    assert one_each == {"x": 1.0, "y": 0.0, "z": 1.0}  # one sample per group is enough for accuracy


def test_input_errors():
    with pytest.raises(ValueError, match="groups has 2 labels for 3 samples"):
        per_group(_acc, [1, 0, 1], [1, 0, 1], ["a", "b"])
    with pytest.raises(ValueError, match="lengths differ"):
        per_group(_acc, [1, 0, 1], [1, 0], ["a", "b", "a"])
    with pytest.raises(ValueError, match="missing labels"):
        per_group(_acc, [1, 0, 1], [1, 0, 1], ["a", None, "a"])
    with pytest.raises(ValueError, match="scalar"):
        per_group(lambda p, t: np.array([1.0, 2.0]), [1, 0], [1, 0], ["a", "a"])
    with pytest.raises(ValueError, match="small_groups"):
        per_group(_acc, [1], [1], ["a"], small_groups="drop")


def test_fnr_gap_hand_case():
    score = np.array([0.9, 0.2, 0.8, 0.1, 0.3, 0.4, 0.7, 0.6])
    target = np.array([1, 1, 1, 0, 1, 1, 1, 0])
    group = np.array(["w", "w", "w", "w", "b", "b", "b", "b"])
    res = fnr_gap(score, target, group, threshold=0.5)
    # w: positives 0.9, 0.2, 0.8 -> 1 missed of 3 ; b: positives 0.3, 0.4, 0.7 -> 2 missed of 3
    assert res.per_group == {"b": pytest.approx(2 / 3), "w": pytest.approx(1 / 3)}
    assert res.counts == {"b": 3, "w": 3}
    assert res.gap == pytest.approx(1 / 3) and res.worst_group == "b" and res.equity_scaled is None
    assert res.overall == pytest.approx(false_negative_rate(score, target)) == pytest.approx(0.5)
    assert false_negative_rate(score >= 0.5, target, threshold=None) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="group 'n' has 0 positive"):
        fnr_gap(score, np.r_[target[:4], [0, 0, 0, 0]], np.r_[group[:4], ["n"] * 4])
    with pytest.raises(ValueError, match="0/1"):
        false_negative_rate(score, target * 2)
    with pytest.raises(ValueError, match="NaN"):
        false_negative_rate(np.r_[np.nan, score[1:]], target)


def test_age_bins_and_meta():
    bins = age_bins([0, 19.9, 20, 59, 60, 79.5, 80, 95])
    assert bins.tolist() == ["0-20", "0-20", "20-40", "40-60", "60-80", "60-80", "80+", "80+"]
    assert age_bins(torch.tensor([45.0]), edges=(18, 65)).tolist() == ["18-65"]
    with pytest.raises(ValueError, match=r"index \[1\]"):
        age_bins([30, float("nan")])
    with pytest.raises(ValueError, match="below 18"):
        age_bins([10], edges=(18, 65))
    meta = [{"id": "s1", "sex": "F"}, {"id": "s2", "sex": "M"}, {"id": "s3"}]
    assert groups_from_meta(meta[:2], "sex").tolist() == ["F", "M"]
    with pytest.raises(ValueError, match=r"no 'sex'.*s3"):
        groups_from_meta(meta, "sex")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 100_000), n_groups=st.integers(1, 4))
def test_permutation_invariance_and_equity_bounds(seed, n_groups):
    rng = np.random.default_rng(seed)
    n = 40
    target = rng.integers(0, 2, n)
    pred = np.where(rng.random(n) < 0.7, target, 1 - target)
    groups = rng.integers(0, n_groups, n)
    res = fairness_report(_acc, pred, target, groups)
    perm = rng.permutation(n)
    res2 = fairness_report(_acc, pred[perm], target[perm], groups[perm])
    assert res2.per_group == pytest.approx(res.per_group)
    assert res2.equity_scaled == pytest.approx(res.equity_scaled)
    assert 0 <= res.equity_scaled <= res.overall + 1e-12
    assert equity_scaled(0.8, [0.8, 0.8]) == pytest.approx(0.8)


def test_fairness_ci_covers_estimate_and_keeps_clusters():
    from medimg_bench.metrics.fairness import FAIRNESS_CI_NAMES, fairness_ci

    rng = np.random.default_rng(2)
    n = 120
    target = rng.integers(0, 2, n)
    site = np.where(np.arange(n) < 60, "s1", "s2")
    pred = np.where(rng.random(n) < np.where(site == "s1", 0.9, 0.7), target, 1 - target)
    patients = np.arange(n) // 2  # two images per patient
    ci = fairness_ci(_acc, pred, target, site, clusters=patients, n_resamples=200, seed=1)
    ref = fairness_report(_acc, pred, target, site)
    assert len(FAIRNESS_CI_NAMES) == ci.estimate.shape[0] == 4
    assert ci.estimate.tolist() == pytest.approx([ref.overall, ref.gap, ref.ratio, ref.equity_scaled])
    assert (ci.low <= ci.estimate + 1e-12).all() and (ci.estimate <= ci.high + 1e-12).all()
    assert ci.low[1] > 0  # s1 is clearly better: the gap's interval excludes 0
    with pytest.raises(ValueError, match="group 's1' has 60"):
        fairness_ci(_acc, pred, target, site, min_group_size=61, n_resamples=5)
