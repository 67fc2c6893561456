"""Per-category VQA accuracy with a bootstrap CI clustered by patient (image): present for each
category, and equal to a plain loop over clustered resamples on a small case."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from medimg_bench.engine.subgroups import (
    GroupLabels,
    subgroup_labels,
    subgroup_summary,
    subgroup_table,
)
from medimg_bench.metrics.text.vqa_metrics import VQAScores


def _case():
    rng = np.random.default_rng(3)
    ids = [f"q{i:02d}" for i in range(14)]
    patients = {sid: f"img{k}" for sid, k in zip(ids, [0, 0, 0, 1, 1, 2, 3, 3, 4, 5, 5, 5, 6, 6])}
    category = {sid: ("plane" if i % 3 == 0 else "organ") for i, sid in enumerate(ids)}
    correct = rng.integers(0, 2, len(ids)).astype(float)
    metric = VQAScores()
    metric.update([{"correct": c, "unparsed": 0.0} for c in correct], ["closed"] * len(ids), ids=ids)
    return ids, patients, category, correct, metric


def _plain_loop(x, clusters, n_resamples, seed, confidence=0.95):
    names = sorted(set(clusters))  # the bootstrap numbers clusters in sorted order
    cl = np.array([names.index(c) for c in clusters])
    draws = np.random.default_rng(seed).integers(0, len(names), size=(n_resamples, len(names)))
    values = []
    for row in draws:
        picked = np.concatenate([np.flatnonzero(cl == c) for c in row])  # whole clusters, with repeats
        values.append(x[picked].mean())
    alpha = (1 - confidence) / 2
    return np.quantile(values, alpha), np.quantile(values, 1 - alpha)


def test_per_category_ci_equals_a_plain_loop_of_clustered_resamples():
    ids, patients, category, correct, metric = _case()
    out = subgroup_summary({"vqa": metric}, GroupLabels(category, patients), n_resamples=300, seed=7)
    per_group = out["accuracy"]["per_group"]
    assert set(per_group) == {"plane", "organ"}
    for group, entry in per_group.items():
        idx = [i for i, sid in enumerate(ids) if category[sid] == group]
        low, high = _plain_loop(correct[idx], [patients[ids[i]] for i in idx], 300, 7)
        assert entry["value"] == pytest.approx(correct[idx].mean(), abs=1e-6)
        assert entry["ci_low"] == pytest.approx(low, abs=1e-6)
        assert entry["ci_high"] == pytest.approx(high, abs=1e-6)
        assert entry["ci_low"] <= entry["value"] <= entry["ci_high"]
    assert out["accuracy"]["confidence"] == 0.95
    # clustering matters: resampling questions instead of images gives another interval
    unclustered = subgroup_summary({"vqa": metric}, GroupLabels(category, {}), n_resamples=300, seed=7)
    assert unclustered["accuracy"]["per_group"]["organ"]["ci_low"] != per_group["organ"]["ci_low"] or \
        unclustered["accuracy"]["per_group"]["organ"]["ci_high"] != per_group["organ"]["ci_high"]


def test_labels_from_the_manifest_carry_patients_and_small_groups_have_no_ci():
    ids, patients, category, correct, metric = _case()
    manifest = pd.DataFrame({"id": ids, "patient_id": [patients[i] for i in ids],
                             "question_type": [category[i] for i in ids]})
    manifest.loc[0, "question_type"] = "single"
    labels = subgroup_labels(manifest, "question_type")
    assert labels.patients == patients
    out = subgroup_summary({"vqa": metric}, labels, n_resamples=50)
    single = out["accuracy"]["per_group"]["single"]
    assert single["value"] is None and single["ci_low"] is None and single["ci_high"] is None
    table = subgroup_table({"subgroups": {"question_type": out}})
    acc = table[table["metric"] == "accuracy"].set_index("group")
    assert set(acc.index) == {"single", "plane", "organ"}
    assert acc.loc["organ", "ci_low"] == out["accuracy"]["per_group"]["organ"]["ci_low"]


def test_one_image_in_a_category_gives_a_value_without_interval():
    ids = ["a", "b", "c", "d"]
    metric = VQAScores()
    metric.update([{"correct": c, "unparsed": 0.0} for c in (1.0, 0.0, 1.0, 1.0)], ["closed"] * 4, ids=ids)
    labels = GroupLabels({"a": "x", "b": "x", "c": "y", "d": "y"}, {"a": "i1", "b": "i1", "c": "i2", "d": "i3"})
    out = subgroup_summary({"vqa": metric}, labels, n_resamples=50)
    x = out["accuracy"]["per_group"]["x"]
    assert x["value"] == 0.5 and x["ci_low"] is None and "1 patient" in x["note"]
    assert out["accuracy"]["per_group"]["y"]["ci_low"] is not None
