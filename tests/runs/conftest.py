"""The Slurm cluster the tests of ``test_slurm_cluster.py`` submit to.

A cluster answers (``sinfo``) → its jobs are used when it is the local one-node test cluster
(``ClusterName=medimg-local``, started by ``.ci/slurm_cluster.sh``; ``.ci/run`` starts it
before ``make test``), or any cluster when ``MEDIMG_SLURM_TESTS=1`` (tiny CPU jobs, in its
default partition unless ``MEDIMG_SLURM_PARTITION`` names one). No cluster answers → when
running as root with Slurm and munge installed, this fixture starts the local one itself (and
stops it at the end), so ``make test`` alone covers it on a developer's machine
(``MEDIMG_SLURM_START=0``: never); otherwise the tests skip, saying how to start one."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "slurm_cluster.sh"
LOCAL_CLUSTER = "medimg-local"


def _answers() -> bool:
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _cluster_name() -> str:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    return next((ln.split("=", 1)[1].strip() for ln in out.splitlines() if ln.startswith("ClusterName")), "")


def _can_start() -> bool:
    if os.environ.get("MEDIMG_SLURM_START") == "0":  # never start daemons from pytest
        return False
    return (SCRIPT.exists() and hasattr(os, "geteuid") and os.geteuid() == 0
            and all(shutil.which(b) for b in ("slurmctld", "slurmd", "munged", "sbatch")))


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The cluster's name; skips (with the reason) when no usable cluster answers."""
    started = False
    if not _answers():
        if not _can_start():
            pytest.skip("no Slurm cluster answers (`sinfo` fails): start the one-node test cluster with "
                        "`sudo .ci/slurm_cluster.sh start` (it installs slurm-wlm and munge when missing; "
                        "`.ci/run` does this before `make test`)")
        proc = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=900)
        started = proc.returncode == 0 and _answers()
        if not started:
            pytest.skip(f"the one-node Slurm cluster did not start ({SCRIPT} start): {proc.stderr[-1500:]}")
    name = _cluster_name()
    if name != LOCAL_CLUSTER and os.environ.get("MEDIMG_SLURM_TESTS") != "1":
        pytest.skip(f"the Slurm cluster that answers ({name!r}) is not the local test cluster "
                    f"({LOCAL_CLUSTER!r}, .ci/slurm_cluster.sh): set MEDIMG_SLURM_TESTS=1 to submit the test "
                    "jobs (a few tiny CPU jobs) to it")
    yield name
    if started:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, timeout=120)
