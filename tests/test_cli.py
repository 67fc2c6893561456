"""The console entry point: run, -m sweeps, demo, list. Runs in subprocesses like a user would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

TINY_CLS = [
    "dataset.options.n=16", "dataset.options.size=32", "model.options.model_name=resnet10t",
    "bootstrap.n_resamples=20", "progress=false", "batch_size=8",
]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "medimg_bench.cli", *args], capture_output=True, text=True, env=env, timeout=600
    )


def _run_dir(stdout: str) -> Path:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("run directory: ")]
    assert lines, stdout
    return Path(lines[-1].split(": ", 1)[1])


def test_run_writes_a_run_directory(tmp_path):
    out = _cli(tmp_path, "run", f"output_dir={tmp_path}/runs", *TINY_CLS)
    assert out.returncode == 0, out.stderr
    run = _run_dir(out.stdout)
    assert (run / "samples.parquet").exists() and (run / "plots" / "roc.png").exists()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["model"]["options"]["model_name"] == "resnet10t"
    assert "auroc" in out.stdout


def test_multirun_sweeps_two_values(tmp_path):
    out = _cli(tmp_path, "run", "-m", f"output_dir={tmp_path}/runs", *TINY_CLS, "seed=1,2")
    assert out.returncode == 0, out.stderr
    runs = sorted(p.parent for p in (tmp_path / "runs").rglob("manifest.json"))
    assert len(runs) == 2
    seeds = sorted(json.loads((r / "manifest.json").read_text())["config"]["seed"] for r in runs)
    assert seeds == [1, 2]


@pytest.mark.slow
def test_demo_smoke(tmp_path):
    out = _cli(
        tmp_path, "demo", f"output_dir={tmp_path}/runs", "train.max_steps=3", "bootstrap.n_resamples=20",
        "progress=false", "dataset.options.n=8",
    )
    assert out.returncode == 0, out.stderr
    run = _run_dir(out.stdout)
    index = json.loads((run / "benchmark.json").read_text())
    assert set(index["entries"]) == {"classification", "segmentation", "vqa"}
    assert (run / "classification" / "plots" / "roc.png").exists()
    vqa = json.loads((run / "vqa" / "summary.json").read_text())
    assert {"accuracy", "unparsed_rate"} <= set(vqa["metrics"])
    assert (run / "segmentation" / "plots" / "per_class_dice.png").exists()
    seg = pd.read_parquet(run / "segmentation" / "samples.parquet")
    assert {"dice", "target_voxels"} <= set(seg.columns)


def test_list_and_unknown_command(tmp_path):
    out = _cli(tmp_path, "list", "datasets")
    assert out.returncode == 0 and "synthetic_ct" in out.stdout
    assert _cli(tmp_path, "frobnicate").returncode == 2


def test_bad_sample_in_a_run_is_recorded(tmp_path):
    # generate the phantoms, corrupt one test image, run: the run ends, the sample is marked failed
    from medimg_bench.datasets import create

    root = tmp_path / "data"
    ds = create("synthetic_cxr", cache_dir=root, split="test", n=16, size=32)
    (ds.root / ds.manifest["image"][0]).write_bytes(b"corrupt")
    out = _cli(tmp_path, "run", f"output_dir={tmp_path}/runs", f"dataset.root={ds.root}", *TINY_CLS)
    assert out.returncode == 0, out.stderr
    table = pd.read_parquet(_run_dir(out.stdout) / "samples.parquet")
    failed = table[table["status"] == "failed"]
    assert list(failed["id"]) == [ds.sample_id(0)]
    assert ds.manifest["image"][0] in failed["error"].iloc[0]
    assert (table["status"] == "ok").sum() == (len(ds) - 1) * 3


def test_datasets_check_exit_codes(tmp_path):
    from medimg_bench.datasets import create

    root = tmp_path / "data"
    ds = create("synthetic_cxr", cache_dir=root, split="test", n=8, size=16)
    ok = _cli(tmp_path, "datasets", "check", "synthetic_cxr", f"root={ds.root}", "options.n=8", "options.size=16")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "leakage train <-> test: none" in ok.stdout
    (ds.root / ds.manifest["image"][0]).unlink()
    bad = _cli(tmp_path, "datasets", "check", "synthetic_cxr", f"root={ds.root}", "options.n=8", "options.size=16")
    assert bad.returncode == 1 and ds.manifest["image"][0] in bad.stdout
    assert _cli(tmp_path, "datasets", "check", "no_such_dataset").returncode == 2


def _user_error_cases(tmp_path: Path) -> dict[str, tuple[list[str], dict[str, str], str]]:
    """name -> (arguments, environment changes, the message's telling part)."""
    no_sbatch = tmp_path / "bin"
    no_sbatch.mkdir(exist_ok=True)
    return {
        "missing data root": (["run", "task=segmentation", "dataset=covid_semiseg", "metrics=segmentation",
                               "model=monai_unet", f"dataset.root={tmp_path}/no_such_folder"], {},
                              "does not exist"),
        "missing API key": (["run", "task=vqa", "dataset=synthetic_vqa", "scoring=medimg_bench", "model=openai_vlm",
                             "model.options.model=m", "model.options.base_url=https://api.example.invalid/v1",
                             "model.options.api_key_env=MB_UNSET_KEY_VAR"], {},
                            "the API key environment variable MB_UNSET_KEY_VAR is not set"),
        "bad resume path": (["run", f"resume={tmp_path}/never_ran"], {}, "nothing to resume there"),
        "SLURM not available": (["run", "-m", "hydra/launcher=slurm", "seed=0,1"], {"PATH": str(no_sbatch)},
                                "SLURM is not available here"),
    }


@pytest.mark.parametrize("case", ["missing data root", "missing API key", "bad resume path", "SLURM not available"])
def test_user_errors_are_one_line_on_stderr(tmp_path, monkeypatch, case):
    args, env, says = _user_error_cases(tmp_path)[case]
    monkeypatch.delenv("MB_UNSET_KEY_VAR", raising=False)
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = _cli(tmp_path, *args, f"output_dir={tmp_path}/runs")
    assert out.returncode in (1, 2), out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("medimg-bench run: ") and says in lines[0], out.stderr
    assert "Traceback" not in out.stderr and "HYDRA_FULL_ERROR" not in out.stderr
    if case == "missing data root":  # the whole trace when asked for
        monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
        full = _cli(tmp_path, *args, f"output_dir={tmp_path}/runs")
        assert full.returncode == 1 and "Traceback" in full.stderr and says in full.stderr
