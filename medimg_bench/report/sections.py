"""The parts of a run's page that every task has: the header, the summary with intervals, the
per-class tables, subgroups (per category), failures, plots and the run's configuration."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from medimg_bench._secrets import redact_secrets
from medimg_bench.report.html import ci_cell, details, esc, fmt, img, note, table
from medimg_bench.report.rundir import RunData

__all__ = ["header", "summary_section", "per_class_section", "subgroup_section", "failure_section",
           "exclusion_section", "plot_section", "run_info_section", "metric_value", "single_class",
           "MAX_FAILURE_ROWS"]

#: failed samples listed on the page (the rest are counted)
MAX_FAILURE_ROWS = 500


def metric_value(entry: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """(value, ci_low, ci_high) of a summary entry (``mean`` for per-sample, ``value`` for
    dataset-level and macro entries)."""
    value = entry.get("value", entry.get("mean"))
    if isinstance(value, Mapping):
        value = value.get("value")
    return value, entry.get("ci_low"), entry.get("ci_high")


def single_class(m: Mapping[str, Any]) -> bool:
    """True for a metric with one figure for the whole dataset (VQA accuracy, corpus BLEU): its
    only "class" is a placeholder and is not shown."""
    per_class = m.get("per_class") or {}
    return len(per_class) <= 1


def _arrow(m: Mapping[str, Any]) -> str:
    hib = m.get("higher_is_better")
    return "" if hib is None else (" ↑" if hib else " ↓")


def header(run: RunData, *, title: str | None = None) -> str:
    """Title and one line each: what ran, on how many samples, when and where."""
    s, man = run.summary, run.manifest
    what = " · ".join(x for x in (f"task {run.task}" if run.task else "", f"dataset {run.dataset}" if run.dataset else "",
                                  f"model {run.model}" if run.model else "",
                                  f"protocol {run.protocol}" if run.protocol else "") if x)
    counts = f"{s.get('n_samples', '—')} samples, {s.get('n_failed', 0)} failed"
    if s.get("n_excluded"):
        counts += f", {s['n_excluded']} excluded"
    when = " · ".join(x for x in (str(man.get("start_time") or ""),
                                  f"{fmt(man.get('wall_time_s'), 1)} s" if man.get("wall_time_s") is not None else "",
                                  f"device {man.get('device')}" if man.get("device") else "") if x)
    lines = [f"<h1>{esc(title or man.get('name') or run.path.name)}</h1>",
             f'<p class="meta">{esc(what)}</p>', f'<p class="meta">{esc(counts)} · {esc(when)}</p>',
             f'<p class="meta">{esc(str(run.path))}</p>']
    lines += [note(p, warn=True) for p in run.problems]
    return "".join(lines)


def summary_section(run: RunData) -> str:
    """One row per metric: the dataset figure (macro mean over classes where there are several)
    and its interval."""
    s = run.summary
    pct = int(round(100 * float(s.get("confidence") or 0.95)))
    rows = []
    for name, m in (s.get("metrics") or {}).items():
        value, low, high = metric_value(m.get("mean") or {})
        if value is None and single_class(m) and m.get("per_class"):
            value, low, high = metric_value(next(iter(m["per_class"].values())))
        per = m.get("per_class") or {}
        counts = [e.get("n") for e in per.values() if isinstance(e.get("n"), int)]
        n = m.get("n") if m.get("n") is not None else (max(counts) if counts else s.get("n_samples", ""))
        scope = "dataset" if single_class(m) else _macro_scope(per)
        rows.append([f"{name}{_arrow(m)}", m.get("kind", ""), scope, _num(value), ci_cell(low, high), n])
    if not rows:
        return note("summary.json holds no metric.")
    interval = f"{pct}% CI"
    boot = (f"Intervals: {pct}% bootstrap over patients ({s.get('n_resamples', '?')} resamples) unless the "
            "metric says otherwise (corpus figures: the pipeline's own resampling).")
    return table(["metric", "kind", "scope", "value", interval, "n"], rows) + note(boot)


def _macro_scope(per_class: dict[str, Any]) -> str:
    """``macro over K classes``, or ``macro over K of N classes (N - K without a value)`` when
    the mean is taken over the classes that have one (a 117-class map with 41 organs present)."""
    valued = [c for c, e in per_class.items() if _is_number(metric_value(e)[0])]
    if len(valued) == len(per_class):
        return f"macro over {len(per_class)} classes"
    return f"macro over {len(valued)} of {len(per_class)} classes ({len(per_class) - len(valued)} without a value)"


def _is_number(value: Any) -> bool:
    return value is not None and not math.isnan(float(value))


def _num(value: Any, digits: int = 3) -> dict[str, Any]:
    v = None if value is None else float(value)
    return {"html": fmt(v, digits), "sort": "" if v is None or math.isnan(v) else v, "cls": "num"}


def per_class_section(run: RunData) -> str:
    """Per class: every metric's value and interval (one table per set of classes), and for
    segmentation the cases where a structure is absent / missed / present."""
    metrics = run.summary.get("metrics") or {}
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, m in metrics.items():
        if single_class(m):
            continue
        groups.setdefault(tuple(m["per_class"]), []).append(name)
    if not groups:
        return ""
    parts = []
    cases = run.summary.get("cases") or {}
    for class_names, names in groups.items():
        cols = ["class"]
        for n in names:
            cols += [f"{n}{_arrow(metrics[n])}", f"{n} CI"]
        extra = [k for k in ("present", "absent", "missed") if cases and all(c in cases for c in class_names)]
        cols += [f"cases {k}" for k in extra]
        rows = []
        for c in class_names:
            row: list[Any] = [c]
            for n in names:
                v, lo, hi = metric_value(metrics[n]["per_class"][c])
                row += [_num(v), ci_cell(lo, hi)]
            row += [cases[c].get(k, "") for k in extra]
            rows.append(row)
        macro: list[Any] = [{"html": "<b>macro mean</b>", "sort": ""}]
        for n in names:
            v, lo, hi = metric_value(metrics[n].get("mean") or {})
            macro += [_num(v), ci_cell(lo, hi)]
        macro += ["" for _ in extra]
        rows.append(macro)
        parts.append(table(cols, rows, row_classes=[""] * (len(rows) - 1) + ["macro"]))
    if cases:
        parts.append(note("cases: present = the structure is in the reference; absent = in neither reference "
                          "nor prediction; missed = in the reference, not predicted."))
    return "".join(parts)


def subgroup_section(run: RunData) -> str:
    """``summary["subgroups"]``: per attribute, each metric's value per group with its interval,
    then the gap, ratio, equity-scaled score and worst group."""
    sub = run.summary.get("subgroups") or {}
    parts = []
    for attribute, by_metric in sub.items():
        groups: list[str] = []
        for res in by_metric.values():
            groups += [g for g in (res.get("per_group") or {}) if g not in groups]
        cols = [attribute]
        for metric in by_metric:
            cols += [metric, f"{metric} CI", f"{metric} n"]
        rows = []
        for g in groups:
            row: list[Any] = [g]
            for res in by_metric.values():
                e = (res.get("per_group") or {}).get(g) or {}
                row += [_num(e.get("value")), ci_cell(e.get("ci_low"), e.get("ci_high")), e.get("n", "")]
            rows.append(row)
        gaps = [[metric, _num(res.get("overall")), _num(res.get("gap")), _num(res.get("ratio")),
                 _num(res.get("equity_scaled")), res.get("worst_group") or ""] for metric, res in by_metric.items()]
        parts.append(f"<h3>{esc(attribute)}</h3>" + table(cols, rows)
                     + table(["metric", "overall", "gap", "ratio", "equity-scaled", "worst group"], gaps))
    if (run.path / "per_category.csv").is_file() and parts:
        parts.append(note("The same figures are in per_category.csv beside summary.json."))
    return "".join(parts)


def failure_section(run: RunData) -> str:
    """Failed samples: id, the stage that failed and the error (empty when none failed)."""
    samples = run.samples
    if samples is None or "status" not in samples:
        ids = run.summary.get("failed_ids") or []
        return table(["id"], [[i] for i in ids]) if ids else ""
    failed = samples[samples["status"] == "failed"].drop_duplicates("id")
    if failed.empty:
        return ""
    rows = []
    for sid, error in zip(failed["id"].tolist()[:MAX_FAILURE_ROWS], failed["error"].tolist()[:MAX_FAILURE_ROWS]):
        text = str(error or "")
        stage = text[1:text.index("]")] if text.startswith("[") and "]" in text else ""
        rows.append([sid, stage, {"html": f'<div class="text">{esc(text)}</div>'}])
    more = len(failed) - len(rows)
    tail = note(f"{more} more failed samples are in samples.parquet (status == 'failed').") if more > 0 else ""
    return table(["id", "stage", "error"], rows) + tail


def exclusion_section(run: RunData) -> str:
    """Items the dataset's layout lists that are not samples (``summary["exclusions"]``): id,
    file and reason (empty when there are none)."""
    s = run.summary
    items = s.get("exclusions") or []
    if not s.get("n_excluded") and not items:
        return ""
    rows = [[e.get("id", ""), e.get("file", ""), {"html": f'<div class="text">{esc(str(e.get("reason", "")))}</div>'}]
            for e in items[:MAX_FAILURE_ROWS]]
    more = int(s.get("n_excluded") or len(items)) - len(rows)
    tail = note(f"{more} more exclusions are in summary.json ('exclusions').") if more > 0 else ""
    return (note(f"{s.get('n_excluded', len(items))} item(s) the dataset's layout lists are not samples of this "
                 "run: they are in no figure above.", warn=True)
            + table(["id", "file", "reason"], rows) + tail)


def plot_section(run: RunData) -> str:
    """The run's ``plots/*.png``, inlined."""
    folder = run.path / "plots"
    if not folder.is_dir():
        return ""
    parts = []
    for p in sorted(folder.glob("*.png")):
        parts.append(f'<figure>{img(p.read_bytes(), alt=p.stem)}<figcaption class="note">{esc(p.name)}</figcaption></figure>')
    return f'<div class="plots cards">{"".join(parts)}</div>' if parts else ""


def run_info_section(run: RunData) -> str:
    """Versions, revision, training, the files of the run directory and its configuration."""
    man = run.manifest
    env = man.get("environment") or {}
    git = env.get("git") or {}
    rows = [["name", man.get("name", "")], ["start", man.get("start_time", "")], ["end", man.get("end_time", "")],
            ["wall time (s)", fmt(man.get("wall_time_s"), 1)], ["seed", man.get("seed", "")],
            ["device", man.get("device", "")], ["git revision", f"{git.get('revision') or '—'}{' (dirty)' if git.get('dirty') else ''}"],
            ["model fingerprint", json.dumps(man.get("model_fingerprint"), default=str)[:400] if man.get("model_fingerprint") else ""]]
    if man.get("training"):
        rows.append(["training", json.dumps(man["training"], default=str)[:600]])
    if run.overrides:
        rows.append(["overrides", " ".join(redact_secrets(run.overrides))])
    pk = env.get("packages") or {}
    rows.append(["packages", ", ".join(f"{k} {v}" for k, v in pk.items() if v)])
    files = sorted(p for p in run.path.iterdir() if not p.name.startswith(".") and p.name != "report.html")
    listing = ", ".join(f"{p.name}/" if p.is_dir() else p.name for p in files)
    rows.append(["files", listing])
    config = json.dumps(redact_secrets(run.config), indent=2, default=str)
    return (table([], rows, sortable=False)
            + details("resolved configuration (manifest.json, secrets redacted)", f"<pre>{esc(config)}</pre>"))
