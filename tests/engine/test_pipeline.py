"""Config-driven runs through the Python API: training weights are kept and a run resumes."""

import json

from medimg_bench.engine.pipeline import run

TINY = [
    "dataset.options.n=12", "dataset.options.size=16", "progress=false", "bootstrap.n_resamples=20",
    "train.enabled=true", "train.max_steps=3", "batch_size=4", "train.batch_size=4",
]


def test_resume_reuses_trained_weights_and_gives_the_same_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    first = run([*TINY, f"output_dir={tmp_path}"], run_dir=tmp_path / "run")
    run_dir = tmp_path / "run"
    assert (run_dir / "model.safetensors").exists() and not (run_dir / "checkpoint.pt").exists()
    assert first.manifest["training"]["steps"] == 3
    again = run([*TINY, f"resume={run_dir}"])
    assert again.run_dir == run_dir
    assert again.manifest["training"] == {"resumed_from": str(run_dir / "model.safetensors")}
    assert again.summary["metrics"] == first.summary["metrics"]
    saved = json.loads((run_dir / "summary.json").read_text())
    assert saved["metrics"]["auroc"]["mean"] == first.summary["metrics"]["auroc"]["mean"]
