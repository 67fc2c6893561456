"""The summary table of a run, printed to the console (rich)."""

from __future__ import annotations

from typing import Any

__all__ = ["summary_table", "subgroup_table", "print_summary", "print_exclusions", "empty_classes", "class_notes"]


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}"


def _ci(e: Any) -> str:
    return f"[{_fmt(e.get('ci_low'))}, {_fmt(e.get('ci_high'))}]"


def _class_label(per_class: dict[str, Any], cname: str) -> str:
    """A dataset-level figure (one entry named ``0``: VQA accuracy, report BLEU) has no class."""
    return "" if len(per_class) == 1 and cname == "0" else cname


def _value(v: Any) -> Any:
    return v.get("value", v.get("mean")) if isinstance(v, dict) else None


def empty_classes(results: Any) -> list[str]:
    """Classes of a multi-class run with no value for any metric (absent from every case, e.g.
    most of TotalSegmentator's 117 on one scan): the console summarises them in one line."""
    metrics = results.summary.get("metrics", {})
    per = [m.get("per_class", {}) for m in metrics.values() if len(m.get("per_class", {})) > 1]
    if not per:
        return []
    names = list(dict.fromkeys(c for p in per for c in p))
    return [c for c in names if all(_value(p.get(c)) is None for p in per)]


def _n_patients(results: Any) -> int | None:
    samples = getattr(results, "samples", None)
    if samples is None or "patient_id" not in samples.columns or "status" not in samples.columns:
        return None
    return int(samples.loc[samples["status"] == "ok", "patient_id"].nunique())


def summary_table(results: Any) -> Any:
    """A rich Table: one row per metric × class (and the macro mean) with the CI; the class
    column is left out when every metric is dataset-level. Classes with no value anywhere are
    left out (:func:`empty_classes`; the mean row says over how many classes it is); with one
    patient the interval column says why it is empty."""
    from rich.table import Table

    s = results.summary
    metrics = s.get("metrics", {})
    pct = int(round(100 * s.get("confidence", 0.95)))
    show_class = any(_class_label(m.get("per_class", {}), c) for m in metrics.values() for c in m.get("per_class", {}))
    hidden = set(empty_classes(results))
    one = _n_patients(results) == 1
    excluded = f", {s['n_excluded']} excluded" if s.get("n_excluded") else ""
    table = Table(title=f"{results.name} — {s.get('n_samples', 0)} samples, {s.get('n_failed', 0)} failed{excluded}")
    for col in ("metric", "class", "value", f"{pct}% CI", "n"):
        if col != "class" or show_class:
            table.add_column(col, justify="right" if col in ("value", "n") else "left")

    def ci(e: Any) -> str:
        none = e.get("ci_low") is None and e.get("ci_high") is None
        return "— (1 patient: no interval)" if one and none else _ci(e)

    for name, m in metrics.items():
        per_class = m.get("per_class", {})
        for cname, v in per_class.items():
            if cname in hidden:
                continue
            cells = [name, _class_label(per_class, cname), _fmt(_value(v)), ci(v), str(v.get("n", ""))]
            table.add_row(*(cells if show_class else cells[:1] + cells[2:]))
        if "mean" in m and len(per_class) > 1:
            mm = m["mean"]
            valued = sum(_value(v) is not None for v in per_class.values())
            label = "mean" if valued == len(per_class) else f"mean ({valued} of {len(per_class)})"
            cells = [f"[bold]{name}", f"[bold]{label}", f"[bold]{_fmt(mm.get('value'))}", ci(mm), ""]
            table.add_row(*(cells if show_class else cells[:1] + cells[2:]))
    return table


def class_notes(results: Any) -> list[str]:
    """One line for the classes the table leaves out, one for the cases whose prediction is empty
    where the reference has the class (a missed structure: its distances are set by the
    convention's empty-prediction rule and can drive a mean)."""
    lines = []
    hidden = empty_classes(results)
    if hidden:
        shown = ", ".join(hidden[:12]) + (f", … ({len(hidden) - 12} more)" if len(hidden) > 12 else "")
        lines.append(f"{len(hidden)} class(es) have no value in any case (absent from reference and prediction), "
                     f"not listed: {shown}")
    samples = getattr(results, "samples", None)
    if samples is not None and {"target_voxels", "pred_voxels", "class", "status"} <= set(samples.columns):
        ok = samples[samples["status"] == "ok"]
        missed = ok[(ok["target_voxels"] > 0) & (ok["pred_voxels"] == 0)]
        if len(missed):
            names = sorted(set(missed["class"].astype(str)))
            lines.append(f"MISSED: the prediction is empty where the reference has the class in {len(missed)} "
                         f"case(s) of {len(names)} class(es) ({', '.join(names[:8])}{', …' if len(names) > 8 else ''}): "
                         "their distances (HD95, ASSD…) follow the convention's empty-prediction rule "
                         "(e.g. the image diagonal) and can drive the mean")
    return lines


def subgroup_table(results: Any) -> Any:
    """A rich Table of ``summary["subgroups"]``: one row per attribute × metric × group (value,
    CI, n) and the gap (best − worst group) on the attribute's first row of each metric; None
    when the run has no subgroups."""
    from rich.table import Table

    groups = results.summary.get("subgroups") or {}
    if not groups:
        return None
    table = Table(title="subgroups")
    entries = [e for per_metric in groups.values() for g in (per_metric or {}).values()
               if isinstance(g, dict) for e in (g.get("per_group") or {}).values()]
    with_ci = any(e.get("ci_low") is not None or e.get("ci_high") is not None for e in entries)
    for col in ("attribute", "metric", "group", "value", "CI", "n", "gap"):
        if col != "CI" or with_ci:  # never computed (no bootstrap per group): no column of dashes
            table.add_column(col, justify="right" if col in ("value", "n", "gap") else "left")
    for attr, per_metric in groups.items():
        for metric, g in (per_metric or {}).items():
            if not isinstance(g, dict) or "per_group" not in g:
                continue
            for i, (name, e) in enumerate(g["per_group"].items()):
                gap = _fmt(g.get("gap")) if i == 0 else ""
                cells = [attr, metric, str(name), _fmt(e.get("value")), _ci(e), str(e.get("n", "")), gap]
                table.add_row(*(cells if with_ci else cells[:4] + cells[5:]))
    return table


def print_summary(results: Any, console: Any = None) -> None:
    """Print :func:`summary_table`, :func:`subgroup_table` (if any) and failed samples."""
    from rich.console import Console

    console = console or Console()
    console.print(summary_table(results))
    for line in class_notes(results):
        console.print(line)
    sub = subgroup_table(results)
    if sub is not None:
        console.print(sub)
    failed = results.samples[results.samples["status"] == "failed"]
    for _, row in failed.drop_duplicates("id").head(10).iterrows():
        console.print(f"[red]failed[/red] {row['id']}: {row['error']}")
    print_exclusions(results.summary, console)


def print_exclusions(summary: Any, console: Any, *, limit: int = 10) -> None:
    """One line counting the items the layout lists that are not samples (``n_excluded``), then
    the first ``limit`` with their file and reason; nothing when there are none."""
    from rich.markup import escape

    rows = summary.get("exclusions") or []
    if not summary.get("n_excluded"):
        return
    console.print(f"[yellow]{summary['n_excluded']} item(s) of the layout excluded[/yellow] (not samples; "
                  "summary.json 'exclusions', report.html)")
    for e in rows[:limit]:
        where = f" ({e['file']})" if e.get("file") else ""
        console.print(f"[yellow]excluded[/yellow] {escape(str(e['id']))}{escape(where)}: {escape(str(e['reason']))}")
