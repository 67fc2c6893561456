"""One table for a Hydra multirun: every job's run directory, its overrides and config, and the
macro mean (with CI) of every metric.

    medimg-bench sweep runs/multirun/2026-11-22/23-10-00-000000

writes ``sweep.parquet``, ``sweep.md`` and ``report.html`` (the runs side by side, see
docs/report.md) in that folder (or ``--out``). Columns: ``job`` (the
job's folder), one column per overridden key (``seed``, ``model.options.model_name``…), each
metric's mean and interval (``auroc``, ``auroc_ci_low``, ``auroc_ci_high``), ``n_samples``,
``n_failed``, ``n_excluded``, ``wall_time_s``, ``overrides`` and ``config`` (the job's resolved config as JSON,
secrets redacted), then ``run_dir``, and ``status``: ``failed_samples`` for a run that scored no sample
or failed more than its ``max_failure_rate`` (the command then exits 3), else ``ok``. A sweep
through the submitit launchers (``jobs.json``, :mod:`medimg_bench.runs.slurm`) also has a row for
every job that left no run directory, its ``status`` the job's (``failed``, ``cancelled``,
``timeout``…), ``error``, ``job_id`` and ``log`` (the job's stderr file); ``cli_main`` then prints
what continues the unfinished jobs. For foundation-model protocol runs the seed table of
:func:`medimg_bench.protocols.aggregate_seeds` (mean, std and CI over seeds) is written too
(``seeds.parquet`` / ``seeds.md``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["sweep_table", "write_sweep", "cli_main"]


def _overrides(run_dir: Path) -> list[str]:
    path = run_dir / ".hydra" / "overrides.yaml"
    if not path.exists():
        return []
    import yaml

    return [str(o) for o in (yaml.safe_load(path.read_text()) or [])]


def _value(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _run_dirs(multirun_dir: Path) -> list[Path]:
    found = sorted({p.parent for p in multirun_dir.rglob("summary.json")})
    # a benchmark run holds entries in sub-directories: keep the entries, each a row
    return [d for d in found if (d / "manifest.json").exists()]


def _swept(overrides: Sequence[str], row: dict[str, Any]) -> None:
    """One column per overridden key (not Hydra's own, ``output_dir`` or ``resume``)."""
    for o in overrides:
        if "=" in o and not o.split("=", 1)[0].startswith(("hydra", "~")):
            key, val = o.split("=", 1)
            if key.lstrip("+").split(".")[0] in ("output_dir", "resume"):
                continue
            row[key.lstrip("+")] = _value(val)


def _run_row(root: Path, d: Path) -> dict[str, Any]:
    from medimg_bench.engine.results import redact_secrets

    manifest = json.loads((d / "manifest.json").read_text())
    summary = json.loads((d / "summary.json").read_text())
    overrides = [str(o) for o in redact_secrets(_overrides(d) or _overrides(d.parent))]
    row: dict[str, Any] = {"job": str(d.relative_to(root))}
    _swept(overrides, row)
    for name, m in summary.get("metrics", {}).items():
        mean = m.get("mean") or {}
        row[name] = mean.get("value")
        row[f"{name}_ci_low"] = mean.get("ci_low")
        row[f"{name}_ci_high"] = mean.get("ci_high")
    row["n_samples"] = summary.get("n_samples")
    row["n_failed"] = summary.get("n_failed")
    row["n_excluded"] = summary.get("n_excluded")
    row["status"] = _status(summary, manifest)
    row["wall_time_s"] = manifest.get("wall_time_s")
    job = manifest.get("job") or {}
    row["job_id"], row["log"] = job.get("job_id"), job.get("stderr")
    row["overrides"] = " ".join(overrides)
    row["config"] = json.dumps(redact_secrets(manifest.get("config") or {}), sort_keys=True, default=str)
    row["run_dir"] = str(d)
    return row


def _with_jobs(rows: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row's ``status`` and ``error`` from the launcher's ``jobs.json``, plus one row for
    every job that left no run directory (failed, cancelled, never started)."""
    from medimg_bench.engine.results import redact_secrets

    by_id = {r["job_id"]: r for r in rows if r.get("job_id")}
    by_dir = {r["job"]: r for r in rows}
    for entry in jobs:
        row = by_id.get(entry.get("job_id")) or by_dir.get(str(entry.get("num")))
        state, error = str(entry.get("state") or "SUBMITTED"), entry.get("error")
        if row is not None and row.get("job_id") not in (None, entry.get("job_id")):
            continue  # a later job (resume=) wrote this run directory: its results stand
        if row is None:
            overrides = [str(o) for o in redact_secrets(list(entry.get("overrides") or []))]
            row = {"job": str(entry.get("num")), "overrides": " ".join(overrides), "config": "{}", "run_dir": None}
            _swept(overrides, row)
            rows.append(row)
        # a job that completed keeps its run's status (failed_samples when its samples failed)
        row["status"] = row.get("status", "ok") if state == "COMPLETED" else state.lower()
        row["error"] = error
        row["job_id"], row["log"] = entry.get("job_id"), entry.get("stderr") or row.get("log")
    for row in rows:
        row.setdefault("status", "ok")
    return rows


def sweep_table(multirun_dir: str | Path) -> Any:
    """A DataFrame with one row per run directory under ``multirun_dir`` (see module docstring)."""
    import pandas as pd

    from medimg_bench.runs.slurm import read_jobs

    root = Path(multirun_dir)
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    dirs, jobs = _run_dirs(root), read_jobs(root)
    if not dirs and not jobs:
        raise ValueError(f"{root}: no run directory (summary.json + manifest.json) below it")
    rows = [_run_row(root, d) for d in dirs]
    scheduled = bool(jobs) or any(r.get("job_id") for r in rows)
    if jobs:
        rows = _with_jobs(rows, jobs)
    for r in rows if scheduled else ():
        r.setdefault("status", "ok")
    if not scheduled:  # a sweep run in this process (Hydra's basic launcher): no job columns
        for r in rows:
            r.pop("job_id", None), r.pop("log", None)
    table = pd.DataFrame(rows)
    tail = [c for c in ("status", "error", "job_id", "log", "overrides", "config", "run_dir") if c in table.columns]
    table = table[[c for c in table.columns if c not in tail] + tail]
    for col in ("n_samples", "n_failed", "n_excluded"):  # counts stay integers beside a job without results
        if col in table.columns:
            table[col] = table[col].astype("Int64")
    for col in table.columns:  # one type per column for Parquet
        if table[col].dtype == object and col not in ("job", "overrides", "config", "run_dir"):
            kinds = {type(v) for v in table[col] if v is not None}
            if len(kinds) > 1 or kinds - {str, int, float, bool}:
                table[col] = table[col].map(lambda v: None if v is None else str(v))
    return table


def _status(summary: dict[str, Any], manifest: dict[str, Any]) -> str:
    """``failed_samples`` when the run scored no sample or failed more than its ``max_failure_rate`` (the
    CLI exited 3 for it), else ``ok``."""
    n, failed = int(summary.get("n_samples") or 0), int(summary.get("n_failed") or 0)
    rate = (manifest.get("config") or {}).get("max_failure_rate")
    rate = 1.0 if rate is None else float(rate)
    return "failed_samples" if n - failed <= 0 or failed > rate * n else "ok"


def _markdown(table: Any) -> str:
    import pandas as pd

    shown = [c for c in table.columns if c not in ("config", "run_dir", "overrides")]
    lines = ["| " + " | ".join(shown) + " |", "|" + "|".join(" --- " for _ in shown) + "|"]
    for _, r in table.iterrows():
        cells = []
        for c in shown:
            v = r[c]
            missing = v is None or v is pd.NA or (isinstance(v, float) and v != v)
            text = "" if missing else (f"{v:.4f}" if isinstance(v, float) else str(v))
            cells.append((text[:117] + "..." if len(text) > 120 else text).replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_sweep(multirun_dir: str | Path, *, out: str | Path | None = None) -> tuple[Path, Path]:
    """Write ``sweep.parquet`` and ``sweep.md``; returns their paths."""
    table = sweep_table(multirun_dir)
    out_dir = Path(out) if out else Path(multirun_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pq, md = out_dir / "sweep.parquet", out_dir / "sweep.md"
    table.to_parquet(pq, index=False)
    text = f"# Sweep {Path(multirun_dir)}\n\n{len(table)} runs.\n\n" + _markdown(table)
    if any(json.loads(c).get("protocol") for c in table["config"]):
        # protocol runs: also the mean/std/CI over seeds (medimg_bench.protocols.aggregate_seeds)
        try:
            from medimg_bench.protocols import write_seed_table
        except ImportError:  # pragma: no cover - protocols not installed
            write_seed_table = None
        if write_seed_table is not None:
            seeds_md = write_seed_table(multirun_dir)
            text += f"\nOver seeds (protocol runs): see `{Path(seeds_md).name}` and `seeds.parquet`.\n"
    md.write_text(text)
    return pq, md


def pd_read(path: Path) -> Any:
    import pandas as pd

    return pd.read_parquet(path)


def _unfinished_hint(table: Any, root: Path) -> str | None:
    """What to run for the jobs that did not finish: ``resume=`` of those that left a run
    directory (a checkpoint), the overrides of the others; None when every job finished."""
    if "status" not in table.columns:
        return None
    # a job status (failed, cancelled, timeout…) is a job that did not finish; failed_samples ran
    # to the end with its samples failing: running it again as it is changes nothing
    bad = table[~table["status"].isin(["ok", "failed_samples"])]
    if bad.empty:
        return None
    lines = [f"{len(bad)} of {len(table)} jobs did not finish (status, job id and log in the table)."]
    dirs = [str(root / j) for j in bad["job"] if (root / str(j) / "checkpoint").is_dir()]
    if dirs:
        lines.append("Continue those with a checkpoint (each with its own overrides; add your launcher options):\n"
                     f"  medimg-bench run -m hydra/launcher=slurm resume={','.join(dirs)}")
    rest = [f"  medimg-bench run {o}" for j, o in zip(bad["job"], bad["overrides"])
            if str(root / str(j)) not in dirs]
    if rest:
        lines.append("Run the others again:\n" + "\n".join(rest))
    return "\n".join(lines)


def cli_main(argv: Sequence[str]) -> int:
    """``medimg-bench sweep MULTIRUN_DIR [--out DIR]``; exit 0 written, 1 nothing found, 3 written
    but a run in it failed its samples (status ``failed_samples``)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="medimg-bench sweep",
                                     description="One table (Parquet + Markdown) of a multirun's run directories.")
    parser.add_argument("multirun_dir")
    parser.add_argument("--out", default=None, help="folder for sweep.parquet / sweep.md (default: MULTIRUN_DIR)")
    args = parser.parse_args(list(argv))
    try:
        pq, md = write_sweep(args.multirun_dir, out=args.out)
    except ValueError as exc:
        print(f"medimg-bench sweep: {exc}", file=sys.stderr)
        return 1
    print(md.read_text())
    hint = _unfinished_hint(pd_read(pq), Path(args.multirun_dir))
    if hint:
        print(hint)
    from medimg_bench.report import write_report

    page = write_report([args.multirun_dir], out=md.parent / "report.html")  # the runs side by side
    print(f"wrote {pq}, {md} and {page}")
    import pandas as pd

    table = pd.read_parquet(pq, columns=["job", "n_samples", "n_failed", "status"])
    n, bad = int(table["n_samples"].fillna(0).sum()), int(table["n_failed"].fillna(0).sum())
    failed = table.loc[table["status"] == "failed_samples", "job"].tolist()
    line = f"scored {n - bad} of {n} samples ({bad} failed) in {len(table)} run(s)"
    if failed:  # a sweep with a failed run is not a table of results: exit 3, as the CLI did for it
        print(f"{line}; {len(failed)} run(s) FAILED (no sample scored, or more than max_failure_rate "
              f"failed): {', '.join(failed[:10])}", file=sys.stderr)
        return 3
    print(line)
    return 0
