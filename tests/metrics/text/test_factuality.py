"""Factuality F1 variants on hand-computed cases and against scikit-learn's f1_score on the
same binarised labels; device measurement extraction and scores."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from medimg_bench.metrics import chexpert_f1, factuality_scores
from medimg_bench.metrics.text.chexpert_labeler import CHEXPERT_OBSERVATIONS
from medimg_bench.metrics.text.factuality import F1CHEXBERT_ORDER, ChexpertF1, binarize_labels
from medimg_bench.metrics.text.measurements import extract_measurements, measurement_scores

NAN = math.nan


def _frame(rows):
    return pd.DataFrame([{**dict.fromkeys(CHEXPERT_OBSERVATIONS, NAN), **r} for r in rows])


GEN = _frame([{"Pleural Effusion": 1.0, "Edema": -1.0}, {"Cardiomegaly": 1.0}, {"Atelectasis": 0.0}])
REF = _frame([{"Pleural Effusion": 1.0}, {"Cardiomegaly": 0.0, "Edema": 1.0}, {"Atelectasis": -1.0}])


def test_hand_computed_five_observations():
    # uncertain as positive: effusion TP; edema FP (row 0) and FN (row 1); cardiomegaly FP;
    # atelectasis FN (reference uncertain → positive).  micro: 2*1 / (2*1 + 2 + 2) = 1/3
    assert chexpert_f1(GEN, REF, observations="5", average="micro") == pytest.approx(1 / 3)
    per = chexpert_f1(GEN, REF, observations="5", average=None)
    # order of the 5: Cardiomegaly, Edema, Consolidation, Atelectasis, Pleural Effusion
    np.testing.assert_allclose(per, [0.0, 0.0, 0.0, 0.0, 1.0])
    assert chexpert_f1(GEN, REF, observations="5", average="macro") == pytest.approx(0.2)
    # uncertain as negative: edema and atelectasis drop out: TP 1, FP 1 (cardiomegaly), FN 1 (edema row 1)
    assert chexpert_f1(GEN, REF, observations="5", average="micro", uncertain="negative") == pytest.approx(0.5)


@pytest.mark.parametrize("uncertain", ["positive", "negative"])
@pytest.mark.parametrize("observations", ["5", "14"])
def test_equal_to_sklearn_on_binarised_labels(uncertain, observations):
    rng = np.random.default_rng(3)
    g = rng.choice([1.0, 0.0, -1.0, NAN], size=(60, 14), p=[0.2, 0.3, 0.1, 0.4])
    r = rng.choice([1.0, 0.0, -1.0, NAN], size=(60, 14), p=[0.2, 0.3, 0.1, 0.4])
    gf = pd.DataFrame(g, columns=list(CHEXPERT_OBSERVATIONS))
    rf = pd.DataFrame(r, columns=list(CHEXPERT_OBSERVATIONS))
    names = list(F1CHEXBERT_ORDER) if observations == "14" else ["Cardiomegaly", "Edema", "Consolidation", "Atelectasis", "Pleural Effusion"]
    yp = binarize_labels(gf[names].to_numpy(), uncertain=uncertain)
    yt = binarize_labels(rf[names].to_numpy(), uncertain=uncertain)
    for avg in ("micro", "macro"):
        ours = chexpert_f1(gf, rf, observations=observations, average=avg, uncertain=uncertain)
        assert ours == pytest.approx(f1_score(yt, yp, average=avg, zero_division=0), abs=1e-12)
    np.testing.assert_allclose(
        chexpert_f1(gf, rf, observations=observations, average=None, uncertain=uncertain),
        f1_score(yt, yp, average=None, zero_division=0), atol=1e-12)


def test_stateful_metric_equals_functional_and_named_variants():
    gen = ["Small left effusion. No pneumothorax.", "Cardiomegaly.", ""]
    ref = ["Left pleural effusion.", "No cardiomegaly. Mild edema.", "Possible atelectasis."]
    m = ChexpertF1(observations="5", average="micro")
    m.update(gen[:2], ref[:2], ids=["a", "b"])
    m.update(gen[2:], ref[2:], ids=["c"])
    scores = factuality_scores(gen, ref)
    assert float(m.compute()[0]) == pytest.approx(scores["chexpert_5_micro_f1"])
    assert set(scores) == {"chexpert_5_micro_f1", "chexpert_5_macro_f1", "chexpert_14_micro_f1", "chexpert_14_macro_f1"}
    with pytest.raises(ValueError, match="observations must be"):
        ChexpertF1(observations="13")
    with pytest.raises(ValueError, match="uncertain must be"):
        ChexpertF1(uncertain="maybe")


def test_measurements_extracted_with_units_and_matched():
    found = extract_measurements("ETT tip 4.5 cm above the carina. Right PICC tip 20 mm above the cavoatrial junction.")
    assert found == [
        {"device": "endotracheal tube", "value_cm": 4.5, "relation": "above", "landmark": "carina"},
        {"device": "central line", "value_cm": 2.0, "relation": "above", "landmark": "cavoatrial junction"},
    ]
    assert extract_measurements("Lungs are clear. 3 cm nodule.") == []  # no device named before it
    s = measurement_scores(
        ["ET tube tip 3 cm above the carina.", "No devices."],
        ["Endotracheal tube terminates 4.5 cm above the carina. Enteric tube 10 cm below the diaphragm.", "PICC tip 2 cm above the cavoatrial junction."],
    )
    assert s["presence_precision"] == 1.0 and s["presence_recall"] == pytest.approx(1 / 3)
    assert s["mean_abs_error_cm"] == pytest.approx(1.5)
    empty = measurement_scores([""], [""])
    assert math.isnan(empty["presence_precision"]) and math.isnan(empty["mean_abs_error_cm"])


def test_paired_comparison_of_two_models_on_the_same_studies():
    from medimg_bench.metrics import compare_reports

    refs = ["Small left pleural effusion.", "Mild cardiomegaly.", "Mild pulmonary edema.",
            "Bibasilar atelectasis.", "No effusion.", "Right lower lobe consolidation."] * 4
    good = list(refs)
    bad = ["No acute process."] * len(refs)
    groups = [f"p{i // 2}" for i in range(len(refs))]
    res = compare_reports(good, bad, refs, metric="chexpert_5_micro_f1", groups=groups, n_resamples=200)
    assert res.difference == pytest.approx(1.0) and res.p_value < 0.05
    same = compare_reports(good, good, refs, metric="bleu4", n_resamples=50)
    assert same.difference == 0.0 and same.p_value > 0.5
