"""Protocol runs end to end on synthetic data with tiny models, and the seed table."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from medimg_bench.protocols import aggregate_seeds, run_protocol, write_seed_table
from medimg_bench.runs import compose_config

FAST = ["dataset.options.n=48", "dataset.options.size=32", "bootstrap.n_resamples=20", "progress=false"]


@pytest.fixture()
def cache_env(monkeypatch, synthetic_root):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(synthetic_root / "cache"))


def test_linear_probe_run_writes_engine_summary_and_per_seed(tmp_path, cache_env):
    cfg = compose_config(["protocol=linear_probe", "protocol.seeds=[0,1]", "protocol.options.max_steps=100",
                          *FAST])
    res = run_protocol(cfg, tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    auroc = summary["metrics"]["auroc"]
    assert auroc["mean"]["n_seeds"] == 2 and auroc["mean"]["std"] is not None
    assert set(summary["protocol"]["per_seed"]) == {"0", "1"}
    for s in (0, 1):
        seed_summary = json.loads((tmp_path / "run" / "seeds" / str(s) / "summary.json").read_text())
        assert seed_summary["metrics"]["auroc"]["mean"]["ci_low"] is not None
    assert summary["protocol"]["embeddings"]["test"]["n"] == res.summary["n_samples"]
    assert (tmp_path / "run" / "manifest.json").exists() and (tmp_path / "run" / "samples.parquet").exists()


def test_few_shot_and_fine_tune_and_zero_shot_run(tmp_path, cache_env):
    few = run_protocol(compose_config(["protocol=few_shot", "protocol.options.k=2", "protocol.options.max_steps=50",
                                       *FAST]), tmp_path / "few")
    ids = few.summary["protocol"]["info"]["0"]["train_ids"]
    assert len(ids) == 6  # 2 per class x 3 findings
    with pytest.raises(ValueError, match="few-shot: class"):
        run_protocol(compose_config(["protocol=few_shot", "protocol.options.k=40", *FAST]), tmp_path / "few40")
    ft = run_protocol(compose_config(["protocol=fine_tune", "protocol.options.max_steps=6",
                                      "protocol.options.val_every=3", "protocol.options.label_fraction=0.5",
                                      *FAST]), tmp_path / "ft")
    info = ft.summary["protocol"]["info"]["0"]
    assert info["steps"] <= 6 and info["best_step"] in (3, 6) and info["n_train"] < 40
    assert (tmp_path / "ft" / "seeds" / "0" / "model.safetensors").exists()
    zs = run_protocol(compose_config(["protocol=zero_shot", "model=clip_tiny", *FAST]), tmp_path / "zs")
    assert 0.0 <= zs.summary["metrics"]["auroc"]["mean"]["value"] <= 1.0


def test_cli_sweep_two_protocols_three_seeds_one_table(tmp_path, synthetic_root):
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "medimg_bench.cli", "run", "-m", "protocol=linear_probe,knn", "seed=0,1,2",
           "model=timm_resnet10t", "++protocol.options.max_steps=60", f"output_dir={out}",
           "hydra.sweep.dir=" + str(out / "sweep"), *FAST]
    env = {**__import__("os").environ, "MEDIMG_BENCH_CACHE": str(synthetic_root / "cache")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = write_seed_table(out / "sweep")
    table = pd.read_parquet(out / "sweep" / "seeds.parquet")
    assert set(table["protocol"]) == {"linear_probe", "knn"}
    assert (table["n_seeds"] == 3).all() and (table["seeds"] == "0,1,2").all()
    assert len(table) == 2 * 5  # two protocols x five metrics
    assert "linear_probe" in md.read_text()
    direct = aggregate_seeds(sorted((out / "sweep").glob("[0-9]*")))
    assert len(direct) == len(table)


def test_fine_tune_run_resumes_to_the_same_result(tmp_path, cache_env, monkeypatch):
    from medimg_bench.tasks.classification import ClassificationTask

    over = ["protocol=fine_tune", "protocol.options.max_steps=8", "protocol.options.val_every=2",
            "protocol.options.checkpoint_every=2", "protocol.options.batch_size=8", "protocol.options.amp=false",
            *FAST]
    full = run_protocol(compose_config(over), tmp_path / "full")
    real, calls = ClassificationTask.loss, {"n": 0}

    def killed_at_step_6(self, logits, batch):
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt("simulated kill")
        return real(self, logits, batch)

    monkeypatch.setattr(ClassificationTask, "loss", killed_at_step_6)
    with pytest.raises(KeyboardInterrupt):
        run_protocol(compose_config(over), tmp_path / "cut")
    monkeypatch.setattr(ClassificationTask, "loss", real)
    assert (tmp_path / "cut" / "seeds" / "0" / "train" / "train_state.pt").exists()
    assert not (tmp_path / "cut" / "summary.json").exists()
    resumed = run_protocol(compose_config([*over, f"resume={tmp_path / 'cut'}"]), tmp_path / "cut")
    assert resumed.summary["metrics"] == full.summary["metrics"]
    assert resumed.summary["protocol"]["info"]["0"]["best_step"] == full.summary["protocol"]["info"]["0"]["best_step"]


def test_a_probe_counts_the_test_sets_exclusions(tmp_path, monkeypatch):
    """Issue #35 item 4: the test set's items that are not samples (a slide without tissue,
    reference.csv's slide absent from disk) are counted in a probe's summary.json too."""
    import numpy as np

    from tests.datasets.test_pathology_camelyon16 import _write_slide, make_camelyon16

    pytest.importorskip("tiffslide")
    root = make_camelyon16(tmp_path / "c16")
    _write_slide(root / "testing" / "images" / "test_004.tif", np.full((512, 512, 3), 235, np.uint8), 0.25)
    with open(root / "testing" / "reference.csv", "a") as f:
        f.write("test_004,Normal,\n")
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    cfg = compose_config(["protocol=linear_probe", "dataset=camelyon16", f"dataset.root={root}",
                          "protocol.val_split=val", "dataset.options.mpp=1.0", "dataset.options.tile_size=32",
                          "dataset.options.thumbnail_size=128", "model=timm_resnet10t", "task.options.multilabel=false",
                          "protocol.options.max_steps=5", "bootstrap.n_resamples=10", "progress=false",
                          "protocol.seeds=[0]"])
    run_protocol(cfg, tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_excluded"] == 2
    assert {e["id"] for e in summary["exclusions"]} == {"test_004", "test_049"}
