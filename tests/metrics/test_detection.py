"""FROC / CPM: a hand-derived case, the LUNA16 evaluation logic re-written with sklearn, bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_curve

from medimg_bench.metrics.detection import (
    FROCCPM,
    LUNA16_FP_RATES,
    cpm,
    froc,
    froc_bootstrap,
    match_candidates,
)
from medimg_bench.metrics.stats import bootstrap_ci
from medimg_bench.registry import create_metric


def _hand_case():
    # scan A: N1 r=5 at origin, N2 r=2 at x=50, one excluded finding with unknown diameter (-1 -> 5 mm)
    a_find = np.array([[0, 0, 0, 10], [50, 0, 0, 4]], float)
    a_excl = np.array([[0, 50, 0, -1]], float)
    a_cand = np.array(
        [
            [1, 0, 0, 0.9],  # hits N1
            [0, 3, 0, 0.6],  # second hit on N1: ignored
            [0, 51, 0, 0.8],  # on the excluded finding: ignored
            [50, 2, 0, 0.7],  # distance 2 == radius of N2: not a hit (strict) -> FP
            [20, 20, 20, 0.3],  # FP
        ],
        float,
    )
    b_find = np.array([[10, 10, 10, 6]], float)
    b_cand = np.array([[10, 10, 12, 0.4], [100, 0, 0, 0.95]], float)  # hit N3, FP
    c_find = np.zeros((0, 4))
    c_cand = np.array([[5, 5, 5, 0.5], [9, 9, 9, 0.2]], float)  # scan without findings: 2 FPs
    return [a_cand, b_cand, c_cand], [a_find, b_find, c_find], [a_excl, None, None]


def test_hand_derived_cpm():
    pred, target, excl = _hand_case()
    res = froc(pred, target, excluded=excl)
    # entries by score: .95 FP, .9 TP, .7 FP, .5 FP, .4 TP, .3 FP, .2 FP; 3 findings, 3 scans
    assert res.fps.tolist() == pytest.approx([0, 1 / 3, 1 / 3, 2 / 3, 1, 1, 4 / 3, 5 / 3])
    assert res.sensitivity.tolist() == pytest.approx([0, 0, 1 / 3, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 2 / 3])
    assert res.sensitivity_at.tolist() == pytest.approx([0, 0, 1 / 3, 2 / 3, 2 / 3, 2 / 3, 2 / 3])
    assert res.cpm == pytest.approx(3 / 7)
    assert (res.n_scans, res.n_findings, res.n_detected, res.n_false_positives) == (3, 3, 2, 5)
    # without the exclusion list the candidate on the excluded finding becomes an FP at 0.8
    assert cpm(pred, target) < res.cpm
    # the mapping form gives the same numbers
    as_map = froc(
        {"a": pred[0], "b": pred[1], "c": pred[2]},
        {"a": target[0], "b": target[1], "c": target[2]},
        excluded={"a": excl[0]},
    )
    assert as_map.cpm == pytest.approx(3 / 7)


def test_match_candidates_entries():
    pred, target, excl = _hand_case()
    e = match_candidates(pred[0], target[0], excluded=excl[0])
    assert e[:2].tolist() == [[0.9, 1.0], [-np.inf, 1.0]]
    assert sorted(e[2:, 0].tolist()) == [0.3, 0.7]
    # a candidate inside two overlapping findings counts for both (as the LUNA16 script does)
    two = match_candidates(np.array([[0, 0, 0, 0.5]]), np.array([[0, 0, 0, 10], [1, 0, 0, 10]]))
    assert two.tolist() == [[0.5, 1.0], [0.5, 1.0]]


def _luna16_reference(pred, target, excl, n_rates=LUNA16_FP_RATES):
    """The LUNA16 evaluation logic, written as its loops, with sklearn's roc_curve and np.interp."""
    gt, prob, excluded_flag = [], [], []
    for cands, finds, ex in zip(pred, target, excl):
        remaining = {i: c for i, c in enumerate(cands)}
        annots = [(f, "inc") for f in finds] + [(f, "exc") for f in (ex if ex is not None else [])]
        for f, state in annots:
            diam = f[3] if f[3] >= 0 else 5.0
            matches = []
            for key, c in enumerate(cands):
                if sum((f[k] - c[k]) ** 2 for k in range(3)) < (diam / 2) ** 2:
                    matches.append(c)
                    remaining.pop(key, None)
            if state == "inc":
                if matches:
                    gt.append(1.0), prob.append(max(m[3] for m in matches)), excluded_flag.append(False)
                else:
                    gt.append(1.0), prob.append(-1e9), excluded_flag.append(True)
        for c in remaining.values():
            gt.append(0.0), prob.append(c[3]), excluded_flag.append(False)
    gt, prob, ex = np.array(gt), np.array(prob), np.array(excluded_flag)
    gl, pl = gt[~ex], prob[~ex]
    n_detected, n_total = gl.sum(), gt.sum()
    fpr, tpr, _ = roc_curve(gl, pl)
    fps = fpr * (len(pl) - n_detected) / len(target)
    sens = tpr * n_detected / n_total
    return np.interp(n_rates, fps, sens)


def _random_scans(rng, n_scans, with_excluded=True):
    pred, target, excl = [], [], []
    for _ in range(n_scans):
        k = rng.integers(0, 4)
        finds = np.c_[rng.uniform(0, 60, (k, 3)), rng.uniform(3, 20, k)]
        m = rng.integers(0, 12)
        cands = np.c_[rng.uniform(0, 60, (m, 3)), rng.integers(0, 20, m) / 20]  # tied scores
        if k and m:  # put some candidates near findings
            near = rng.integers(0, k, min(m, 3))
            cands[: len(near), :3] = finds[near, :3] + rng.normal(0, 3, (len(near), 3))
        e = None
        if with_excluded and rng.random() < 0.5:
            e = np.c_[rng.uniform(0, 60, (2, 3)), [-1.0, 8.0]]
            if m:
                cands[-1, :3] = e[0, :3]
        pred.append(cands), target.append(finds), excl.append(e)
    return pred, target, excl


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 100_000), n_scans=st.integers(1, 12))
def test_matches_luna16_script_logic(seed, n_scans):
    rng = np.random.default_rng(seed)
    pred, target, excl = _random_scans(rng, n_scans)
    # guarantee a detected finding and a false positive: the script's ROC step needs both
    # classes (with no detection it gives NaN where we give sensitivity 0)
    target[0] = np.r_[target[0], [[200, 200, 200, 10]]]
    pred[0] = np.r_[pred[0], [[-100, -100, -100, 0.33], [201, 200, 200, 0.45]]]
    ref = _luna16_reference(pred, target, excl)
    res = froc([torch.from_numpy(p) for p in pred], target, excluded=excl)
    assert res.sensitivity_at == pytest.approx(ref, abs=1e-12)
    assert res.cpm == pytest.approx(ref.mean(), abs=1e-12)


def test_no_false_positives_and_no_findings():
    target = [np.array([[0, 0, 0, 10.0]]), np.array([[0, 0, 0, 10.0]])]
    pred = [np.array([[0, 0, 0, 0.9]]), np.zeros((0, 4))]
    assert cpm(pred, target) == pytest.approx(0.5)  # flat at the final sensitivity
    res = froc([np.array([[1, 1, 1, 0.5]])], [np.zeros((0, 4))])
    assert np.isnan(res.cpm) and res.n_false_positives == 1


def test_two_dimensional_coordinates():
    res = froc([np.array([[10, 10, 0.9], [40, 40, 0.8]])], [np.array([[11, 10, 5.0]])])
    assert res.sensitivity_at.tolist() == pytest.approx([1.0] * 7)


def test_invalid_inputs():
    pred, target, _ = _hand_case()
    with pytest.raises(ValueError, match="lengths differ"):
        froc(pred[:2], target)
    bad = [p.copy() for p in pred]
    bad[1][0, 3] = np.nan
    with pytest.raises(ValueError, match="scan 1: candidates: has NaN"):
        froc(bad, target)
    with pytest.raises(ValueError, match="scan 0: candidates have 2 coordinates, findings 3"):
        froc([np.ones((2, 3))], [np.ones((1, 4))])
    with pytest.raises(ValueError, match="not in target"):
        froc({"x": pred[0]}, {"a": target[0]})


def test_bootstrap_matches_naive_resampling():
    rng = np.random.default_rng(5)
    pred, target, excl = _random_scans(rng, 15)
    target[0] = np.r_[target[0], [[200, 200, 200, 10]]]
    r, seed = 40, 3
    boot = froc_bootstrap(pred, target, excluded=excl, n_resamples=r, seed=seed, chunk=r)
    draws = np.random.default_rng(seed).integers(0, 15, size=(r, 15))
    naive = []
    for d in draws:
        sub = [(pred[i], target[i], excl[i]) for i in d]
        if sum(len(t) for _, t, _ in sub) == 0:
            continue
        naive.append(cpm([s[0] for s in sub], [s[1] for s in sub], excluded=[s[2] for s in sub]))
    assert boot.cpm.estimate == pytest.approx(cpm(pred, target, excluded=excl))
    assert boot.cpm.low == pytest.approx(np.quantile(naive, 0.025))
    assert boot.cpm.high == pytest.approx(np.quantile(naive, 0.975))
    assert boot.sensitivity.low.shape == (7,)
    # chunking does not change the draws' results
    chunked = froc_bootstrap(pred, target, excluded=excl, n_resamples=r, seed=seed, chunk=7)
    assert chunked.cpm.low == pytest.approx(boot.cpm.low)


def test_bootstrap_identical_scans_has_zero_width():
    one = (np.array([[0, 0, 0, 0.9], [30, 30, 30, 0.5]]), np.array([[0, 0, 0, 10.0], [9, 9, 9, 4.0]]))
    boot = froc_bootstrap([one[0]] * 6, [one[1]] * 6, n_resamples=50)
    assert boot.cpm.low == pytest.approx(boot.cpm.high) == pytest.approx(boot.cpm.estimate)


def test_stateful_froc_cpm_and_engine_bootstrap():
    pred, target, excl = _hand_case()
    m = create_metric("froc_cpm")
    assert isinstance(m, FROCCPM)
    m.update(pred[:2], target[:2], meta=[{"excluded": excl[0]}, {}], ids=["a", "b"])
    m.update(pred[2:], target[2:], ids=["c"])
    out = m.compute()
    assert out.shape == (8,) and out[0].item() == pytest.approx(3 / 7)
    assert m.class_names[0] == "cpm" and m.class_names[1] == "sensitivity@0.125fp"
    # functional over repeated scan indices == froc on the repeated scan list
    idx = torch.tensor([0, 0, 2])
    ref = froc([pred[0], pred[0], pred[2]], [target[0], target[0], target[2]], excluded=[excl[0], excl[0], None])
    assert m.functional(idx, idx)[0].item() == pytest.approx(ref.cpm)
    # the engine's bootstrap over rows of state_arrays resamples scans
    ci = bootstrap_ci(m.functional, *m.state_arrays(), n_resamples=20, seed=0)
    assert ci.estimate[0] == pytest.approx(3 / 7)
    # a distributed gather with a duplicated scan counts it once
    rank0 = {"ids": ["a", "b"], "entries": m.entries[:2]}
    rank1 = {"ids": ["c", "a"], "entries": [m.entries[2], m.entries[0]]}
    m.load_state(rank0)
    m.merge_state(rank1)
    assert m.ids == ["a", "b", "c"] and m.compute()[0].item() == pytest.approx(3 / 7)
