"""The summary table of a run, printed to the console (rich)."""

from __future__ import annotations

from typing import Any

__all__ = ["summary_table", "subgroup_table", "print_summary", "print_exclusions"]


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}"


def _ci(e: Any) -> str:
    return f"[{_fmt(e.get('ci_low'))}, {_fmt(e.get('ci_high'))}]"


def _class_label(per_class: dict[str, Any], cname: str) -> str:
    """A dataset-level figure (one entry named ``0``: VQA accuracy, report BLEU) has no class."""
    return "" if len(per_class) == 1 and cname == "0" else cname


def summary_table(results: Any) -> Any:
    """A rich Table: one row per metric × class (and the macro mean) with the CI; the class
    column is left out when every metric is dataset-level."""
    from rich.table import Table

    s = results.summary
    metrics = s.get("metrics", {})
    pct = int(round(100 * s.get("confidence", 0.95)))
    show_class = any(_class_label(m.get("per_class", {}), c) for m in metrics.values() for c in m.get("per_class", {}))
    excluded = f", {s['n_excluded']} excluded" if s.get("n_excluded") else ""
    table = Table(title=f"{results.name} — {s.get('n_samples', 0)} samples, {s.get('n_failed', 0)} failed{excluded}")
    for col in ("metric", "class", "value", f"{pct}% CI", "n"):
        if col != "class" or show_class:
            table.add_column(col, justify="right" if col in ("value", "n") else "left")
    for name, m in metrics.items():
        per_class = m.get("per_class", {})
        for cname, v in per_class.items():
            value = v.get("value", v.get("mean"))
            cells = [name, _class_label(per_class, cname), _fmt(value), _ci(v), str(v.get("n", ""))]
            table.add_row(*(cells if show_class else cells[:1] + cells[2:]))
        if "mean" in m and len(per_class) > 1:
            mm = m["mean"]
            cells = [f"[bold]{name}", "[bold]mean", f"[bold]{_fmt(mm.get('value'))}", _ci(mm), ""]
            table.add_row(*(cells if show_class else cells[:1] + cells[2:]))
    return table


def subgroup_table(results: Any) -> Any:
    """A rich Table of ``summary["subgroups"]``: one row per attribute × metric × group (value,
    CI, n) and the gap (best − worst group) on the attribute's first row of each metric; None
    when the run has no subgroups."""
    from rich.table import Table

    groups = results.summary.get("subgroups") or {}
    if not groups:
        return None
    table = Table(title="subgroups")
    for col in ("attribute", "metric", "group", "value", "CI", "n", "gap"):
        table.add_column(col, justify="right" if col in ("value", "n", "gap") else "left")
    for attr, per_metric in groups.items():
        for metric, g in (per_metric or {}).items():
            if not isinstance(g, dict) or "per_group" not in g:
                continue
            for i, (name, e) in enumerate(g["per_group"].items()):
                gap = _fmt(g.get("gap")) if i == 0 else ""
                table.add_row(attr, metric, str(name), _fmt(e.get("value")), _ci(e), str(e.get("n", "")), gap)
    return table


def print_summary(results: Any, console: Any = None) -> None:
    """Print :func:`summary_table`, :func:`subgroup_table` (if any) and failed samples."""
    from rich.console import Console

    console = console or Console()
    console.print(summary_table(results))
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
