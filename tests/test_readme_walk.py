"""Walk the README's CLI tour as a new user would: every ``medimg-bench`` line that can run
offline runs in a fresh directory and must exit 0 without a traceback. Lines that need data,
weights, a server or a cluster are skipped with the reason. Only speed overrides are added
(fewer training steps and bootstrap resamples); placeholders (``runs/<date>/<time>_<name>``,
``runs/a runs/b``) are filled with run directories the tour itself made."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
# (substring, reason): a line holding it cannot run offline here
_NEEDS = [("/data/", "needs a real dataset"), ("/ckpt/", "needs weights"), ("http", "needs a server"),
          ("slurm", "needs a Slurm cluster"), ("torchrun", "needs torchrun"), ("RUN_DIRS", "placeholder runs"),
          ("preds.csv", "needs predictions on disk"), (" ...", "elided options"), ("=...", "elided options"), ("shard=", "placeholder runs")]
_SPEED = {"demo": ["train.max_steps=2", "bootstrap.n_resamples=20"],
          "run": ["bootstrap.n_resamples=20"]}


def tour_lines() -> list[str]:
    """The ``medimg-bench`` command lines of the README's ``## CLI`` block (continuations joined,
    comments dropped)."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## CLI\s+```bash\n(.*?)```", text, flags=re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = [line.split("  #")[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line.startswith("medimg-bench")]


def _skip_reason(line: str) -> str | None:
    if "datasets check" in line:  # its example folder is /data/nih
        return "needs a real dataset"
    return next((why for needle, why in _NEEDS if needle in line), None)


def _fill(line: str, cwd: Path) -> list[str] | None:
    """The argv of ``line`` with placeholders filled from the tour's own run directories."""
    runs = sorted(p.parent for p in (cwd / "runs").rglob("summary.json")) if (cwd / "runs").is_dir() else []
    single = [r for r in runs if "multirun" not in r.parts]
    argv = shlex.split(line)[1:]
    out = []
    for a in argv:
        if a.startswith("resume="):
            if not single:
                return None
            a = f"resume={single[0]}"
        elif a == "runs/<date>/<time>_<name>":
            a = str(single[0]) if single else a
        elif a == "[RUN_DIR...]":
            continue
        elif a == "runs/multirun/<date>/<time>":
            sweeps = sorted(p.parent for p in (cwd / "runs").rglob("multirun.yaml"))
            a = str(sweeps[0]) if sweeps else a
        out.append(a)
    if argv[:1] == ["compare"]:
        multi = [r for r in runs if "multirun" in r.parts and "model.options" not in str(r)]
        if len(multi) < 2:
            return None
        out = ["compare", str(multi[0]), str(multi[1]), *[a for a in out[3:]]]
    if "<" in " ".join(out):
        return None
    speed = _SPEED.get(out[0], [])
    if "train.enabled=true" in out:
        speed = [*speed, "train.max_steps=5"]
    return out + speed


def test_the_tour_has_the_lines_a_new_user_starts_with():
    lines = tour_lines()
    assert any(line.startswith("medimg-bench demo") for line in lines)
    assert any("task=segmentation" in line for line in lines) and len(lines) > 15


@pytest.mark.slow
def test_every_offline_readme_cli_line_runs(tmp_path):
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(README.parent), os.environ.get("PYTHONPATH", "")])}
    ran, skipped = [], []
    for line in tour_lines():
        why = _skip_reason(line)
        argv = None if why else _fill(line, tmp_path)
        if argv is None:
            skipped.append(f"{line}: {why or 'no run directory of the tour to fill in'}")
            continue
        done = subprocess.run([sys.executable, "-m", "medimg_bench.cli", *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        out = done.stdout + done.stderr
        assert done.returncode == 0 and "Traceback" not in out, f"{line}\n{out[-3000:]}"
        ran.append(line)
    print("skipped:\n  " + "\n  ".join(skipped))
    assert len(ran) >= 10, ran
