"""medimg-bench compare: paired tests of two runs on the same samples, each run scored against
its own labels (issue #19 items 4 and 12)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medimg_bench.baselines.compare import LabelMismatchError, cli_main, compare_runs
from medimg_bench.metrics.paired import holm, mcnemar_test
from tests.baselines import _compare_runs as R


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp")
    ds = R.classification_dataset(root)
    good = R.classification_run(root, "good", ds, quality=0.5)
    bad = R.classification_run(root, "bad", ds, quality=0.0, seed=1)
    good2 = R.classification_run(root, "good2", ds, quality=0.5)
    return ds, good, bad, good2


def _auroc(run, cname):
    return json.loads((run / "summary.json").read_text())["metrics"]["auroc"]["per_class"][cname]["value"]


def test_known_difference_and_none(runs, capsys):
    ds, good, bad, good2 = runs
    rows = compare_runs(good, bad, n_resamples=200, holm_correction=True)
    auc = [r for r in rows if r["metric"] == "auroc" and r["class"] != "macro"]
    assert len(auc) == len(ds.classes)
    assert all(r["difference"] > 0.2 and r["p_value"] < 0.01 and r["ci_low"] > 0 for r in auc)
    assert all(r["estimate_a"] == pytest.approx(_auroc(good, r["class"]), abs=1e-6) for r in auc)
    assert all(r["p_holm"] >= r["p_value"] for r in rows)
    assert rows.labels["differ"] == 0 and rows.labels["checked"] == ["label", "patient_id"]
    assert any("auprc" in n for n in rows.notes)  # a dataset-level metric compare does not recompute
    same = compare_runs(good, good2, n_resamples=100)
    assert all(r["difference"] == 0 and r["p_value"] > 0.5 for r in same)
    assert cli_main([str(good), str(bad), "--n-resamples", "50", "--out", str(good / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert "auroc" in out and "labels (label, patient_id): identical" in out
    assert json.loads((good / "cmp.json").read_text())[0]["metric"]  # a list of rows (report --paired)


def test_run_b_is_scored_against_its_own_labels(runs, tmp_path, capsys):
    """Issue #19 item 4: run B — the same scores, half the effusion labels flipped — had its own
    summary AUROC ≈ 0.48 but compare reported 1.000, difference 0, p = 1 (it read A's labels)."""
    ds, good, _, _ = runs
    flipped = R.classification_run(tmp_path, "flipped", R.classification_relabel(ds), quality=0.5, scores_from=ds)
    own = _auroc(flipped, "effusion")
    assert own < 0.7 and _auroc(good, "effusion") > 0.9  # the runs' own summaries
    with pytest.raises(LabelMismatchError, match=r"labels differ in \d+ of \d+ rows \(label: \d+\).*effusion label"):
        compare_runs(good, flipped, n_resamples=50)
    assert cli_main([str(good), str(flipped)]) == 2
    assert "--allow-label-mismatch" in capsys.readouterr().err
    rows = compare_runs(good, flipped, n_resamples=200, allow_label_mismatch=True)
    eff = next(r for r in rows if r["metric"] == "auroc" and r["class"] == "effusion")
    assert eff["estimate_b"] == pytest.approx(own, abs=1e-6)  # B against B's labels
    assert eff["estimate_a"] == pytest.approx(_auroc(good, "effusion"), abs=1e-6)
    assert eff["difference"] > 0.2 and eff["p_value"] < 0.05 and "own labels" in eff["test"]
    nod = next(r for r in rows if r["metric"] == "auroc" and r["class"] == "nodule")
    assert nod["difference"] == 0  # untouched labels, same scores
    assert rows.labels["differ"] > 0 and any("labels differ" in n for n in rows.notes)


def test_per_sample_metric_runs_compare(tmp_path):
    """Issue #19 item 12: compare on runs with per-sample metrics exited with ``TypeError:
    <lambda>() missing 1 required positional argument: 't'``."""
    ds = R.segmentation_dataset(tmp_path)
    a = R.segmentation_run(tmp_path, "a", ds, quality=0.95)
    b = R.segmentation_run(tmp_path, "b", ds, quality=0.6, seed=1)
    rows = compare_runs(a, b, n_resamples=100)
    summary = json.loads((a / "summary.json").read_text())["metrics"]
    dice = [r for r in rows if r["metric"] == "dice"]
    assert len(dice) == 4 and all(r["difference"] > 0 for r in dice)
    for r in dice:
        assert r["estimate_a"] == pytest.approx(summary["dice"]["per_class"][r["class"]]["mean"], abs=1e-6)
        assert "Wilcoxon" in r["test"] and 0 < r["p_paired"] <= 1
    assert {r["metric"] for r in rows} == {"dice", "hd95", "nsd"}


def test_different_sample_sets_refused_unless_intersection(runs, tmp_path):
    ds, good, _, _ = runs
    cut = R.classification_run(tmp_path, "cut", ds, quality=0.0, seed=1, drop=(ds.ids[0],))  # one failed sample
    with pytest.raises(ValueError, match="different samples: 1 only in"):
        compare_runs(good, cut, n_resamples=20)
    rows = compare_runs(good, cut, n_resamples=20, intersection=True)
    assert rows and any("1 sample(s) of run A left out" in n for n in rows.notes)
    assert cli_main([str(good), str(cut)]) == 2


def test_mcnemar_and_holm_by_hand():
    from scipy.stats import binomtest

    a = np.array([1, 1, 1, 1, 1, 0, 1, 0, 1, 1], bool)
    b = np.array([0, 0, 1, 0, 1, 0, 1, 0, 0, 1], bool)
    m = mcnemar_test(a, b)  # a right & b wrong: 4; a wrong & b right: 0
    assert (m["b"], m["c"]) == (4.0, 0.0)
    assert m["p_value"] == pytest.approx(binomtest(4, 4, 0.5).pvalue) == pytest.approx(0.125)
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_mcnemar_equals_statsmodels():
    sm = pytest.importorskip("statsmodels.stats.contingency_tables")
    rng = np.random.default_rng(1)
    a, b = rng.random(60) < 0.7, rng.random(60) < 0.5
    table = [[int((a & b).sum()), int((a & ~b).sum())], [int((~a & b).sum()), int((~a & ~b).sum())]]
    assert mcnemar_test(a, b)["p_value"] == pytest.approx(sm.mcnemar(table, exact=True).pvalue)


def test_wilcoxon_beside_the_bootstrap_equals_scipy_on_patient_means():
    from scipy.stats import wilcoxon

    from medimg_bench.baselines.compare import _paired_test

    rng = np.random.default_rng(0)
    va, vb = rng.random(30), rng.random(30)
    g = np.repeat(np.arange(10), 3).astype(str)
    p, name = _paired_test(va, vb, g)
    d = (va - vb).reshape(10, 3).mean(1)
    assert p == pytest.approx(wilcoxon(d).pvalue) and "Wilcoxon" in name
    ones = (rng.random(30) < 0.5).astype(float)
    p01, name01 = _paired_test(ones, 1 - ones, g)
    assert "McNemar" in name01 and p01 == pytest.approx(mcnemar_test(ones == 1, ones == 0)["p_value"])
