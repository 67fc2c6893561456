"""Sweeps submitted to a real Slurm cluster (slurmctld + slurmd: the one-node cluster of
``.ci/slurm_cluster.sh``, see ``conftest.py``) through the commands docs/scale.md shows, each
compared with the same work run locally: a ``-m`` sweep with a failing point, a sharded
evaluation as a job array joined by ``merge``, and a job killed with ``scancel`` (resumed with
``resume=``) beside one requeued with ``scontrol requeue`` (resumed by itself)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.engine.test_shard_merge import _close, _same_run_dirs

pytestmark = pytest.mark.slow

TINY = ["device=cpu", "dataset.options.n=12", "dataset.options.size=16", "bootstrap.n_resamples=10", "progress=false",
        "batch_size=8"]
SECRET = "sk-slurm-test-5f3a9"  # an override that must be written in no text file (jobs.json, logs, tables)


def _slurm(*extra: str) -> list[str]:
    """The launcher overrides of a CPU job on the test cluster."""
    part = os.environ.get("MEDIMG_SLURM_PARTITION")
    return ["hydra/launcher=slurm", "hydra.launcher.gpus_per_task=0", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=15",
            *([f"hydra.launcher.partition={part}"] if part else []), *extra]


def _cli(tmp_path: Path, *args: str, background: bool = False):
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "medimg_bench.cli", *args]
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=900)
    return proc.returncode, out, err


def _sweep_dir(root: Path) -> Path:
    return next(root.rglob("multirun.yaml")).parent


def _jobs(sweep_dir: Path) -> list[dict]:
    return json.loads((sweep_dir / "jobs.json").read_text())["jobs"]


def _scontrol(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=60).stdout


def _same_manifest(a: Path, b: Path) -> None:
    """Two runs' manifests agree on everything but where and when they ran."""
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    skip = {"start_time", "end_time", "wall_time_s", "segments", "timings_s", "environment", "job", "config",
            "retried"}
    assert {k: v for k, v in ma.items() if k not in skip} == {k: v for k, v in mb.items() if k not in skip}
    ca, cb = ma["config"], mb["config"]
    for c in (ca, cb):
        c.pop("output_dir", None), c.pop("resume", None)
    assert ca == cb


def _comparable(table: pd.DataFrame, root: Path) -> pd.DataFrame:
    drop = ["job", "wall_time_s", "job_id", "log", "status", "error", "run_dir", "config"]
    t = table.drop(columns=[c for c in drop if c in table.columns]).copy()
    t["overrides"] = t["overrides"].str.replace(str(root), "ROOT", regex=False)
    return t.sort_values("model.options.model_name").reset_index(drop=True)


def test_sweep_on_slurm_equals_the_local_sweep_and_a_failing_point_is_reported(tmp_path, slurm_cluster):
    models = ["resnet10t", "resnet18", "resnet14t"]
    local = _cli(tmp_path, "run", "-m", f"output_dir={tmp_path}/out", *TINY, f"+api_key={SECRET}",
                 "model.options.model_name=" + ",".join(models), background=True)
    out = _cli(tmp_path, "run", "-m", *_slurm("hydra.launcher.array_parallelism=2",
                                              "+hydra.launcher.additional_parameters.comment=medimg-bench-test"),
               f"output_dir={tmp_path}/out", *TINY, f"+api_key={SECRET}",
               "model.options.model_name=" + ",".join([*models, "not_a_model"]))
    rc, _, err = _finish(local)
    assert rc == 0, err[-3000:]
    # one failing point: the launcher waited for every job, then named it with its job id and log
    assert out.returncode == 1, out.stderr[-3000:]
    assert "1 of 4 jobs failed" in out.stderr and "not_a_model" in out.stderr, out.stderr[-3000:]
    slurm_dir = next(d.parent for d in (tmp_path / "out").rglob("jobs.json"))
    jobs = _jobs(slurm_dir)
    assert [j["num"] for j in jobs] == [0, 1, 2, 3]
    assert [j["state"] for j in jobs] == ["COMPLETED"] * 3 + ["FAILED"]
    array = {j["job_id"].split("_")[0] for j in jobs}
    assert len(array) == 1 and [j["job_id"] for j in jobs] == [f"{next(iter(array))}_{i}" for i in range(4)]
    assert jobs[3]["stderr"] in out.stderr and "Unknown model" in Path(jobs[3]["stderr"]).read_text()
    # the config's sbatch options reached Slurm: time limit, memory, CPUs, throttle, extra options, logs
    info = _scontrol(jobs[0]["job_id"])
    for field in ("TimeLimit=00:15:00", "MinMemoryNode=1G", "NumCPUs=1", "ArrayTaskThrottle=2",
                  "Comment=medimg-bench-test", f"StdErr={jobs[0]['stderr']}"):
        assert field in info, (field, info)
    # each point's run directory equals the local one's
    local_dir = next(d for d in (tmp_path / "out" / "multirun").rglob("multirun.yaml")
                     if not (d.parent / "jobs.json").exists()).parent
    for i in range(3):
        _same_run_dirs(local_dir / str(i), slurm_dir / str(i))
        _same_manifest(local_dir / str(i), slurm_dir / str(i))
        job = json.loads((slurm_dir / str(i) / "manifest.json").read_text())["job"]
        assert job["job_id"] == jobs[i]["job_id"] and job["cluster"] == slurm_cluster
        assert job["stderr"] == jobs[i]["stderr"] and Path(job["stderr"]).is_file()
    assert not (slurm_dir / "3").exists()  # the failed job left no run directory...
    # ...but the sweep table has its row, with its status, error, job id and log
    for d in (local_dir, slurm_dir):
        res = _cli(tmp_path, "sweep", str(d))
        assert res.returncode == 0, res.stderr
    lt, st = (pd.read_parquet(d / "sweep.parquet") for d in (local_dir, slurm_dir))
    ok = st[st["status"] == "ok"]
    assert len(ok) == 3 and list(lt["status"]) == ["ok"] * 3 and "job_id" not in lt.columns
    pd.testing.assert_frame_equal(_comparable(lt, tmp_path), _comparable(ok, tmp_path), check_exact=True)
    for (_, lr), (_, sr) in zip(lt.sort_values("job").iterrows(), ok.sort_values("job").iterrows()):
        lc, sc = json.loads(lr["config"]), json.loads(sr["config"])
        assert lc == sc  # the job's resolved config, the same output_dir
    bad = st[st["status"] != "ok"].iloc[0]
    assert bad["status"] == "failed" and bad["model.options.model_name"] == "not_a_model"
    assert "Unknown model" in bad["error"] and bad["job_id"] == jobs[3]["job_id"] and bad["log"] == jobs[3]["stderr"]
    assert pd.isna(bad["auroc"])
    md = (slurm_dir / "sweep.md").read_text()
    assert jobs[3]["job_id"] in md and "Unknown model" in md
    assert "1 of 4 jobs did not finish" in res.stdout
    texts = [p for p in slurm_dir.rglob("*") if p.is_file() and p.suffix in (".json", ".md", ".yaml", ".out", ".err")]
    assert any(p.name == "jobs.json" for p in texts) and any(p.suffix == ".err" for p in texts)
    for p in texts:
        assert SECRET not in p.read_text(errors="replace"), p
    assert SECRET not in out.stderr + out.stdout


def test_sharded_evaluation_as_a_job_array_merges_to_one_run(tmp_path, slurm_cluster):
    common = [*TINY, "dataset.options.n=24", "model.options.model_name=resnet10t"]
    single = _cli(tmp_path, "run", f"hydra.run.dir={tmp_path}/single", *common, background=True)
    out = _cli(tmp_path, "run", "-m", *_slurm(), f"output_dir={tmp_path}/out", *common, "shard=0/2,1/2")
    rc, _, err = _finish(single)
    assert rc == 0, err[-3000:]
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path / "out")
    jobs = _jobs(sweep_dir)
    assert len({j["job_id"].split("_")[0] for j in jobs}) == 1 and len(jobs) == 2  # one array of two tasks
    merged = tmp_path / "merged"
    res = _cli(tmp_path, "merge", str(sweep_dir), "--out", str(merged))
    assert res.returncode == 0, res.stderr[-3000:]
    _same_run_dirs(tmp_path / "single", merged)
    manifest = json.loads((merged / "manifest.json").read_text())
    assert [m["shard"] for m in manifest["merged_from"]] == ["0/2", "1/2"]


def _parts(run_dir: Path) -> int:
    return len(list((run_dir / "checkpoint").glob("part-*"))) if (run_dir / "checkpoint").is_dir() else 0


def test_cancelled_job_resumed_and_requeued_job_resume_to_the_uninterrupted_result(tmp_path, slurm_cluster):
    from tests.models.vlm._helpers import start_chat_server

    server, port = start_chat_server("--latency", "0.2")  # 0.2 s an answer: a job runs ~7 s
    launcher = local = again = None
    try:
        common = ["device=cpu", "task=vqa", "dataset=synthetic_vqa", "dataset.options.n=32", "dataset.options.size=16",
                  "model=openai_vlm", "model.options.model=loopback", "model.options.api_key_env=none",
                  f"model.options.base_url=http://127.0.0.1:{port}/v1", "model.options.cache=false",
                  "model.options.max_concurrency=1", "model.options.max_retries=0", "batch_size=2",
                  "checkpoint_every=1", "checkpoint_interval_s=0", "bootstrap.n_resamples=10", "progress=false"]
        launcher = _cli(tmp_path, "run", "-m", *_slurm(), f"output_dir={tmp_path}/out", *common, "seed=0,1",
                        background=True)
        sweep_dir = _interrupt(tmp_path / "out", launcher)
        local = _cli(tmp_path, "run", "-m", f"output_dir={tmp_path}/local", *common, "seed=0,1", background=True)
        cancelled, requeued = sweep_dir / "0", sweep_dir / "1"
        first = _jobs(sweep_dir)
        _wait_for_state(first[0]["job_id"], "CANCELLED")
        assert _parts(cancelled) >= 1 and not (cancelled / "summary.json").exists()
        # the cancelled job is resumed through Slurm, with its own overrides (while the requeued
        # one waits for its restart)
        again = _cli(tmp_path, "run", "-m", *_slurm(), f"output_dir={tmp_path}/again", f"resume={cancelled}",
                     background=True)
        rc, _, err = _finish(launcher)
        assert rc == 1 and "1 of 2 jobs failed" in err and "CANCELLED" in err, err[-3000:]
        jobs = _jobs(sweep_dir)
        assert [j["state"] for j in jobs] == ["CANCELLED", "COMPLETED"]
        # the requeued job continued its checkpoint by itself: one job id, restarted once, two segments
        m = json.loads((requeued / "manifest.json").read_text())
        assert m["job"]["job_id"] == jobs[1]["job_id"] and m["job"]["restart_count"] == 1
        assert len(m["segments"]) == 2
        rc, _, err = _finish(again)
        assert rc == 0, err[-3000:]
        m = json.loads((cancelled / "manifest.json").read_text())
        assert len(m["segments"]) == 2 and m["job"]["job_id"] != jobs[0]["job_id"]
        rc, _, err = _finish(local)
        assert rc == 0, err[-3000:]
        local_dir = _sweep_dir(tmp_path / "local")
        for i, d in enumerate((cancelled, requeued)):
            pd.testing.assert_frame_equal(pd.read_parquet(local_dir / str(i) / "samples.parquet"),
                                          pd.read_parquet(d / "samples.parquet"), check_exact=True)
            _close(json.loads((local_dir / str(i) / "summary.json").read_text()),
                   json.loads((d / "summary.json").read_text()))
        # the sweep's table now has both jobs finished
        table = _cli(tmp_path, "sweep", str(sweep_dir))
        assert table.returncode == 0, table.stderr
        st = pd.read_parquet(sweep_dir / "sweep.parquet").sort_values("job")
        assert list(st["status"]) == ["ok", "ok"] and list(st["seed"]) == [0, 1]
    finally:
        for proc in (launcher, local, again, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def _wait_for_state(job_id: str, state: str) -> None:
    deadline = time.time() + 300
    while True:
        out = subprocess.run(["squeue", "-h", "-r", "--states=all", "-j", job_id, "-o", "%T"], capture_output=True,
                             text=True, timeout=60).stdout.split()
        if out == [state]:
            return
        assert time.time() < deadline, (job_id, out)
        time.sleep(0.5)


def _interrupt(out_root: Path, launcher: subprocess.Popen) -> Path:
    """Once each job of the sweep has saved a checkpoint part: ``scancel`` job 0 and
    ``scontrol requeue`` job 1 (each as soon as its own first part is there); returns the
    sweep directory."""
    deadline = time.time() + 600
    done: set[int] = set()
    while len(done) < 2:
        assert time.time() < deadline and launcher.poll() is None, "the sweep ended before it could be interrupted"
        found = list(out_root.rglob("jobs.json"))
        if found:
            jobs = _jobs(found[0].parent)
            for i in {0, 1} - done:
                if _parts(found[0].parent / str(i)) >= 1:
                    cmd = ["scancel", jobs[i]["job_id"]] if i == 0 else ["scontrol", "requeue", jobs[i]["job_id"]]
                    subprocess.run(cmd, check=True, timeout=60)
                    done.add(i)
        time.sleep(0.1)
    assert re.fullmatch(r"\d+_0", jobs[0]["job_id"])
    return found[0].parent
