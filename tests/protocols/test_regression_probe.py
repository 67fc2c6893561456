"""protocol=regression_probe: equal to HEST-Benchmark's own fold loop (fixture from
tools/hest_bench_reference.py, HEST commit afd42c31) and end to end on a HEST-Benchmark folder."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import pearsonr

from medimg_bench.protocols.regression import hest_ridge_probe, merge_folds, pearson_per_gene
from tests.datasets.test_pathology_hest1k import FIXTURE, fixture_inputs, make_hest_bench


def _fold_arrays(inp: dict, samples: list[str]) -> tuple[np.ndarray, np.ndarray]:
    cols = [inp["all_genes"].index(g) for g in inp["genes"]]
    x = np.concatenate([inp["samples"][s]["embeddings"] for s in samples])
    y = np.concatenate([np.log1p(inp["samples"][s]["counts"][:, cols].astype(np.float64)) for s in samples])
    return x, y


@pytest.mark.fixture_compare
@pytest.mark.parametrize("setting,pca_dim", [("pca8", 8), ("none", None)])
def test_equals_hest_benchmark(setting, pca_dim):
    z = np.load(FIXTURE)
    inp = fixture_inputs()
    groups = inp["groups"]
    per_fold = []
    for i, test in enumerate(groups):
        train = [s for j, g in enumerate(groups) if j != i for s in g]
        (xtr, ytr), (xte, yte) = _fold_arrays(inp, train), _fold_arrays(inp, test)
        r = pearson_per_gene(yte, hest_ridge_probe(xtr, ytr, xte, pca_dim=pca_dim, seed=1))
        per_fold.append(r)
    # the ridge solve runs on float32 embeddings, whose sums the CPU's vector width orders: the
    # fixture's machine and an AVX-512 one differ by up to 2.7e-5 in a fold's Pearson r (3.3e-6
    # after PCA to 8 dimensions); the fixture's machine agreed to 2e-6
    np.testing.assert_allclose(np.array(per_fold), z[f"out.{setting}.fold_gene"], rtol=0, atol=5e-5)
    merged = merge_folds(per_fold, inp["genes"])
    assert merged["pearson_mean"] == pytest.approx(float(z[f"out.{setting}.pearson_mean"]), abs=5e-5)
    assert merged["pearson_std"] == pytest.approx(float(z[f"out.{setting}.pearson_std"]), abs=5e-5)
    np.testing.assert_allclose([merged["per_gene"][g][0] for g in inp["genes"]], z[f"out.{setting}.gene_mean"],
                               atol=5e-5)


def test_pearson_per_gene_equals_scipy():
    rng = np.random.default_rng(0)
    t = rng.normal(size=(40, 6))
    p = t * rng.normal(size=6) + rng.normal(size=(40, 6))
    t[:, 5] = 1.0  # a constant gene: undefined, NaN as scipy gives it
    got = pearson_per_gene(t, p)
    for j in range(5):
        assert got[j] == pytest.approx(pearsonr(t[:, j], p[:, j])[0], abs=1e-12)
    assert np.isnan(got[5])
    with pytest.raises(ValueError, match="same shape|one shape"):
        pearson_per_gene(t, p[:, :3])


def test_pca_larger_than_data_is_an_error():
    with pytest.raises(ValueError, match="pca_dim=256 exceeds"):
        hest_ridge_probe(np.zeros((10, 4)), np.zeros((10, 2)), np.zeros((3, 4)))


def test_regression_probe_run_on_a_hest_bench_folder(tmp_path, monkeypatch):
    from medimg_bench.protocols import run_protocol
    from medimg_bench.runs import compose_config

    root = tmp_path / "bench" / "IDC"
    inp = make_hest_bench(root)
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    over = ["protocol=regression_probe", "dataset=hest1k", f"dataset.root={root.parent}",
            "dataset.options.task=IDC", "model=timm_resnet10t", "protocol.options.pca_dim=8", "seed=1",
            "progress=false"]
    res = run_protocol(compose_config(over), tmp_path / "run")
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    m = s["metrics"]["pearson"]
    assert list(m["per_class"]) == inp["genes"] and m["mean"]["n_folds"] == 3
    samples = res.samples
    assert sorted(set(samples["fold"])) == [0, 1, 2] and len(samples) == len(set(samples["id"]))
    per_fold = [pearson_per_gene(np.stack(g["target"].to_list()), np.stack(g["pred"].to_list()))
                for _, g in samples.groupby("fold")]
    merged = merge_folds(per_fold, inp["genes"])
    assert m["mean"]["value"] == pytest.approx(merged["pearson_mean"], abs=1e-5)
    assert m["mean"]["std"] == pytest.approx(merged["pearson_std"], abs=1e-5)
    # targets are the log1p counts of the gene list at each spot
    cols = [inp["all_genes"].index(g) for g in inp["genes"]]
    row = samples[samples["id"] == "S3/" + str(inp["samples"]["S3"]["barcodes"][4])].iloc[0]
    np.testing.assert_allclose(row["target"], np.log1p(inp["samples"]["S3"]["counts"][4, cols]), rtol=1e-6)
    assert s["protocol"]["embeddings"]["all"]["n"] == len(samples)
    assert s["n_excluded"] == 0 and s["exclusions"] == []  # the dataset's exclusions are counted (none here)
