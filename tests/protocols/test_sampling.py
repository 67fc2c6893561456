"""Few-shot and label-fraction draws: patient-disjoint, seed-reproducible, clear errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.protocols.sampling import (
    few_shot_indices,
    fraction_indices,
    positives,
    split_patients,
)

CLASSES = ["a", "b", "c"]


@st.composite
def cohorts(draw):
    n_pat = draw(st.integers(12, 40))
    per = draw(st.lists(st.integers(1, 4), min_size=n_pat, max_size=n_pat))
    patients = [f"p{i}" for i, m in enumerate(per) for _ in range(m)]
    labels = np.asarray(draw(st.lists(st.integers(0, 2), min_size=len(patients), max_size=len(patients))))
    return labels, patients


@settings(max_examples=25, deadline=None)
@given(cohorts(), st.integers(0, 10_000), st.integers(1, 3))
def test_few_shot_is_patient_disjoint_and_reproducible(cohort, seed, k):
    labels, patients = cohort
    try:
        idx = few_shot_indices(labels, patients, k=k, classes=CLASSES, seed=seed)
    except ValueError as exc:
        assert "few-shot: class" in str(exc) and f"k={k}" in str(exc)
        return
    assert len(idx) == k * len(CLASSES)
    chosen = [patients[i] for i in idx]
    assert len(set(chosen)) == len(chosen)  # one sample per patient, no patient twice
    assert np.bincount(labels[idx], minlength=3).tolist() == [k] * 3
    assert np.array_equal(idx, few_shot_indices(labels, patients, k=k, classes=CLASSES, seed=seed))


@settings(max_examples=25, deadline=None)
@given(cohorts(), st.integers(0, 10_000), st.sampled_from([0.1, 0.3, 0.5, 1.0]))
def test_fraction_keeps_whole_patients_and_is_reproducible(cohort, seed, fraction):
    labels, patients = cohort
    try:
        idx = fraction_indices(labels, patients, fraction=fraction, classes=CLASSES, seed=seed)
    except ValueError as exc:
        assert "leaves class(es)" in str(exc)
        return
    drawn = {patients[i] for i in idx}
    assert set(idx) == {i for i, p in enumerate(patients) if p in drawn}  # all of a patient or none
    assert np.array_equal(idx, fraction_indices(labels, patients, fraction=fraction, classes=CLASSES, seed=seed))
    assert len(drawn) == max(1, round(fraction * len(set(patients))))


def test_few_shot_error_names_class_and_count():
    labels = np.array([0, 0, 0, 1, 1, 2])
    patients = ["p0", "p1", "p2", "p3", "p4", "p5"]
    with pytest.raises(ValueError, match=r"class 'c' has 1 sample\(s\) from 1 patient"):
        few_shot_indices(labels, patients, k=2, classes=CLASSES, seed=0)


def test_fraction_error_names_the_empty_class():
    labels = np.array([0] * 18 + [1, 2])
    patients = [f"p{i}" for i in range(20)]
    with pytest.raises(ValueError, match=r"leaves class\(es\) \[.*'b'.*\] with no sample"):
        for seed in range(50):  # some seed misses the single 'b' patient
            fraction_indices(labels, patients, fraction=0.1, classes=CLASSES, seed=seed)


def test_multilabel_positives_and_validation_split():
    y = np.array([[1, 0], [np.nan, 1], [0, 0]])
    assert positives(y, 2).tolist() == [[True, False], [False, True], [False, False]]
    rest, held = split_patients(["a", "a", "b", "c", "d"], fraction=0.25, seed=0)
    pats = np.array(["a", "a", "b", "c", "d"])
    assert not set(pats[rest]) & set(pats[held]) and len(set(pats[held])) == 1
