"""Classification metrics against scikit-learn / torchmetrics on random and adversarial inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from medimg_bench.metrics import calibration as cal
from medimg_bench.metrics import classification as C
from medimg_bench.registry import create_metric

TOL = 1e-12


@pytest.fixture(params=["numpy", "torch"])
def backend(request, monkeypatch):
    """Run each test on the numpy CPU path and on the torch path used for CUDA tensors."""
    monkeypatch.setattr(C, "_NUMPY_ON_CPU", request.param == "numpy")
    return request.param


def _multilabel(seed: int, n: int = 400, k: int = 5, levels: int | None = 12):
    rng = np.random.default_rng(seed)
    s = rng.random((n, k)) if levels is None else rng.integers(0, levels, (n, k)) / levels
    y = (rng.random((n, k)) < 0.3).astype(float)
    return s, y


@pytest.mark.parametrize("levels", [None, 5])
@pytest.mark.parametrize("average", ["macro", "micro", "weighted"])
def test_auroc_auprc_match_sklearn_multilabel(backend, levels, average):
    s, y = _multilabel(1, levels=levels)
    assert abs(float(C.auroc(s, y, average=average)) - skm.roc_auc_score(y, s, average=average)) <= TOL
    ap = skm.average_precision_score(y, s, average=average)
    assert abs(float(C.auprc(s, y, average=average)) - ap) <= TOL


def test_per_label_and_binary_match_sklearn(backend):
    s, y = _multilabel(2, levels=7)
    per = C.auroc(torch.tensor(s), torch.tensor(y), average=None)
    assert per.shape == (5,) and per.dtype == torch.float64
    for j in range(5):
        assert abs(float(per[j]) - skm.roc_auc_score(y[:, j], s[:, j])) <= TOL
        assert abs(float(C.auroc(s[:, j], y[:, j])) - skm.roc_auc_score(y[:, j], s[:, j])) <= TOL
        assert abs(float(C.auprc(s[:, j], y[:, j])) - skm.average_precision_score(y[:, j], s[:, j])) <= TOL


@pytest.mark.parametrize("average", ["macro", "weighted", "micro"])
def test_multiclass_ovr_matches_sklearn(backend, average):
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(4), 300)
    p = np.round(p, 2) / np.round(p, 2).sum(1, keepdims=True)  # ties
    t = rng.integers(0, 4, 300)
    ref = skm.roc_auc_score(t, p, multi_class="ovr", average=average)
    assert abs(float(C.auroc(p, t, average=average)) - ref) <= TOL


def test_all_ties_gives_half_and_ap_prevalence(backend):
    y = np.array([0, 1, 0, 1, 1, 0, 0.0])
    s = np.full(7, 0.3)
    assert float(C.auroc(s, y)) == 0.5 == skm.roc_auc_score(y, s)
    assert abs(float(C.auprc(s, y)) - 3 / 7) <= TOL


def test_nan_labels_are_excluded_per_label(backend):
    s, y = _multilabel(4, levels=9)
    y[::3, 1] = np.nan
    y[5:40, 3] = np.nan
    per = C.auroc(s, y, average=None)
    aps = C.auprc(s, y, average=None)
    for j in range(5):
        keep = ~np.isnan(y[:, j])
        assert abs(float(per[j]) - skm.roc_auc_score(y[keep, j], s[keep, j])) <= TOL
        assert abs(float(aps[j]) - skm.average_precision_score(y[keep, j], s[keep, j])) <= TOL


def test_single_class_label_is_nan_with_warning_and_skipped_in_macro(backend):
    s, y = _multilabel(5)
    y[:, 2] = 0
    with pytest.warns(UserWarning, match=r"label\(s\) \[2\]"):
        per = C.auroc(s, y, average=None)
    assert torch.isnan(per[2]) and not torch.isnan(per[[0, 1, 3, 4]]).any()
    with pytest.warns(UserWarning):
        macro = C.auroc(s, y)
    ref = np.mean([skm.roc_auc_score(y[:, j], s[:, j]) for j in (0, 1, 3, 4)])
    assert abs(float(macro) - ref) <= TOL
    # AP is defined without negatives (=1 here) but not without positives
    with pytest.warns(UserWarning, match="no positive"):
        assert torch.isnan(C.auprc(s, y, average=None)[2])


def test_sensitivity_specificity_operating_points(backend):
    rng = np.random.default_rng(6)
    s = rng.integers(0, 30, 500) / 30
    y = (rng.random(500) < 0.4).astype(float)
    fpr, tpr, _ = skm.roc_curve(y, s, drop_intermediate=False)
    for level in (0.0, 0.5, 0.8, 0.95, 1.0):
        ref = tpr[(1 - fpr) >= level - 1e-12].max()
        assert abs(float(C.sensitivity_at_specificity(s, y, specificity=level)) - ref) <= TOL
        ref = (1 - fpr[tpr >= level - 1e-12]).max()
        assert abs(float(C.specificity_at_sensitivity(s, y, sensitivity=level)) - ref) <= TOL


def test_weighted_ranking_equals_sklearn_sample_weight(backend):
    s, y = _multilabel(7, n=300, levels=6)
    rng = np.random.default_rng(8)
    w = rng.multinomial(300, np.ones(300) / 300, size=4)
    y[::11, 0] = np.nan
    for metric, ref_fn in (("auroc", skm.roc_auc_score), ("auprc", skm.average_precision_score)):
        out = C.weighted_ranking(s, y, w, metric=metric, average=None)
        assert out.shape == (4, 5)
        for b in range(4):
            for j in range(5):
                keep = ~np.isnan(y[:, j])
                ref = ref_fn(y[keep, j], s[keep, j], sample_weight=w[b][keep])
                assert abs(float(out[b, j]) - ref) <= TOL
    # and equal to the metric of the explicitly resampled data (no ties: the fast path)
    s2, y2 = _multilabel(9, n=200, levels=None)
    w2 = rng.multinomial(200, np.ones(200) / 200, size=3)
    out = C.weighted_ranking(s2[:, 0], y2[:, 0], w2, average=None)
    for b in range(3):
        idx = np.repeat(np.arange(200), w2[b])
        assert abs(float(out[b]) - skm.roc_auc_score(y2[idx, 0], s2[idx, 0])) <= TOL


@pytest.mark.parametrize("average", ["macro", "micro", "weighted"])
def test_thresholded_match_sklearn_multiclass(average):
    rng = np.random.default_rng(10)
    p = rng.dirichlet(np.ones(4), 200)
    t = rng.integers(0, 4, 200)
    hard = p.argmax(1)
    ref_f1 = skm.f1_score(t, hard, average=average, zero_division=np.nan)
    assert abs(float(C.f1(p, t, average=average)) - ref_f1) <= TOL
    ref_sens = skm.recall_score(t, hard, average=average, zero_division=np.nan)
    assert abs(float(C.sensitivity(p, t, average=average)) - ref_sens) <= TOL
    ref_prec = skm.precision_score(t, hard, average=average, zero_division=np.nan)
    assert abs(float(C.precision(p, t, average=average)) - ref_prec) <= TOL
    assert abs(float(C.accuracy(p, t)) - skm.accuracy_score(t, hard)) <= TOL
    assert abs(float(C.balanced_accuracy(p, t)) - skm.balanced_accuracy_score(t, hard)) <= TOL


def test_thresholded_binary_and_multilabel():
    rng = np.random.default_rng(11)
    s = rng.random((300, 3))
    y = (rng.random((300, 3)) < 0.4).astype(float)
    hard = (s >= 0.5).astype(int)
    spec = [skm.recall_score(y[:, j], hard[:, j], pos_label=0) for j in range(3)]
    sens = [skm.recall_score(y[:, j], hard[:, j]) for j in range(3)]
    np.testing.assert_allclose(C.specificity(s, y, average=None).numpy(), spec, rtol=0, atol=TOL)
    np.testing.assert_allclose(C.sensitivity(s, y, average=None).numpy(), sens, rtol=0, atol=TOL)
    f1s = skm.f1_score(y, hard, average=None)
    np.testing.assert_allclose(C.f1(s, y, average=None).numpy(), f1s, rtol=0, atol=TOL)
    assert abs(float(C.f1(s, y, average="micro")) - skm.f1_score(y, hard, average="micro")) <= TOL
    # multi-label accuracy is per label (not sklearn's exact-match subset accuracy)
    acc = [skm.accuracy_score(y[:, j], hard[:, j]) for j in range(3)]
    np.testing.assert_allclose(C.accuracy(s, y, average=None).numpy(), acc, rtol=0, atol=TOL)
    assert abs(float(C.accuracy(s, y)) - (hard == y).mean()) <= TOL
    ba = [skm.balanced_accuracy_score(y[:, j], hard[:, j]) for j in range(3)]
    assert abs(float(C.balanced_accuracy(s, y)) - np.mean(ba)) <= TOL
    # binary with a threshold on logits
    logit = np.log(s[:, 0] / (1 - s[:, 0]))
    assert abs(float(C.f1(logit, y[:, 0], threshold=0.0)) - f1s[0]) <= 1e-12


def test_zero_division_is_nan_and_skipped():
    s = np.array([[0.9, 0.1], [0.8, 0.2], [0.1, 0.3]])
    y = np.array([[1, 0], [1, 0], [0, 0.0]])  # label 1: no positive and nothing predicted
    per = C.f1(s, y, average=None)
    assert torch.isnan(per[1]) and float(per[0]) == 1.0
    assert float(C.f1(s, y)) == 1.0
    assert float(C.f1(s, y, average=None, zero_division=0.0)[1]) == 0.0


def test_ece_matches_torchmetrics():
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    rng = np.random.default_rng(12)
    p = rng.random(500)
    y = (rng.random(500) < p).astype(float)
    for norm in ("l1", "max"):
        ref = tmf.binary_calibration_error(torch.tensor(p), torch.tensor(y).long(), n_bins=10, norm=norm)
        assert abs(float(cal.expected_calibration_error(p, y, n_bins=10, norm=norm)) - float(ref)) <= 1e-12
    probs = rng.dirichlet(np.ones(3), 400)
    t = rng.integers(0, 3, 400)
    ref = tmf.multiclass_calibration_error(torch.tensor(probs), torch.tensor(t), num_classes=3, n_bins=15)
    # torchmetrics accumulates this one in float32
    assert abs(float(cal.expected_calibration_error(probs, t)) - float(ref)) <= 1e-6
    d = cal.reliability_diagram(p, y, n_bins=10)
    assert d["count"].sum() == 500 and d["edges"].shape == (11,)
    # difference: a confidence of exactly 1.0 is in our last bin, torchmetrics gives it its own
    assert float(cal.reliability_diagram(np.array([1.0, 0.95]), np.array([1.0, 0.0]), n_bins=10)["count"][0, -1]) == 2


def test_ece_perfectly_calibrated_bins_give_zero():
    p = np.array([0.25] * 4 + [0.75] * 4)
    y = np.array([1, 0, 0, 0, 1, 1, 1, 0.0])
    assert float(cal.expected_calibration_error(p, y, n_bins=4)) == 0.0
    with pytest.raises(ValueError, match="probabilities"):
        cal.expected_calibration_error(p + 1, y)


@pytest.mark.parametrize(
    ("pred", "target", "match"),
    [
        (np.array([0.1, np.nan]), np.array([0, 1.0]), "NaN or inf"),
        (np.array([0.1, np.inf]), np.array([0, 1.0]), "NaN or inf"),
        (np.array([0.1, 0.2, 0.3]), np.array([0, 1.0]), "lengths differ"),
        (np.array([0.1, 0.2]), np.array([0, 2.0]), "not a class"),
        (np.random.rand(3, 3), np.array([0, 1, 3]), r"not a class in \[0, 3\)"),
        (np.random.rand(3, 3), np.random.rand(3, 2), "does not match"),
        (np.zeros(0), np.zeros(0), "empty"),
    ],
)
def test_bad_input_raises(pred, target, match):
    with pytest.raises(ValueError, match=match):
        C.auroc(pred, target)


def test_bad_average_raises():
    with pytest.raises(ValueError, match="average"):
        C.auroc(np.random.rand(4), np.array([0, 1, 0, 1.0]), average="samples")


def test_stateful_metrics_accumulate_and_match_functional():
    s, y = _multilabel(13, n=120, k=3)
    for name, fn in (
        ("auroc", C.auroc),
        ("auprc", C.auprc),
        ("f1", C.f1),
        ("sensitivity", C.sensitivity),
        ("specificity", C.specificity),
        ("accuracy", None),
        ("balanced_accuracy", None),
        ("ece", cal.expected_calibration_error),
    ):
        m = create_metric(name)
        assert m.per_sample is False
        for start in range(0, 120, 50):
            m.update(torch.tensor(s[start : start + 50]), torch.tensor(y[start : start + 50]))
        out = m.compute()
        assert out.ndim == 1
        if fn is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = fn(s, y, average=None)
            np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=TOL)
        p, t = m.state_arrays()
        assert p.shape == (120, 3) and len(m.ids) == 120
        m.reset()
        assert len(m.ids) == 0
    acc = create_metric("accuracy")
    acc.update(s, y)
    assert abs(float(acc.compute()[0]) - ((s >= 0.5) == y).mean()) <= TOL


def test_update_keeps_ids_as_plain_str():
    """The engine's list of exact ``str`` ids is kept as is (the very objects); anything else
    (numpy strings, integers, a tuple) becomes plain ``str``: checkpoint parts and the table
    hold only ``str``."""
    s, y = _multilabel(3, n=4, k=2)
    m = create_metric("auroc")
    engine_ids = ["a", "b"]
    m.update(torch.tensor(s[:2]), torch.tensor(y[:2]), ids=engine_ids)
    assert all(kept is given for kept, given in zip(m.ids, engine_ids))
    m.update(torch.tensor(s[2:3]), torch.tensor(y[2:3]), ids=[np.str_("c")])
    m.update(torch.tensor(s[3:]), torch.tensor(y[3:]), ids=(7,))
    assert m.ids == ["a", "b", "c", "7"] and all(type(i) is str for i in m.ids)
    m.update(torch.tensor(s[:0]), torch.tensor(y[:0]), ids=[])
    assert len(m.ids) == 4


def test_stateful_binary_and_multiclass_shapes():
    rng = np.random.default_rng(14)
    m = create_metric("auroc")
    m.update(rng.random(30), (rng.random(30) < 0.5).astype(float))
    assert m.compute().shape == (1,)
    m = create_metric("auroc")
    p, t = rng.dirichlet(np.ones(4), 50), rng.integers(0, 4, 50)
    m.update(p[:20], t[:20])
    m.update(p[20:], t[20:])
    assert m.compute().shape == (4,)
    acc = create_metric("accuracy")
    acc.update(p, t)
    assert abs(float(acc.compute()[0]) - (p.argmax(1) == t).mean()) <= TOL


# -- properties -----------------------------------------------------------------------------------
_scores = st.lists(st.integers(0, 6), min_size=4, max_size=40)


@settings(max_examples=40, deadline=None)
@given(_scores, st.integers(0, 2**31 - 1))
def test_auroc_properties(raw, seed):
    rng = np.random.default_rng(seed)
    s = np.asarray(raw, dtype=float)
    y = (rng.random(s.size) < 0.5).astype(float)
    y[0], y[1] = 0.0, 1.0  # both classes present
    a = float(C.auroc(s, y))
    assert 0.0 <= a <= 1.0
    assert abs(a - skm.roc_auc_score(y, s)) <= TOL
    perm = rng.permutation(s.size)
    assert abs(float(C.auroc(s[perm], y[perm])) - a) <= TOL
    # strictly increasing transforms keep every tie and every order
    for f in (np.exp, lambda v: 3 * v - 7, lambda v: v**3 + v, np.arctan):
        assert abs(float(C.auroc(f(s), y)) - a) <= TOL
    # reversing the scores mirrors the AUROC
    assert abs(float(C.auroc(-s, y)) - (1 - a)) <= TOL
    ap = float(C.auprc(s, y))
    assert 0.0 < ap <= 1.0
    assert abs(ap - skm.average_precision_score(y, s)) <= TOL
    assert abs(float(C.auprc(s[perm], y[perm])) - ap) <= TOL


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 30), st.integers(1, 4), st.sampled_from([2, 5, 1000]))
def test_multilabel_with_unlabelled_matches_sklearn_per_label(seed, n, k, levels):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, levels, (n, k)).astype(float)
    y = (rng.random((n, k)) < 0.5).astype(float)
    y[rng.random((n, k)) < 0.2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per = C.auroc(s, y, average=None).numpy()
        aps = C.auprc(s, y, average=None).numpy()
        macro = float(C.auroc(s, y))
    refs = []
    for j in range(k):
        keep = ~np.isnan(y[:, j])
        yj, sj = y[keep, j], s[keep, j]
        if yj.size and 0 < yj.sum() < yj.size:
            refs.append(skm.roc_auc_score(yj, sj))
            assert abs(per[j] - refs[-1]) <= TOL
        else:
            assert np.isnan(per[j])
        if yj.sum() > 0:
            assert abs(aps[j] - skm.average_precision_score(yj, sj)) <= TOL
        else:
            assert np.isnan(aps[j])
    assert (np.isnan(macro) and not refs) or abs(macro - np.mean(refs)) <= TOL


def test_tensor_requiring_grad_and_integer_inputs():
    logits = torch.randn(50, 3, requires_grad=True)
    y = torch.randint(0, 2, (50, 3))
    ref = skm.roc_auc_score(y.numpy(), logits.detach().numpy(), average=None)
    np.testing.assert_allclose(C.auroc(logits, y, average=None).numpy(), ref, rtol=0, atol=TOL)
    hard = (logits.detach() > 0).int()
    assert abs(float(C.f1(hard, y, average="micro")) - skm.f1_score(y.numpy(), hard.numpy(), average="micro")) <= TOL
