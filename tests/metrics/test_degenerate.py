"""Empty / degenerate inputs over every registered classification metric: an undefined value is
NaN (or its named convention) with one warning per call naming the class, never a plausible
number; multi-class probabilities that do not sum to 1 are an error unless normalised."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics.calibration import expected_calibration_error
from medimg_bench.metrics.classification import sensitivity
from medimg_bench.registry import METRICS, create_metric

NAMES = ["atelectasis", "effusion", "nodule"]
SCORE_METRICS = sorted(n for n in METRICS.list() if getattr(METRICS.get(n), "input_kind", "") == "scores")


def _expected_undefined(name: str, s: np.ndarray, y: np.ndarray, j: int) -> bool:
    """Whether label ``j`` of metric ``name`` has a zero denominator on this data (defaults)."""
    col, hard = y[:, j], s[:, j] >= 0.5
    pos, neg = (col == 1).sum(), (col == 0).sum()
    if name in ("auroc", "sensitivity_at_specificity", "balanced_accuracy"):
        return pos == 0 or neg == 0
    if name in ("auprc", "sensitivity"):
        return pos == 0
    if name == "specificity":
        return neg == 0
    if name == "f1":
        return ((hard & (col == 1)).sum() + (hard & (col == 0)).sum() + (~hard & (col == 1)).sum()) == 0
    return False  # accuracy, ece: defined whenever a label has labelled samples


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(3, 30),
    degenerate=st.sampled_from(["no_positive", "no_negative", "all_tied"]),
    label=st.integers(0, 2),
    seed=st.integers(0, 10_000),
)
def test_undefined_labels_are_nan_with_one_warning_naming_the_class(n, degenerate, label, seed):
    rng = np.random.default_rng(seed)
    s = rng.random((n, 3)).round(2)
    y = (rng.random((n, 3)) < 0.5).astype(np.float64)
    y[0, :], y[1, :] = 1, 0  # other labels defined
    y[:, label] = {"no_positive": 0.0, "no_negative": 1.0, "all_tied": y[:, label]}[degenerate]
    if degenerate == "all_tied":
        s[:, label] = 0.5
    for name in SCORE_METRICS:
        metric = create_metric(name, class_names=NAMES) if name not in ("accuracy", "balanced_accuracy") \
            else create_metric(name, class_names=NAMES, average=None)
        metric.update(torch.from_numpy(s), torch.from_numpy(y))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = metric.compute().numpy()
        undefined = [j for j in range(3) if _expected_undefined(name, s, y, j)]
        messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        for j in range(3):
            if j in undefined:
                assert math.isnan(out[j]), f"{name}: label {NAMES[j]} should be NaN, got {out[j]}"
            else:
                assert 0.0 <= out[j] <= 1.0, f"{name}: label {NAMES[j]} = {out[j]}"
        if undefined:
            assert len(messages) == 1, f"{name}: expected one warning, got {messages}"
            assert all(NAMES[j] in messages[0] for j in undefined), messages[0]
        else:
            assert not messages, f"{name}: unexpected warning(s) {messages}"


def test_sensitivity_without_positives_warns_as_documented():
    s = torch.tensor([[0.9, 0.2], [0.1, 0.8], [0.4, 0.6]], dtype=torch.float64)
    y = torch.tensor([[0, 1], [0, 0], [0, 1]], dtype=torch.float64)
    with pytest.warns(UserWarning, match=r"sensitivity undefined \(no positive sample\) for label\(s\) \[0\]"):
        out = sensitivity(s, y, average=None)
    assert math.isnan(float(out[0])) and float(out[1]) == 0.5
    with pytest.warns(UserWarning, match=r"set to 0.0"):
        assert float(sensitivity(s, y, average=None, zero_division=0.0)[0]) == 0.0


def test_multiclass_ece_rejects_rows_not_summing_to_one():
    p = torch.tensor([[0.7, 0.2, 0.05], [0.1, 0.8, 0.1]], dtype=torch.float64)  # row 0 sums to 0.95
    y = torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"sum to 1 .*row\(s\) \[0\].*normalize=True"):
        expected_calibration_error(p, y)
    fixed = expected_calibration_error(p, y, normalize=True)
    assert float(fixed) == pytest.approx(float(expected_calibration_error(p / p.sum(1, keepdim=True), y)))
    within = p.clone()
    within[0, 2] = 0.0995  # sums to 0.9995: inside the 1e-3 tolerance
    expected_calibration_error(within, y)
    m = create_metric("ece", normalize=True)
    m.update(p, y)
    assert not math.isnan(float(m.compute()[0]))


def test_ece_without_labelled_samples_warns_naming_the_class():
    s = torch.rand(6, 2, dtype=torch.float64)
    y = torch.tensor([[1.0, float("nan")], [0.0, float("nan")]] * 3)
    m = create_metric("ece", class_names=["a", "b"])
    m.update(s, y)
    with pytest.warns(UserWarning, match=r"ece undefined .*\['b'\]"):
        out = m.compute()
    assert math.isnan(float(out[1])) and not math.isnan(float(out[0]))
