"""Bootstrap (percentile, BCa, clustered, paired) and DeLong's test against independent references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from medimg_bench.metrics import stats
from medimg_bench.metrics.classification import AUROC, auroc


def _binary(seed: int, n: int, levels: int | None = None):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.35).astype(float)
    s = y * 0.8 + rng.normal(size=n)
    if levels:
        s = np.round(s * levels) / levels
    return s, y


def test_percentile_ci_equals_hand_computed_resamples():
    s, y = _binary(0, 150, levels=4)
    res = stats.bootstrap_ci(AUROC().functional, torch.tensor(s), torch.tensor(y), n_resamples=200, seed=3)
    # independent reference: the same count stream, each resample scored by scikit-learn
    counts = np.concatenate(list(stats.bootstrap_counts(150, 200, seed=3, block=max(1, 4_000_000 // 150))))
    vals = np.array([roc_auc_score(y[np.repeat(np.arange(150), c)], s[np.repeat(np.arange(150), c)]) for c in counts])
    assert abs(res.estimate[0] - roc_auc_score(y, s)) <= 1e-12
    assert abs(res.low[0] - np.quantile(vals, 0.025)) <= 1e-12
    assert abs(res.high[0] - np.quantile(vals, 0.975)) <= 1e-12
    assert abs(res.std_error[0] - vals.std(ddof=1)) <= 1e-12
    assert res.n_valid[0] == 200 and res.method == "percentile"


def test_vectorised_paths_equal_the_per_resample_loop():
    s, y = _binary(1, 300, levels=6)
    fast = stats.bootstrap_ci(AUROC().functional, torch.tensor(s), torch.tensor(y), n_resamples=100, seed=1)
    slow = stats.bootstrap_ci(lambda p, t: auroc(p, t), torch.tensor(s), torch.tensor(y), n_resamples=100, seed=1)
    np.testing.assert_allclose([fast.low[0], fast.high[0]], [slow.low, slow.high], rtol=0, atol=1e-12)
    v = np.random.default_rng(2).normal(size=(200, 3))
    v[::5, 1] = np.nan
    fast = stats.bootstrap_ci("mean", v, n_resamples=300, seed=4, method="bca")
    slow = stats.bootstrap_ci(lambda x: torch.as_tensor(x).nanmean(0), v, n_resamples=300, seed=4, method="bca")
    for a, b in ((fast.estimate, slow.estimate), (fast.low, slow.low), (fast.high, slow.high)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_cluster_bootstrap_resamples_whole_patients():
    rng = np.random.default_rng(5)
    per_patient = rng.normal(size=(40, 2))
    images = np.repeat(per_patient, 3, axis=0)  # 3 identical images per patient
    patient = np.repeat([f"p{i:02d}" for i in range(40)], 3)
    clustered = stats.bootstrap_ci("mean", images, groups=patient, n_resamples=400, seed=7)
    patients = stats.bootstrap_ci("mean", per_patient, n_resamples=400, seed=7)
    np.testing.assert_allclose(clustered.low, patients.low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(clustered.high, patients.high, rtol=0, atol=1e-12)
    naive = stats.bootstrap_ci("mean", images, n_resamples=400, seed=7)
    assert np.all(naive.high - naive.low < clustered.high - clustered.low)


def test_bca_close_to_scipy_on_a_skewed_sample():
    scipy_stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(8).exponential(size=80)
    ours = stats.bootstrap_ci("mean", x[:, None], n_resamples=20000, method="bca", seed=0)
    ref = scipy_stats.bootstrap((x,), np.mean, n_resamples=20000, method="BCa", random_state=0).confidence_interval
    width = ref.high - ref.low
    assert abs(ours.low[0] - ref.low) < 0.05 * width
    assert abs(ours.high[0] - ref.high) < 0.05 * width
    pct = stats.bootstrap_ci("mean", x[:, None], n_resamples=20000, seed=0)
    # right-skewed data: BCa moves the interval up relative to the percentile one
    assert ours.high[0] > pct.high[0]


def test_grouped_jackknife_for_many_clusters(monkeypatch):
    monkeypatch.setattr(stats, "_JACKKNIFE_MAX", 50)
    x = np.random.default_rng(9).exponential(size=(400, 1))
    blocks = stats.bootstrap_ci("mean", x, n_resamples=4000, method="bca", seed=1)
    monkeypatch.setattr(stats, "_JACKKNIFE_MAX", 1000)
    exact = stats.bootstrap_ci("mean", x, n_resamples=4000, method="bca", seed=1)
    width = exact.high - exact.low
    assert np.all(np.abs(blocks.low - exact.low) < 0.1 * width)
    assert np.all(np.abs(blocks.high - exact.high) < 0.1 * width)


def test_undefined_resamples_are_counted_out():
    y = np.zeros(30)
    y[:2] = 1
    s = np.random.default_rng(10).random(30)
    res = stats.bootstrap_ci(AUROC().functional, torch.tensor(s), torch.tensor(y), n_resamples=200)
    assert 0 < res.n_valid[0] < 200 and np.isfinite(res.low[0])


def test_paired_bootstrap():
    s, y = _binary(11, 400)
    noisy = s + np.random.default_rng(12).normal(scale=2.0, size=400)
    f = AUROC().functional
    res = stats.paired_bootstrap(f, torch.tensor(s), torch.tensor(noisy), torch.tensor(y), n_resamples=300)
    assert abs(res.estimate_a[0] - roc_auc_score(y, s)) <= 1e-12
    assert abs(res.difference[0] - (res.estimate_a[0] - res.estimate_b[0])) <= 1e-15
    assert res.low[0] > 0 and res.p_value[0] < 0.01
    same = stats.paired_bootstrap(f, torch.tensor(s), torch.tensor(s), torch.tensor(y), n_resamples=50)
    assert same.difference[0] == 0 and same.low[0] == 0 == same.high[0] and same.p_value[0] == 1


def _delong_slow(a, b, y):
    """Textbook DeLong (1988) with the O(m·n) kernel ψ(x, z) = 1, ½, 0 for x >, =, < z."""
    out = []
    pos, neg = y == 1, y == 0
    v10s, v01s = [], []
    for s in (a, b):
        x, z = s[pos], s[neg]
        psi = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
        out.append(psi.mean())
        v10s.append(psi.mean(1))
        v01s.append(psi.mean(0))
    m, n = pos.sum(), neg.sum()
    s10, s01 = np.cov(np.array(v10s)), np.cov(np.array(v01s))
    cov = s10 / m + s01 / n
    var = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    z = (out[0] - out[1]) / math.sqrt(var)
    return out[0], out[1], cov, z


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_delong_matches_slow_reference(seed):
    s, y = _binary(20 + seed, 250, levels=3 if seed == 2 else None)
    other = s + np.random.default_rng(seed).normal(size=250)
    res = stats.delong_test(s, other, y)
    auc_a, auc_b, cov, z = _delong_slow(s, other, y)
    assert abs(res.auc_a - auc_a) <= 1e-12 and abs(res.auc_b - auc_b) <= 1e-12
    assert abs(res.auc_a - roc_auc_score(y, s)) <= 1e-12
    np.testing.assert_allclose(res.covariance, cov, rtol=1e-10, atol=0)
    assert abs(res.z - z) <= 1e-9 * max(1, abs(z))
    assert abs(res.p_value - math.erfc(abs(z) / math.sqrt(2))) <= 1e-12
    assert res.low < res.difference < res.high


def test_delong_identical_models_and_nan_targets():
    s, y = _binary(30, 100)
    y[::9] = np.nan
    res = stats.delong_test(s, s, y)
    assert res.difference == 0 and res.p_value == 1.0
    keep = ~np.isnan(y)
    assert abs(res.auc_a - roc_auc_score(y[keep], s[keep])) <= 1e-12


def test_bad_inputs_raise():
    s, y = _binary(40, 20)
    with pytest.raises(ValueError, match="groups has 3 entries"):
        stats.bootstrap_ci(auroc, s, y, groups=["a", "b", "c"])
    with pytest.raises(ValueError, match="at least 2 groups"):
        stats.bootstrap_ci(auroc, s, y, groups=["a"] * 20)
    with pytest.raises(ValueError, match="lengths differ"):
        stats.bootstrap_ci(auroc, s, y[:10])
    with pytest.raises(ValueError, match="method"):
        stats.bootstrap_ci(auroc, s, y, method="basic")
    with pytest.raises(ValueError, match="confidence"):
        stats.bootstrap_ci(auroc, s, y, confidence=95)
    with pytest.raises(ValueError, match="2 positives"):
        stats.delong_test(s, s, np.r_[1.0, np.zeros(19)])
    with pytest.raises(ValueError, match="NaN or inf"):
        stats.delong_test(np.r_[np.nan, s[1:]], s, y)
    with pytest.raises(ValueError, match="lengths differ"):
        stats.paired_bootstrap(auroc, s, s[:10], y)


def test_engine_style_multilabel_bootstrap_with_patients():
    rng = np.random.default_rng(50)
    s = rng.random((90, 3))
    y = (rng.random((90, 3)) < 0.4).astype(float)
    y[::4, 2] = np.nan
    patients = np.repeat(np.arange(30), 3)
    m = AUROC()
    m.update(torch.tensor(s), torch.tensor(y))
    fast = stats.bootstrap_ci(m.functional, *m.state_arrays(), groups=patients, n_resamples=60, seed=2)
    slow = stats.bootstrap_ci(
        lambda p, t: auroc(p, t, average=None), torch.tensor(s), torch.tensor(y), groups=patients, n_resamples=60, seed=2
    )
    assert fast.estimate.shape == (3,)
    np.testing.assert_allclose(fast.low, slow.low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.high, slow.high, rtol=0, atol=1e-12)


def test_append_mean_adds_the_macro_mean_of_each_resample():
    rng = np.random.default_rng(60)
    s = rng.random((80, 3))
    y = (rng.random((80, 3)) < 0.4).astype(float)
    m = AUROC()
    m.update(s, y)
    fast = stats.bootstrap_ci(m.functional, *m.state_arrays(), n_resamples=50, seed=1, append_mean=True)
    slow = stats.bootstrap_ci(
        lambda p, t: torch.cat([auroc(p, t, average=None), auroc(p, t)[None]]),
        torch.tensor(s), torch.tensor(y), n_resamples=50, seed=1,
    )
    assert fast.estimate.shape == (4,)
    np.testing.assert_allclose(fast.estimate, slow.estimate, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.low, slow.low, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.high, slow.high, rtol=0, atol=1e-12)
    v = rng.normal(size=(40, 2))
    res = stats.bootstrap_ci("mean", v, n_resamples=30, append_mean=True)
    assert abs(res.estimate[-1] - v.mean()) <= 1e-12
