"""The Slurm pieces that need no cluster: the job record read from the environment, the sweep
table over ``jobs.json`` (failed, cancelled, resumed jobs), the launcher's end-of-sweep states
and failure message. ``test_slurm_cluster.py`` runs the same code against slurmctld/slurmd."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from medimg_bench.runs import slurm
from medimg_bench.runs.slurm import job_record, read_jobs
from medimg_bench.runs.sweep import _unfinished_hint, cli_main, sweep_table


def test_job_record_reads_the_slurm_environment():
    env = {"SLURM_JOB_ID": "57", "SLURM_ARRAY_JOB_ID": "54", "SLURM_ARRAY_TASK_ID": "3",
           "SLURM_RESTART_COUNT": "1", "SLURMD_NODENAME": "gpu07", "SLURM_JOB_PARTITION": "gpu",
           "SLURM_CLUSTER_NAME": "hpc", "HOME": "/root"}
    assert job_record(env) == {"scheduler": "slurm", "job_id": "54_3", "array_job_id": "54", "array_task_id": "3",
                               "restart_count": 1, "node": "gpu07", "partition": "gpu", "cluster": "hpc"}
    # a plain sbatch job (no array): its own id
    assert job_record({"SLURM_JOB_ID": "58"}) == {"scheduler": "slurm", "job_id": "58"}
    assert job_record({"SUBMITIT_EXECUTOR": "local"}) == {"scheduler": "local"}
    assert job_record({"HOME": "/root"}) is None


def _run_dir(d: Path, *, seed: int, auroc: float, job_id: str | None) -> None:
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(f"- seed={seed}\n- output_dir=/x\n")
    manifest = {"wall_time_s": 1.5, "config": {"seed": seed}}
    if job_id:
        manifest["job"] = {"scheduler": "slurm", "job_id": job_id, "stderr": f"/logs/{job_id}.err"}
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "summary.json").write_text(json.dumps({
        "metrics": {"auroc": {"mean": {"value": auroc, "ci_low": auroc - 0.1, "ci_high": auroc + 0.1}}},
        "n_samples": 10, "n_failed": 0}))


def _entry(num: int, job_id: str, state: str, **kw) -> dict:
    return {"num": num, "overrides": [f"seed={num}", "output_dir=/x"], "job_id": job_id,
            "stdout": f"/logs/{job_id}.out", "stderr": f"/logs/{job_id}.err", "state": state, **kw}


def test_sweep_table_has_a_row_for_every_job_with_status_job_id_and_log(tmp_path, capsys):
    _run_dir(tmp_path / "0", seed=0, auroc=0.8, job_id="9_0")
    _run_dir(tmp_path / "2", seed=2, auroc=0.6, job_id="15_0")  # cancelled as 9_2, resumed by job 15_0
    (tmp_path / "3" / "checkpoint").mkdir(parents=True)  # cancelled, checkpoint kept
    jobs = [_entry(0, "9_0", "COMPLETED"),
            _entry(1, "9_1", "FAILED", error="RuntimeError: Unknown model (not_a_model)"),
            _entry(2, "9_2", "CANCELLED", error="ended CANCELLED without a result"),
            _entry(3, "9_3", "CANCELLED", error="ended CANCELLED without a result")]
    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": jobs}))
    assert read_jobs(tmp_path) == jobs
    table = sweep_table(tmp_path).set_index("job")
    assert list(table.index) == ["0", "2", "1", "3"]
    assert list(table["status"]) == ["ok", "ok", "failed", "cancelled"]
    assert list(table["job_id"]) == ["9_0", "15_0", "9_1", "9_3"]
    assert list(table["log"]) == ["/logs/9_0.err", "/logs/15_0.err", "/logs/9_1.err", "/logs/9_3.err"]
    assert list(table["seed"]) == [0, 2, 1, 3]
    assert table.loc["1", "error"] == "RuntimeError: Unknown model (not_a_model)" and pd.isna(table.loc["1", "auroc"])
    assert table.loc["0", "auroc"] == 0.8 and str(table["n_samples"].dtype) == "Int64"
    assert str(table["n_failed"].dtype) == "Int64" and pd.isna(table.loc["1", "n_failed"])
    assert cli_main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 1 | failed |" not in out  # the status column comes after the metrics
    assert "9_1" in out and "/logs/9_1.err" in out and "Unknown model" in out
    assert f"resume={tmp_path / '3'}" in out and "medimg-bench run seed=1 output_dir=/x" in out
    assert pd.read_parquet(tmp_path / "sweep.parquet")["status"].tolist() == ["ok", "ok", "failed", "cancelled"]


def test_a_sweep_without_jobs_has_no_job_columns_and_no_hint(tmp_path):
    _run_dir(tmp_path / "0", seed=0, auroc=0.8, job_id=None)
    table = sweep_table(tmp_path)
    assert not {"job_id", "log", "error"} & set(table.columns) and list(table["status"]) == ["ok"]
    assert _unfinished_hint(table, tmp_path) is None


def test_last_line_of_a_submitit_failure_is_the_exception():
    text = ("Job (task=0) failed during processing with trace:\n----------------------\nTraceback (most recent "
            "call last):\n  File \"x.py\", line 1, in f\n    raise ValueError('bad')\nomegaconf.errors.X: bad "
            "interpolation\n    full_key: hydra.sweep.dir\n----------------------\nYou can check full logs "
            "with 'job.stderr(0)'\n  - /logs/1.err\n")
    assert slurm._last_line(text) == "omegaconf.errors.X: bad interpolation"
    assert slurm._last_line("one line") == "one line"


class _Job:
    def __init__(self, tmp_path: Path, job_id: str, *, result: bool = False) -> None:
        self.job_id = job_id
        self.paths = SimpleNamespace(result_pickle=tmp_path / f"{job_id}_result.pkl")
        if result:
            self.paths.result_pickle.write_bytes(b"")


def test_job_states_from_the_result_file_and_squeue(tmp_path, monkeypatch):
    jobs = [_Job(tmp_path, "5_0", result=True), _Job(tmp_path, "5_1"), _Job(tmp_path, "5_2"), _Job(tmp_path, "5_3"),
            _Job(tmp_path, "5_4")]
    listed = {"5_1": "COMPLETING", "5_2": "CANCELLED", "5_3": "PENDING"}
    monkeypatch.setattr(slurm, "_squeue_states", lambda ids: {i: s for i, s in listed.items() if i in ids})
    import time

    now = time.time()
    # 5_4 is not listed: still unknown right after submission, ended once squeue forgot it
    assert slurm._ended(jobs, {0, 1, 2, 3, 4}, slurm=True, first_poll=now) == {0: "COMPLETED", 2: "CANCELLED"}
    assert slurm._ended(jobs, {1, 3, 4}, slurm=True, first_poll=now - 61) == {4: "GONE"}
    monkeypatch.setattr(slurm, "_squeue_states", lambda ids: None)  # squeue failed: nothing concluded
    assert slurm._ended(jobs, {1, 3}, slurm=True, first_poll=now - 61) == {}
    assert slurm._outcome(jobs[1], "CANCELLED")[1].startswith("ended CANCELLED without a result")


def test_failed_jobs_raise_one_message_naming_each(tmp_path):
    from hydra.core.utils import JobStatus

    params = [(["seed=0"], "hydra.sweep.dir", 0, "x", {}), (["seed=1"], "hydra.sweep.dir", 1, "x", {})]
    ok = SimpleNamespace(status=JobStatus.COMPLETED, return_value=None)
    failed = [(_entry(1, "7_1", "TIMEOUT"), "ended TIMEOUT without a result")]
    returns = slurm._returns([ok, None], failed, params, tmp_path)
    assert returns[0] is ok and returns[1].status == JobStatus.FAILED
    with pytest.raises(Exception) as info:
        _ = returns[1].return_value
    msg = str(info.value)
    assert "1 of 2 jobs failed" in msg and "job 7_1 TIMEOUT" in msg and "/logs/7_1.err" in msg and "seed=1" in msg
    assert slurm._returns([ok], [], params[:1], tmp_path) == [ok]


def test_job_overrides_replay_a_resumed_run_and_resume_a_restarted_job(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    saved = tmp_path / "old" / "4"
    (saved / ".hydra").mkdir(parents=True)
    (saved / ".hydra" / "overrides.yaml").write_text("- seed=3\n- output_dir=/x\n- dataset.options.n=12\n")
    from medimg_bench.runs.compose import resume_overrides

    # the CLI puts a run's saved overrides among the overrides, after flags such as -m
    assert resume_overrides(["-m", "hydra/launcher=slurm", f"resume={saved}"])[0] == [
        "-m", "hydra/launcher=slurm", "seed=3", "dataset.options.n=12", f"resume={saved}"]
    # a sweep over resume=DIR1,DIR2: each job gets the overrides its run was started with
    assert slurm._job_overrides(None, [f"resume={saved}", "seed=3"], 0) == ["dataset.options.n=12",
                                                                              f"resume={saved}", "seed=3"]

    def load_sweep_config(config, overrides):
        return OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep"), "subdir": "${hydra.job.num}"},
                                           "job": {"num": None}}})

    launcher = SimpleNamespace(config=None, hydra_context=SimpleNamespace(
        config_loader=SimpleNamespace(load_sweep_config=load_sweep_config)))
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert slurm._job_overrides(launcher, ["seed=1"], 2) == ["seed=1"]  # a first start: as given
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert slurm._job_overrides(launcher, ["seed=1"], 2) == ["seed=1"]  # restarted before any checkpoint
    (tmp_path / "sweep" / "2" / "checkpoint").mkdir(parents=True)
    (tmp_path / "sweep" / "2" / "checkpoint" / "part-000001.safetensors").write_bytes(b"x")
    assert slurm._job_overrides(launcher, ["seed=1"], 2) == ["seed=1", f"resume={tmp_path / 'sweep' / '2'}"]
    assert slurm._job_overrides(launcher, ["seed=1"], 1) == ["seed=1"]  # another job's directory: nothing to resume
