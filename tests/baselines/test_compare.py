"""medimg-bench compare: paired tests of two runs on the same samples."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.baselines.compare import cli_main, compare_runs
from medimg_bench.metrics.paired import holm, mcnemar_test


def _run(tmp_path, name, ds, scores):
    table = pd.DataFrame({"id": ds.ids, **{c: scores[:, j] for j, c in enumerate(ds.classes)}})
    folder = tmp_path / f"pred_{name}"
    folder.mkdir()
    table.to_csv(folder / "predictions.csv", index=False)
    model = mb.create_model("predictions", root=folder, num_classes=len(ds.classes))
    res = mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=20)
    res.save(tmp_path / name)
    return tmp_path / name


@pytest.fixture()
def runs(tmp_path):
    ds = mb.create_dataset("synthetic_cxr", root=tmp_path / "cxr", split="test", n=80, size=16)
    y = ds.manifest[list(ds.classes)].to_numpy(float)
    rng = np.random.default_rng(0)
    good = np.clip(y * 0.6 + rng.random(y.shape) * 0.4, 0, 1)
    bad = rng.random(y.shape)
    return ds, _run(tmp_path, "good", ds, good), _run(tmp_path, "bad", ds, bad), _run(tmp_path, "good2", ds, good)


def test_known_difference_and_none(runs, capsys):
    ds, good, bad, good2 = runs
    rows = compare_runs(good, bad, n_resamples=200, holm_correction=True)
    auc = [r for r in rows if r["metric"] == "auroc"]
    assert len(auc) == len(ds.classes)
    assert all(r["difference"] > 0.2 and r["p_value"] < 0.01 and r["ci_low"] > 0 for r in auc)
    assert all(r["p_holm"] >= r["p_value"] for r in rows)
    same = compare_runs(good, good2, n_resamples=100)
    assert all(r["difference"] == 0 and r["p_value"] > 0.5 for r in same)
    assert cli_main([str(good), str(bad), "--n-resamples", "50", "--out", str(good / "cmp.json")]) == 0
    assert "auroc" in capsys.readouterr().out and json.loads((good / "cmp.json").read_text())


def test_different_sample_sets_refused_unless_intersection(runs, tmp_path):
    ds, good, bad, _ = runs
    samples = pd.read_parquet(bad / "samples.parquet")
    samples[samples["id"] != ds.ids[0]].to_parquet(bad / "samples.parquet")
    with pytest.raises(ValueError, match="different samples: 1 only in"):
        compare_runs(good, bad, n_resamples=20)
    assert compare_runs(good, bad, n_resamples=20, intersection=True)
    assert cli_main([str(good), str(bad)]) == 2


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
