"""The command line as a user runs it: Hydra's own files hold no secret, failed commands leave no
folder, impossible SLURM requests are refused before submission, and the submitit launcher runs
two jobs in parallel, gathered by `medimg-bench sweep`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

TINY = ["dataset.options.n=12", "dataset.options.size=16", "model.options.model_name=resnet10t",
        "bootstrap.n_resamples=10", "progress=false", "batch_size=8"]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "medimg_bench.cli", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def _all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_secrets_stay_out_of_hydra_files_and_failed_runs_leave_no_folder(tmp_path):
    out = _cli(tmp_path, "run", f"output_dir={tmp_path}/runs", *TINY, "+api_key=sk-test-123",
               "+train.auth_token=tok-test-456")
    assert out.returncode == 0, out.stderr
    files = _all_files(tmp_path / "runs")
    assert any(p.parent.name == ".hydra" for p in files)
    for p in files:
        data = p.read_bytes()
        assert b"sk-test-123" not in data and b"tok-test-456" not in data, p
    # a command that fails before running leaves nothing behind
    bad = _cli(tmp_path, "run", f"output_dir={tmp_path}/bad", *TINY, f"resume={tmp_path}/nowhere")
    assert bad.returncode != 0 and "nothing to resume" in bad.stderr
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").iterdir())


def test_impossible_slurm_request_is_refused_before_submission(tmp_path):
    out = _cli(tmp_path, "run", "-m", "hydra/launcher=slurm", "device=cuda", "hydra.launcher.gpus_per_task=0",
               f"output_dir={tmp_path}/runs", "seed=1,2")
    assert out.returncode == 2
    assert "0 GPUs" in out.stderr and "gpus_per_task" in out.stderr
    assert not (tmp_path / "runs").exists()  # nothing was submitted


@pytest.mark.slow
def test_local_submitit_launcher_runs_two_jobs_and_sweep_gathers_them(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    out = _cli(tmp_path, "run", "-m", "hydra/launcher=local", f"output_dir={tmp_path}/runs", *TINY,
               "seed=1,2")
    assert out.returncode == 0, out.stderr + out.stdout
    manifests = sorted((tmp_path / "runs").rglob("manifest.json"))
    assert len(manifests) == 2
    pids = {json.loads(m.read_text())["environment"].get("pid") for m in manifests}
    assert len(pids) == 2 and None not in pids  # two separate job processes...
    started = [(m.parent / ".hydra" / "config.yaml").stat().st_mtime for m in manifests]
    ended = [m.stat().st_mtime for m in manifests]
    assert max(started) < min(ended)  # ...that ran at the same time
    sweep_dir = manifests[0].parent.parent
    assert (sweep_dir / ".submitit").is_dir()
    res = _cli(tmp_path, "sweep", str(sweep_dir))
    assert res.returncode == 0, res.stderr
    table = pd.read_parquet(sweep_dir / "sweep.parquet")
    assert sorted(table["seed"]) == [1, 2] and "auroc" in table.columns
    assert "| seed |" in (sweep_dir / "sweep.md").read_text().replace("  ", " ")


def test_slurm_launcher_config_and_its_checks():
    from medimg_bench.cli import _check_launcher
    from medimg_bench.runs import compose_config

    assert _check_launcher(["hydra/launcher=slurm", "device=cuda", "hydra.launcher.partition=gpu"]) is None
    assert _check_launcher(["hydra/launcher=slurm", "device=cpu", "hydra.launcher.gpus_per_task=0"]) is None
    msg = _check_launcher(["hydra/launcher=slurm", "device=cuda,cpu", "hydra.launcher.gpus_per_task=0"])
    assert msg and "0 GPUs" in msg
    msg = _check_launcher(["hydra/launcher=slurm", "hydra.launcher.mem_gb=0", "hydra.launcher.timeout_min=0"])
    assert "mem_gb=0" in msg and "timeout_min=0" in msg
    assert _check_launcher(["seed=1,2"]) is None  # the basic launcher: nothing to check
    from hydra import compose, initialize_config_dir

    from medimg_bench.resources import config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        lc = compose(config_name="config", overrides=["hydra/launcher=slurm"], return_hydra_config=True).hydra.launcher
    assert lc.gpus_per_task == 1 and lc.tasks_per_node == 1 and lc.array_parallelism >= 1
    assert {"partition", "cpus_per_task", "mem_gb", "timeout_min"} <= set(lc)
    assert compose_config(["seed=3"]).seed == 3  # Hydra state left usable


def test_sweep_table_of_protocol_runs_adds_the_seed_table(tmp_path):
    from medimg_bench.runs.sweep import write_sweep

    for job, (seed, value) in enumerate([(0, 0.8), (1, 0.9)]):
        d = tmp_path / str(job)
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- +api_key=sk-test-123\n")
        config = {"seed": seed, "protocol": {"name": "linear_probe"}, "model": {"name": "m"},
                  "dataset": {"name": "d"}, "api_key": "***"}
        (d / "manifest.json").write_text(json.dumps({"config": config, "wall_time_s": 1.0}))
        (d / "summary.json").write_text(json.dumps(
            {"metrics": {"auroc": {"mean": {"value": value, "ci_low": None, "ci_high": None}}},
             "n_samples": 10, "n_failed": 0}))
    pq, md = write_sweep(tmp_path)
    table = pd.read_parquet(pq)
    assert table["seed"].tolist() == [0, 1] and table["auroc"].tolist() == [0.8, 0.9]
    assert "sk-test-123" not in md.read_text()
    assert not table.astype(str).apply(lambda col: col.str.contains("sk-test-123")).any().any()
    assert table["api_key"].tolist() == ["***", "***"]
    assert (tmp_path / "seeds.md").exists() and "seeds.md" in md.read_text()
