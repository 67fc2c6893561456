"""The bootstrap's cluster-count fast paths equal a plain loop over resampled rows."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from medimg_bench.metrics import _resample, stats
from medimg_bench.metrics.calibration import ECE
from medimg_bench.metrics.classification import (
    AUPRC,
    AUROC,
    F1,
    Accuracy,
    BalancedAccuracy,
    Sensitivity,
    SensitivityAtSpecificity,
    Specificity,
)


def _data(kind: str, n: int = 120, k: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    if kind == "multiclass":
        logits = torch.randn(n, k, generator=g, dtype=torch.float64)
        probs = logits.softmax(1).round(decimals=2)  # ties, rows within 1e-3 of 1 after rounding
        probs = probs / probs.sum(1, keepdim=True)
        return probs, torch.randint(0, k, (n,), generator=g).double()
    s = (torch.rand(n, k, generator=g, dtype=torch.float64) * 20).round() / 20  # heavy ties
    y = (torch.rand(n, k, generator=g) < torch.tensor([0.5, 0.2, 0.05, 0.5][:k])).double()
    y[torch.rand(n, k, generator=g) < 0.1] = float("nan")  # unlabelled
    if kind == "binary":
        return s[:, 0], y[:, 0].nan_to_num(0.0)
    return s, y


METRICS = [
    ("auroc", lambda: AUROC(), "multilabel"),
    ("auroc_macro", lambda: AUROC(average="macro"), "multilabel"),
    ("auroc_micro", lambda: AUROC(average="micro"), "multilabel"),
    ("auroc_binary", lambda: AUROC(), "binary"),
    ("auroc_multiclass", lambda: AUROC(average="weighted"), "multiclass"),
    ("auprc", lambda: AUPRC(), "multilabel"),
    ("auprc_weighted", lambda: AUPRC(average="weighted"), "multilabel"),
    ("sensitivity", lambda: Sensitivity(), "multilabel"),
    ("specificity_macro", lambda: Specificity(average="macro"), "multilabel"),
    ("f1_multiclass", lambda: F1(), "multiclass"),
    ("accuracy", lambda: Accuracy(), "multilabel"),
    ("accuracy_multiclass", lambda: Accuracy(), "multiclass"),
    ("balanced_accuracy", lambda: BalancedAccuracy(), "multiclass"),
    ("sens_at_spec", lambda: SensitivityAtSpecificity(specificity=0.8), "multilabel"),
    ("sens_at_spec_binary", lambda: SensitivityAtSpecificity(specificity=0.5), "binary"),
    ("ece", lambda: ECE(), "multilabel"),
    ("ece_weighted", lambda: ECE(average="weighted"), "multilabel"),
    ("ece_binary_max", lambda: ECE(norm="max"), "binary"),
    ("ece_multiclass", lambda: ECE(), "multiclass"),
]


def _loop(metric, s, y, counts, cluster):
    rows = []
    for row in counts[:, cluster]:
        idx = torch.as_tensor(np.repeat(np.arange(len(cluster)), row.astype(np.int64)))
        rows.append(metric.functional(s[idx], y[idx]).numpy())
    return np.stack(rows)


# every code path of the plans: dense or bag products, float32 or float64 sums, many small
# tiles (labels split across tiles, resamples across tile columns) or a few padded wide ones
PATHS = {
    "default": {},
    "bags": {"_DENSE_MAX_BYTES": 0},
    "float64": {"_EXACT_FLOAT32": 0},
    "tiles": {"_TILE_ELEMENTS": 40, "_MIN_TILE_RESAMPLES": 3},
    "wide_tiles": {"_TILE_ELEMENTS": 2000, "_MIN_TILE_RESAMPLES": 7},
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("name,make,kind", METRICS, ids=[m[0] for m in METRICS])
def test_cluster_fast_path_equals_loop(name, make, kind, path, monkeypatch):
    for attr, value in PATHS[path].items():
        monkeypatch.setattr(_resample, attr, value)
    for seed in range(3):
        s, y = _data(kind, seed=seed)
        metric = make()
        cluster = np.arange(len(s)) // (seed + 2)  # two to four samples per patient
        n_clusters = int(cluster.max()) + 1
        counts = np.concatenate(list(stats.bootstrap_counts(n_clusters, 25, seed=seed + 1)))
        counts[0] = 0
        counts[0, :2] = 1  # a resample with two patients only: undefined labels must agree (NaN)
        fn = metric.cluster_weighted(s, y, cluster, n_clusters)
        assert fn is not None
        fast = fn(torch.from_numpy(counts.astype(np.float64))).numpy().reshape(len(counts), -1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loop = _loop(metric, s, y, counts, cluster)
        np.testing.assert_allclose(fast, loop, rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name,make,kind", METRICS[:3] + METRICS[7:8] + METRICS[15:16],
                         ids=[m[0] for m in METRICS[:3] + METRICS[7:8] + METRICS[15:16]])
def test_bootstrap_ci_equals_plain_loop_of_resamples(name, make, kind):
    """Same seed, same resamples: the fast path's interval equals the row-resampling loop's."""
    s, y = _data(kind, n=90, seed=4)
    metric = make()
    groups = [f"p{i // 2}" for i in range(len(s))]
    fast = stats.bootstrap_ci(metric.functional, s, y, n_resamples=60, groups=groups, seed=7, append_mean=True)

    def plain(p, t):  # no fast path: bootstrap_ci resamples rows and calls this per resample
        return metric.functional(p, t)

    slow = stats.bootstrap_ci(plain, s, y, n_resamples=60, groups=groups, seed=7, append_mean=True)
    for a, b in ((fast.estimate, slow.estimate), (fast.low, slow.low), (fast.high, slow.high)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, equal_nan=True)
    np.testing.assert_array_equal(fast.n_valid, slow.n_valid)


def test_bootstrap_bca_and_paired_use_the_fast_path_consistently():
    s, y = _data("multilabel", n=80, seed=2)
    m = AUROC()
    groups = np.arange(80) // 4
    fast = stats.bootstrap_ci(m.functional, s, y, n_resamples=40, method="bca", groups=groups, seed=3)
    slow = stats.bootstrap_ci(lambda p, t: m.functional(p, t), s, y, n_resamples=40, method="bca",
                              groups=groups, seed=3)
    np.testing.assert_allclose(fast.low, slow.low, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(fast.high, slow.high, atol=1e-12, equal_nan=True)
    s2 = s + 0.05 * torch.randn(s.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pf = stats.paired_bootstrap(m.functional, s, s2, y, n_resamples=40, groups=groups, seed=3)
    ps = stats.paired_bootstrap(lambda p, t: m.functional(p, t), s, s2, y, n_resamples=40, groups=groups, seed=3)
    np.testing.assert_allclose(pf.low, ps.low, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(pf.p_value, ps.p_value, atol=1e-12)


def test_mean_fast_path_equals_sample_weights():
    v = torch.rand(50, 3, dtype=torch.float64)
    v[::7, 1] = float("nan")
    groups = np.arange(50) // 5
    fast = stats.bootstrap_ci("mean", v, n_resamples=30, groups=groups, seed=0)
    slow = stats.bootstrap_ci(lambda p: torch.as_tensor(p).double().nanmean(0), v, n_resamples=30,
                              groups=groups, seed=0)
    np.testing.assert_allclose(fast.low, slow.low, atol=1e-12)
    np.testing.assert_allclose(fast.high, slow.high, atol=1e-12)


def test_cluster_products_pick_dense_or_bags_and_agree():
    rng = np.random.default_rng(0)
    rows, cl = rng.integers(0, 30, 400), rng.integers(0, 20, 400)
    vals = rng.random(400)
    counts = torch.from_numpy(rng.integers(0, 3, (5, 20)).astype(np.float64))
    expected = np.zeros((30, 20))
    np.add.at(expected, (rows, cl), vals)
    dense = _resample.ClusterProduct(rows, cl, vals, n_rows=30, n_clusters=20, device=torch.device("cpu"))
    assert dense.dense
    np.testing.assert_allclose(dense(counts).numpy(), expected @ counts.numpy().T, atol=1e-12)
    sparse = _resample.ClusterProduct(rows[:5], cl[:5], vals[:5], n_rows=3000, n_clusters=2000,
                                      device=torch.device("cpu"))
    assert not sparse.dense
    wide = torch.from_numpy(rng.integers(0, 3, (5, 2000)).astype(np.float64))
    expected = np.zeros((3000, 2000))
    np.add.at(expected, (rows[:5], cl[:5]), vals[:5])
    np.testing.assert_allclose(sparse(wide).numpy(), expected @ wide.numpy().T, atol=1e-12)


def test_float32_sums_only_when_exact():
    """Counts are summed in float32 only while every sum is an integer below 2**24."""
    rows = np.zeros(10, dtype=np.int64)
    prod = _resample.ClusterProduct(rows, np.arange(10) % 2, None, n_rows=1, n_clusters=2, device=torch.device("cpu"))
    small = torch.tensor([[3.0, 4.0]])
    assert prod.exact32(small)
    huge = torch.tensor([[2.0**22, 2.0**22]])  # 5 · 2**22 + 5 · 2**22 = 2**25 + 2**23
    assert not prod.exact32(huge)
    assert float(prod(huge)[0, 0]) == 10 * 2.0**22
    assert not prod.exact32(torch.tensor([[0.5, 1.0]]))  # not counts
    weighted = _resample.ClusterProduct(rows, np.arange(10) % 2, np.full(10, 0.1), n_rows=1, n_clusters=2,
                                        device=torch.device("cpu"))
    assert not weighted.exact32(small)


def test_ranking_with_totals_beyond_float32_equals_loop():
    """AUROC / AUPRC when the resample weights exceed 2**24 (the float64 product)."""
    s, y = _data("multilabel", n=40, seed=3)
    cluster = np.arange(40) // 2
    counts = torch.from_numpy(np.concatenate(list(stats.bootstrap_counts(20, 6, seed=2))).astype(np.float64))
    for metric in (AUROC(), AUPRC()):
        fast = metric.cluster_weighted(s, y, cluster, 20)(counts * 2.0**21)  # totals ~ 2**26
        base = metric.cluster_weighted(s, y, cluster, 20)(counts)
        np.testing.assert_allclose(fast.numpy(), base.numpy(), rtol=0, atol=1e-12, equal_nan=True)


def test_joint_bootstrap_equals_separate_calls_and_shares_one_ranking_plan(monkeypatch):
    s, y = _data("multilabel", n=150, seed=6)
    groups = np.arange(150) // 3
    metrics = [AUROC(), AUPRC(), AUROC(average="macro"), Sensitivity(), Specificity(), ECE(),
               SensitivityAtSpecificity(specificity=0.7)]
    built = []
    real = _resample.RankingPlan.__init__

    def spy(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(_resample.RankingPlan, "__init__", spy)
    # each metric keeps its own copy of the scores, as the engine's metric states do
    items = [(m.functional, s.clone(), y.clone()) for m in metrics]
    joint = stats.bootstrap_cis(items, n_resamples=70, groups=groups, seed=2, append_mean=True)
    assert len(built) == 1  # AUROC (two averages), AUPRC and sensitivity at specificity: one plan
    for m, res in zip(metrics, joint):
        alone = stats.bootstrap_ci(m.functional, s, y, n_resamples=70, groups=groups, seed=2, append_mean=True)
        for key in ("estimate", "low", "high", "n_valid", "std_error"):
            np.testing.assert_array_equal(getattr(res, key), getattr(alone, key))


def test_joint_bootstrap_rejects_different_samples():
    s, y = _data("multilabel", n=30)
    with pytest.raises(ValueError, match="same samples"):
        stats.bootstrap_cis([(AUROC().functional, s, y), (AUPRC().functional, s[:20], y[:20])], n_resamples=5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name,make,kind", METRICS, ids=[m[0] for m in METRICS])
def test_cuda_cluster_fast_path_equals_cpu(name, make, kind):
    """The same plans on CUDA (bags, mm, cumulative sums, index_add) equal the CPU's."""
    s, y = _data(kind)
    metric = make()
    cluster = np.arange(len(s)) // 3
    g = int(cluster.max()) + 1
    counts = torch.from_numpy(np.concatenate(list(stats.bootstrap_counts(g, 25, seed=1))).astype(np.float64))
    cpu = metric.cluster_weighted(s, y, cluster, g)(counts)
    gpu = metric.cluster_weighted(s.cuda(), y.cuda(), cluster, g)(counts)
    assert gpu.device.type == "cuda"
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=0, atol=1e-12, equal_nan=True)


def test_froc_cpm_cluster_fast_path_equals_loop():
    from medimg_bench.metrics.detection import FROCCPM

    rng = np.random.default_rng(0)
    m = FROCCPM()
    cands, finds = [], []
    for _ in range(12):
        nf, nc = int(rng.integers(0, 3)), int(rng.integers(1, 6))
        f = np.c_[rng.uniform(0, 50, (nf, 3)), np.full(nf, 6.0)]  # (x, y, z, diameter)
        c = np.c_[rng.uniform(0, 50, (nc, 3)), rng.random(nc).round(1)]  # (x, y, z, score), ties
        c = np.r_[c, np.c_[f[:, :3] + 0.5, rng.random(nf).round(1)]]  # hits
        cands.append(c)
        finds.append(f)
    m.update(cands, finds, ids=[f"s{i}" for i in range(12)])
    idx, _ = m.state_arrays()
    cluster = np.arange(12) // 2
    counts = np.concatenate(list(stats.bootstrap_counts(6, 20, seed=2)))
    fast = m.cluster_weighted(idx, idx, cluster, 6)(torch.from_numpy(counts.astype(np.float64))).numpy()
    loop = _loop(m, idx, idx, counts, cluster)
    np.testing.assert_allclose(fast, loop, rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("make", [AUROC, AUPRC, Sensitivity, ECE, lambda: SensitivityAtSpecificity(specificity=0.7),
                                  lambda: AUROC(average="macro")])
def test_fast_path_with_unlabelled_and_one_class_labels(make):
    s, y = _data("multilabel", n=60, seed=9)
    y[:, 1] = float("nan")  # a label nobody annotated
    y[:, 2] = 0.0  # a label without positives
    metric = make()
    cluster = np.arange(60) // 2
    counts = np.concatenate(list(stats.bootstrap_counts(30, 15, seed=4)))
    fast = metric.cluster_weighted(s, y, cluster, 30)(torch.from_numpy(counts.astype(np.float64))).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop = _loop(metric, s, y, counts, cluster)
    np.testing.assert_allclose(fast.reshape(loop.shape), loop, rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("shift", [0.0, 50.0])
def test_agreement_cluster_fast_path_equals_loop(shift):
    from medimg_bench.metrics.agreement import Agreement

    rng = np.random.default_rng(1)
    t = rng.normal(30, 5, 40).round(1) + shift  # ties for Spearman; a large offset stresses the sums
    p = t + rng.normal(0.5, 1.0, 40).round(1)
    m = Agreement()
    m.update(torch.from_numpy(p), torch.from_numpy(t))
    cluster = np.arange(40) // 2
    counts = np.concatenate(list(stats.bootstrap_counts(20, 25, seed=5)))
    fast = m.cluster_weighted(*m.state_arrays(), cluster, 20)(torch.from_numpy(counts.astype(np.float64))).numpy()
    loop = _loop(m, *m.state_arrays(), counts, cluster)
    np.testing.assert_allclose(fast, loop, rtol=1e-9, atol=1e-9, equal_nan=True)


def test_summary_resamples_metrics_of_the_same_samples_together(monkeypatch):
    """The run summary bootstraps the dataset-level metrics of one sample set in one pass; a
    metric that saw other samples gets its own pass; each equals its summary alone."""
    import pandas as pd

    from medimg_bench.engine.summary import summarize

    s, y = _data("multilabel", n=120, seed=8)
    ids = [f"s{i}" for i in range(120)]
    patients = {i: f"p{k // 3}" for k, i in enumerate(ids)}
    metrics = {"auroc": AUROC(), "auprc": AUPRC(), "ece": ECE(), "sens_part": Sensitivity()}
    for key, m in metrics.items():
        n = 90 if key == "sens_part" else 120
        m.update(s[:n], y[:n], ids=ids[:n])
    calls = []
    real = stats.bootstrap_cis

    def spy(items, **kwargs):
        calls.append(len(items))
        return real(items, **kwargs)

    import medimg_bench.engine.summary as summary_mod

    samples = pd.DataFrame({"id": ids, "status": "ok"})
    with monkeypatch.context() as patch:
        patch.setattr(summary_mod, "bootstrap_cis", spy)
        together = summarize(metrics, samples, patients=patients, n_resamples=40, seed=1)
    assert sorted(calls) == [1, 3]
    for key, m in metrics.items():
        alone = summarize({key: m}, samples, patients=patients, n_resamples=40, seed=1)
        assert together["metrics"][key] == alone["metrics"][key]
