"""Sweeps through submitit (``hydra/launcher=slurm`` and ``hydra/launcher=local``): what the
launchers of ``hydra_plugins/medimg_bench_launcher`` add to hydra-submitit-launcher's.

* every submitted job is recorded in ``<sweep dir>/jobs.json`` when it is submitted (number,
  overrides, scheduler job id, log files) and again when it ends (state, error): the sweep table
  (``medimg-bench sweep``) reads it, so a job that failed, was cancelled or never started is a row
  of the table with its job id and log, not a missing line;
* the launcher waits for *every* job, then reports each failed one (job id, state, log, last
  error line) and exits non-zero; the others are unaffected (the upstream launcher stopped at
  the first failure while the rest still ran). A job's state comes from its result file or
  ``squeue`` (no ``sacct``: clusters without an accounting database answer it too);
* a job Slurm restarts (``scontrol requeue``, preemption with requeue, submitit's own requeue
  on a timeout) finds its checkpoint and continues it (``resume=`` its own run directory);
* a sweep over ``resume=DIR1,DIR2`` runs each job with the overrides DIR's run was started
  with, as ``resume=DIR`` alone does;
* :func:`job_record`: the job's scheduler, id, array ids, restart count, node and log files,
  read from the environment, for the run's ``manifest.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench._fs import atomic_write

__all__ = ["job_record", "read_jobs", "JOBS_FILE", "SubmititSweepMixin"]

JOBS_FILE = "jobs.json"
#: Slurm states of a job that has not ended (it may still write its result)
_UNFINISHED = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
               "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "PREEMPTED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
_ENV = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID", "array_task_id": "SLURM_ARRAY_TASK_ID",
        "restart_count": "SLURM_RESTART_COUNT", "node": "SLURMD_NODENAME", "partition": "SLURM_JOB_PARTITION",
        "cluster": "SLURM_CLUSTER_NAME"}


def job_record(environ: Any = None) -> dict[str, Any] | None:
    """The scheduler job this process runs in, from its environment: ``scheduler`` (``slurm``
    or ``local`` for submitit's local executor), ``job_id`` (``<array job>_<task>`` for an array
    task, as ``squeue`` shows it), the Slurm variables that are set (``array_job_id``,
    ``array_task_id``, ``restart_count``, ``node``, ``partition``, ``cluster``) and, under
    submitit, the ``stdout``/``stderr`` log files. None outside a scheduler."""
    env = os.environ if environ is None else environ
    executor = env.get("SUBMITIT_EXECUTOR")
    if not env.get("SLURM_JOB_ID") and not executor:
        return None
    rec: dict[str, Any] = {"scheduler": "slurm" if env.get("SLURM_JOB_ID") else str(executor)}
    rec.update({k: env[v] for k, v in _ENV.items() if env.get(v)})
    if rec.get("array_job_id") and rec.get("array_task_id"):
        rec["job_id"] = f"{rec['array_job_id']}_{rec['array_task_id']}"
    if "restart_count" in rec:
        rec["restart_count"] = int(rec["restart_count"])
    if executor and env.get("SUBMITIT_FOLDER") and environ is None:
        import submitit

        job_env = submitit.JobEnvironment()
        rec.setdefault("job_id", job_env.job_id)
        rec["stdout"], rec["stderr"] = str(job_env.paths.stdout), str(job_env.paths.stderr)
    return rec


def read_jobs(sweep_dir: str | Path) -> list[dict[str, Any]]:
    """The entries of ``<sweep_dir>/jobs.json`` (every job the launcher submitted), [] without it."""
    path = Path(sweep_dir) / JOBS_FILE
    if not path.is_file():
        return []
    return list(json.loads(path.read_text(encoding="utf-8")).get("jobs", []))


def _write_jobs(sweep_dir: Path, entries: list[dict[str, Any]]) -> None:
    with atomic_write(sweep_dir / JOBS_FILE, mode="w", fsync=False) as f:
        f.write(json.dumps({"jobs": entries}, indent=1, default=str))


def _squeue_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """State of each of ``job_ids`` that ``squeue`` lists (one call, array tasks one a line);
    None when squeue itself fails."""
    try:
        out = subprocess.run(["squeue", "--me", "-r", "-h", "--states=all", "-o", "%i|%T"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    wanted = set(job_ids)
    states = {}
    for line in out.stdout.splitlines():
        jid, _, state = line.strip().partition("|")
        if jid in wanted:
            states[jid] = state.split()[0] if state else "UNKNOWN"
    return states


def _ended(jobs: Sequence[Any], pending: set[int], *, slurm: bool, first_poll: float) -> dict[int, str]:
    """The jobs of ``pending`` (indices) that have ended now, each with its final state."""
    done = {i: "COMPLETED" for i in pending if jobs[i].paths.result_pickle.exists()}
    rest = pending - set(done)
    if not rest:
        return done
    if not slurm:  # submitit's local executor knows its processes
        done.update({i: jobs[i].state for i in rest if jobs[i].done()})
        return done
    states = _squeue_states([jobs[i].job_id for i in rest])
    if states is None:
        return done
    for i in rest:
        state = states.get(jobs[i].job_id)
        if state is None and time.time() - first_poll > 60:
            done[i] = "GONE"  # no longer listed (purged after MinJobAge) and no result
        elif state is not None and state not in _UNFINISHED:
            done[i] = state
    return done


def _wait_all(jobs: Sequence[Any], *, slurm: bool) -> dict[int, str]:
    """Wait until every job has ended; returns index -> final state (polled every 1-30 s)."""
    start = time.time()
    pending, final = set(range(len(jobs))), {}
    while pending:
        ended = _ended(jobs, pending, slurm=slurm, first_poll=start)
        final.update(ended)
        pending -= set(ended)
        if pending:
            time.sleep(min(1.0 + (time.time() - start) / 30.0, 30.0))
    return final


def _outcome(job: Any, state: str) -> tuple[Any, str | None]:
    """(result, None) for a job that returned, (None, error text) for one that did not."""
    if not job.paths.result_pickle.exists() and state != "COMPLETED":
        return None, f"ended {state} without a result (killed, cancelled, out of time or memory?)"
    from hydra.core.utils import JobStatus

    try:
        result = job.results()[0]
    except Exception as exc:  # submitit's FailedJobError holds the job's traceback
        return None, str(exc)
    if getattr(result, "status", None) == JobStatus.FAILED:  # Hydra caught the task's exception
        exc = result._return_value
        return None, f"{type(exc).__name__}: {exc}"
    return result, None


def _last_line(text: str) -> str:
    """The exception line of a traceback (submitit's failure message: the trace between two
    dashed lines), else the last line."""
    parts = text.split("-" * 22)
    body = parts[1] if len(parts) >= 3 else text
    lines = [ln for ln in body.strip().splitlines() if ln.strip()]
    unindented = [ln for ln in lines if not ln[0].isspace()]
    return (unindented or lines or [text])[-1].strip()


class SubmititSweepMixin:
    """Put before hydra-submitit-launcher's ``SlurmLauncher`` / ``LocalLauncher`` (see the module
    docstring); uses their ``params``, ``config`` and ``_EXECUTOR``."""

    def __call__(self, sweep_overrides: list[str], job_dir_key: str, job_num: int, job_id: str,
                 singleton_state: Any) -> Any:
        from hydra.core.singleton import Singleton
        from hydra.core.utils import JobStatus, setup_globals

        Singleton.set_state(singleton_state)
        setup_globals()  # the resolvers (`now`) the job's sweep directory needs
        ret = super().__call__(_job_overrides(self, sweep_overrides, job_num), job_dir_key,  # type: ignore[misc]
                               job_num, job_id, singleton_state)
        if ret.status == JobStatus.FAILED:
            # Hydra caught the run's exception: raise it, so that its traceback is in the job's
            # log and Slurm records the job as FAILED (exit code 1)
            raise ret._return_value
        return ret

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Any:
        from hydra.core.utils import filter_overrides

        from medimg_bench._secrets import redact_secrets

        executor, sweep_dir = _executor(self)
        params = _job_params(job_overrides, initial_job_idx)
        jobs = executor.map_array(self, *zip(*params))
        entries = [{"num": idx, "overrides": [str(o) for o in redact_secrets(filter_overrides(list(ov)))],
                    "job_id": job.job_id,
                    "stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr), "state": "SUBMITTED"}
                   for (ov, _, idx, _, _), job in zip(params, jobs)]
        _write_jobs(sweep_dir, entries)
        final = _wait_all(jobs, slurm=self._EXECUTOR == "slurm")  # type: ignore[attr-defined]
        returns, failed = [], []
        for i, job in enumerate(jobs):
            result, error = _outcome(job, final[i])
            entries[i]["state"] = "COMPLETED" if not error else ("FAILED" if final[i] == "COMPLETED" else final[i])
            if error:
                entries[i]["error"] = _last_line(error)
                failed.append((entries[i], error))
            returns.append(result)
        _write_jobs(sweep_dir, entries)
        return _returns(returns, failed, params, sweep_dir)


def _job_params(job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[tuple]:
    import logging

    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides

    from medimg_bench._secrets import redact_secrets

    log = logging.getLogger(__name__)
    params = []
    for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
        log.info(f"\t#{idx} : {' '.join(str(o) for o in redact_secrets(filter_overrides(overrides)))}")
        params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
    return params


def _executor(launcher: Any) -> tuple[Any, Path]:
    """The submitit executor hydra-submitit-launcher would build, and the sweep directory."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    kind, params = launcher._EXECUTOR, dict(launcher.params)
    init = {"folder": params.pop("submitit_folder")}
    if "max_num_timeout" in params:
        init[f"{kind}_max_num_timeout"] = params.pop("max_num_timeout")
    executor = submitit.AutoExecutor(cluster=kind, **init)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"{kind}_{k}": v for k, v in params.items()})
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if "mode" in launcher.config.hydra.sweep:
        os.chmod(sweep_dir, mode=int(str(launcher.config.hydra.sweep.mode), 8))
    return executor, sweep_dir


def _returns(results: list[Any], failed: list[tuple[dict, str]], params: list[tuple], sweep_dir: Path) -> list[Any]:
    """Hydra's JobReturns: the jobs' own, and for each failed job one that raises a message
    naming every failed job (Hydra raises it once all are collected)."""
    from hydra.core.utils import JobReturn, JobStatus
    from hydra.errors import CompactHydraException

    if not failed:
        return results
    lines = [f"{len(failed)} of {len(results)} jobs failed (the others finished; "
             f"`medimg-bench sweep {sweep_dir}` tabulates all, {JOBS_FILE} lists every job):"]
    for entry, error in failed:
        lines.append(f"  #{entry['num']} {' '.join(entry['overrides'])}: job {entry['job_id']} {entry['state']}: "
                     f"{_last_line(error)}\n      log: {entry['stderr']}")
    exc = CompactHydraException("\n".join(lines))
    from medimg_bench._secrets import redact_secrets

    out = []
    for (overrides, *_), result in zip(params, results):  # Hydra prints a failed job's overrides
        out.append(result if result is not None else JobReturn(
            overrides=[str(o) for o in redact_secrets(list(overrides))], status=JobStatus.FAILED, _return_value=exc))
    return out


def _job_overrides(launcher: Any, overrides: list[str], job_num: int) -> list[str]:
    """Inside the job: a sweep point over ``resume=DIR`` gets DIR's saved overrides; a job that
    Slurm restarted continues the checkpoint in its own run directory."""
    from medimg_bench.runs.compose import resume_overrides

    keys = {o.lstrip("+~").partition("=")[0] for o in overrides}
    if "resume" in keys:
        return resume_overrides(overrides)[0]
    if int(os.environ.get("SLURM_RESTART_COUNT") or 0) < 1:
        return overrides
    from omegaconf import open_dict

    cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
    with open_dict(cfg.hydra.job):
        cfg.hydra.job.num = job_num
    run_dir = Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)
    if _has_work(run_dir):
        print(f"medimg-bench: job restarted (SLURM_RESTART_COUNT={os.environ['SLURM_RESTART_COUNT']}): "
              f"resume={run_dir}", flush=True)
        return [*overrides, f"resume={run_dir}"]
    return overrides


def _has_work(run_dir: Path) -> bool:
    from medimg_bench.engine.checkpoint import has_checkpoint
    from medimg_bench.engine.run_dir import RESULT_FILES, has_train_state

    return (has_checkpoint(run_dir / "checkpoint") or has_train_state(run_dir)
            or any((run_dir / f).exists() for f in RESULT_FILES))
