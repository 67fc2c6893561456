"""FactCheXcker's ETT measurement protocol: the extraction rules of its extract-ETT prompt and
its metric columns, checked against the counts and figures it publishes
(tools/factchexcker_reference.py, rajpurkarlab/FactCheXcker c2e1025)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from medimg_bench.metrics.text.measurements import extract_ett, factchexcker_ett_scores

PUBLISHED = json.loads((Path(__file__).parent / "data/factchexcker_published.json").read_text())["rows"]


@pytest.mark.parametrize("text,present,dist,placement", [
    ("ETT tip 4.5 cm above the carina.", True, 4.5, None),
    ("The endotracheal tube terminates 2-3 cm above the carina, appropriately positioned.", True, 3.0, "correct"),
    ("ET tube ends 1. 5 cm below the carina, too low, recommend retraction.", True, -1.5, "too low"),
    ("Endotracheal tube tip is less than 2 cm from the carina.", True, 2.0, None),
    ("Endotracheal tube tip 25 mm from the carina.", True, 2.5, None),
    ("Endotracheal tube is unchanged in position.", True, None, "correct"),
    ("The patient has been extubated. Lungs are clear.", False, None, None),
    ("The endotracheal tube has been removed.", False, None, None),
    ("No pneumothorax. Heart size normal.", False, None, None),
])
def test_extraction_rules(text: str, present: bool, dist: float | None, placement: str | None) -> None:
    got = extract_ett(text)
    assert got["present"] is present
    assert got["distance_cm"] == (pytest.approx(dist) if dist is not None else None)
    assert got["placement"] == placement


def _counts(tp: int, fp: int, fn: int, tn: int) -> tuple[list[bool], list[bool]]:
    pred = [True] * tp + [True] * fp + [False] * fn + [False] * tn
    gt = [True] * tp + [False] * fp + [True] * fn + [False] * tn
    return pred, gt


def test_presence_columns_equal_published() -> None:
    for row in PUBLISHED:
        pred, gt = _counts(row["TP"], row["FP"], row["FN"], row["TN"])
        s = factchexcker_ett_scores(pred, gt, [None] * len(pred), [None] * len(pred))
        for ours, theirs in (("precision", "precision"), ("recall", "recall"), ("f1", "F1"), ("accuracy", "accuracy")):
            assert round(s[ours], 2) == pytest.approx(row[theirs], abs=0.0051), (row["model"], row["version"], ours)


def test_composites_equal_published_with_their_rounding() -> None:
    for row in PUBLISHED:
        pred, gt = _counts(row["TP"], row["FP"], row["FN"], row["TN"])
        n = len(pred)
        # one study measured on both sides with error = their (rounded) MAE
        pd, gd = [None] * n, [None] * n
        pd[0], gd[0] = 5.0 + row["MAE"], 5.0
        s = factchexcker_ett_scores(pred, gt, pd, gd, published_rounding=True)
        assert s["mae"] == row["MAE"]
        assert s["mae_f1"] == row["MAE_f1"], (row["model"], row["version"])
        assert s["precision_mae"] == pytest.approx(row["precision_MAE"], abs=0.011), (row["model"], row["version"])
        raw = factchexcker_ett_scores(pred, gt, pd, gd)
        assert raw["mae_f1"] == pytest.approx(raw["mae"] / raw["f1"])


def test_measurement_errors_over_studies_measured_on_both_sides() -> None:
    s = factchexcker_ett_scores([True, True, True, False], [True, True, False, True],
                                [4.0, 2.0, 5.0, None], [5.0, None, 3.0, 4.0])
    assert s["n_measured_both"] == 2 and s["mae"] == pytest.approx(1.5)
    assert s["rmse"] == pytest.approx(math.sqrt((1 + 4) / 2)) and s["mape"] == pytest.approx((1 / 5 + 2 / 3) / 2)
    assert s["mae_f1"] == pytest.approx(1.5 / s["f1"]) and s["tp"] == 2 and s["fp"] == 1 and s["fn"] == 1
    with pytest.raises(ValueError, match="one entry per study"):
        factchexcker_ett_scores([True], [True, False], [None], [None])
