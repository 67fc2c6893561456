"""The page: one run, or several side by side (a benchmark, a sweep, ``compare``), written as one
self-contained ``report.html``."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medimg_bench._fs import atomic_write
from medimg_bench.report.html import details, esc, fmt, note, page, section, table, value_ci
from medimg_bench.report.rundir import RunData, find_runs, label_runs, load_run
from medimg_bench.report.sections import (
    exclusion_section,
    failure_section,
    header,
    metric_value,
    per_class_section,
    plot_section,
    run_info_section,
    subgroup_section,
    summary_section,
)
from medimg_bench.report.worst import worst_section

__all__ = ["report_html", "write_report", "REPORT_FILE", "PICTURES", "PICTURES_MULTI"]

REPORT_FILE = "report.html"
#: samples shown with pictures per run (on a page of several runs: per run)
PICTURES, PICTURES_MULTI = 8, 4


def _run_sections(run: RunData, *, prefix: str, pictures: int) -> list[tuple[str, str, str]]:
    """(anchor, title, html) of each non-empty part of one run's page."""
    parts = [("summary", "Summary", summary_section(run)), ("per-class", "Per class", per_class_section(run)),
             ("subgroups", "Subgroups", subgroup_section(run)),
             ("worst", "Worst samples", worst_section(run, pictures=pictures)),
             ("failures", f"Failures ({run.summary.get('n_failed', 0)})", failure_section(run)),
             ("exclusions", f"Exclusions ({run.summary.get('n_excluded', 0)})", exclusion_section(run)),
             ("plots", "Plots", plot_section(run)), ("run", "Run", run_info_section(run))]
    return [(f"{prefix}{a}", t, h) for a, t, h in parts if h]


def _single(run: RunData, *, pictures: int) -> tuple[str, list[tuple[str, str]]]:
    parts = _run_sections(run, prefix="", pictures=pictures)
    body = header(run) + "".join(section(a, t, h) for a, t, h in parts)
    return body, [(a, t.split(" (")[0]) for a, t, _ in parts]


def _macro(m: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    value, low, high = metric_value(m.get("mean") or {})
    if value is None and len(m.get("per_class") or {}) == 1:
        value, low, high = metric_value(next(iter(m["per_class"].values())))
    return value, low, high


def _num(v: Any) -> dict[str, Any]:
    x = None if v is None else float(v)
    return {"html": fmt(x), "sort": "" if x is None or math.isnan(x) else x, "cls": "num"}


def _overview(runs: Sequence[RunData], anchors: Sequence[str]) -> str:
    """Per task: one row per run, the macro value and interval of every metric."""
    by_task: dict[str, list[int]] = {}
    for k, r in enumerate(runs):
        by_task.setdefault(r.task or "run", []).append(k)
    parts = []
    for task, idx in by_task.items():
        names: list[str] = []
        for k in idx:
            names += [n for n in (runs[k].summary.get("metrics") or {}) if n not in names]
        cols = ["run", "dataset", "model", "n", "failed", "excluded", "wall s", *names]
        rows = []
        for k in idx:
            r = runs[k]
            row: list[Any] = [{"html": f'<a href="#{anchors[k]}">{esc(r.label)}</a>', "sort": r.label}, r.dataset, r.model,
                              r.summary.get("n_samples", ""), r.summary.get("n_failed", ""),
                              r.summary.get("n_excluded", ""), _num(r.manifest.get("wall_time_s"))]
            for n in names:
                m = (r.summary.get("metrics") or {}).get(n)
                row.append(value_ci(*(_macro(m) if m else (None, None, None))))
            rows.append(row)
        parts.append(f"<h3>{esc(task)}</h3>" + table(cols, rows))
    return "".join(parts)


def _side_by_side(runs: Sequence[RunData]) -> str:
    """Runs of one task with the same classes: per metric, a class × run table."""
    groups: dict[tuple[Any, ...], list[RunData]] = {}
    for r in runs:
        for name, m in (r.summary.get("metrics") or {}).items():
            per = tuple(m.get("per_class") or {})
            if len(per) > 1:
                groups.setdefault((r.task, name, per), []).append(r)
    parts = []
    for (_, name, classes), members in groups.items():
        if len(members) < 2:
            continue
        cols = ["class", *[r.label for r in members]]
        rows = []
        for c in [*classes, None]:
            row: list[Any] = [c if c is not None else {"html": "<b>macro mean</b>", "sort": ""}]
            for r in members:
                m = r.summary["metrics"][name]
                row.append(value_ci(*(metric_value(m["per_class"][c]) if c is not None else _macro(m))))
            rows.append(row)
        parts.append(details(f"{name} per class", table(cols, rows, row_classes=[""] * len(classes) + ["macro"]),
                             open_=not parts))
    return "".join(parts)


def _paired(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    """``compare``'s paired table: difference A − B, its interval and the test's p-value."""
    holm = any("p_holm" in r for r in rows)
    cols = ["metric", "class", f"A: {labels[0]}", f"B: {labels[1]}", "A − B [CI]", "p", *(["p (Holm)"] if holm else []), "test"]
    body = []
    for r in rows:
        body.append([r.get("metric"), "" if r.get("class") is None else str(r.get("class")), _num(r.get("estimate_a")),
                     _num(r.get("estimate_b")), value_ci(r.get("difference"), r.get("ci_low"), r.get("ci_high")),
                     _num(r.get("p_value")), *([_num(r.get("p_holm"))] if holm else []), r.get("test", "")])
    return table(cols, body) + note("Paired over the samples both runs scored; intervals from a paired bootstrap "
                                    "over patients (medimg-bench compare).")


def _multi(runs: Sequence[RunData], *, title: str, paired: Sequence[Mapping[str, Any]] | None,
           pictures: int) -> tuple[str, list[tuple[str, str]]]:
    anchors = [f"run{k}" for k in range(len(runs))]
    body = [f"<h1>{esc(title)}</h1>", f'<p class="meta">{len(runs)} runs</p>']
    nav = []
    if paired is not None:
        body.append(section("paired", "Paired comparison", _paired(paired, [r.label for r in runs[:2]])))
        nav.append(("paired", "Paired comparison"))
    body.append(section("overview", "Runs side by side", _overview(runs, anchors)))
    nav.append(("overview", "Side by side"))
    per_class = _side_by_side(runs)
    if per_class:
        body.append(section("per-class", "Per class, side by side", per_class))
        nav.append(("per-class", "Per class"))
    for k, r in enumerate(runs):
        parts = _run_sections(r, prefix=f"{anchors[k]}-", pictures=pictures)
        inner = header(r, title=r.label) + "".join(section(a, t, h) for a, t, h in parts)
        body.append(f'<section id="{anchors[k]}">{details(f"Run {k + 1}: {r.label}", inner, open_=len(runs) <= 3)}</section>')
    nav.append((anchors[0], "Each run"))
    return "".join(body), nav


def report_html(runs: Sequence[RunData], *, title: str | None = None,
                paired: Sequence[Mapping[str, Any]] | None = None, pictures: int | None = None) -> str:
    """The page for ``runs`` (one run: its own page; several: side by side, then each run);
    ``paired``: rows of :func:`medimg_bench.baselines.compare.compare_runs` for two runs."""
    if not runs:
        raise ValueError("report: no run to show")
    started = time.perf_counter()
    if len(runs) == 1 and paired is None:
        body, nav = _single(runs[0], pictures=PICTURES if pictures is None else pictures)
        name = title or runs[0].manifest.get("name") or runs[0].path.name
    else:
        name = title or f"{len(runs)} runs"
        body, nav = _multi(runs, title=name, paired=paired, pictures=PICTURES_MULTI if pictures is None else pictures)
    stamp = note(f"Written by medimg-bench report in {time.perf_counter() - started:.2f} s from the run "
                 "directories (the model was not run again). Opens offline: every picture is inline.")
    return page(f"medimg-bench: {name}", body + stamp, nav=nav)


def write_report(paths: Sequence[str | Path] | str | Path, *, out: str | Path | None = None,
                 paired: Sequence[Mapping[str, Any]] | None = None, title: str | None = None,
                 pictures: int | None = None) -> Path:
    """Write ``report.html`` for the run directories (or folders of runs) ``paths``; returns its
    path. Default place: inside the run directory (one run) or the folder given (one folder of
    runs), else ``./report.html``."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise ValueError("report: give at least one run directory")
    roots, dirs = [], []
    for p in paths:
        found = find_runs(p)
        dirs += [d for d in found if d not in dirs]
        roots.append(Path(p))
    runs = [load_run(d) for d in dirs]
    label_runs(runs, roots)
    if out is None:
        out = (Path(paths[0]) / REPORT_FILE) if len(paths) == 1 else Path(REPORT_FILE)
    out = Path(out)
    if out.is_dir():
        out = out / REPORT_FILE
    text = report_html(runs, title=title or _title(paths, runs), paired=paired, pictures=pictures)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(out, mode="w", fsync=False) as f:  # a reader never sees half a page
        f.write(text)
    return out


def _title(paths: Sequence[str | Path], runs: Sequence[RunData]) -> str | None:
    """A benchmark's name, a folder's name, or "A vs B"; None for one run (its own name)."""
    if len(runs) == 1:
        return None
    if len(paths) == 1:
        bench = Path(paths[0]) / "benchmark.json"
        try:
            name = json.loads(bench.read_text()).get("benchmark") if bench.is_file() else None
        except (OSError, ValueError):
            name = None
        folder = Path(paths[0]).resolve().name
        return f"benchmark {name} ({folder})" if name else f"{folder}: {len(runs)} runs"
    return " vs ".join(r.label for r in runs) if len(runs) == 2 else f"{len(runs)} runs"
