"""The summary table of a run, printed to the console (rich)."""

from __future__ import annotations

from typing import Any

__all__ = ["summary_table", "print_summary"]


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}"


def summary_table(results: Any) -> Any:
    """A rich Table: one row per metric × class (and the macro mean) with the CI."""
    from rich.table import Table

    s = results.summary
    pct = int(round(100 * s.get("confidence", 0.95)))
    table = Table(title=f"{results.name} — {s.get('n_samples', 0)} samples, {s.get('n_failed', 0)} failed")
    for col in ("metric", "class", "value", f"{pct}% CI", "n"):
        table.add_column(col, justify="right" if col in ("value", "n") else "left")
    for name, m in s.get("metrics", {}).items():
        for cname, v in m.get("per_class", {}).items():
            value = v.get("mean", v.get("value"))
            table.add_row(name, cname, _fmt(value), f"[{_fmt(v.get('ci_low'))}, {_fmt(v.get('ci_high'))}]", str(v.get("n", "")))
        if "mean" in m and len(m.get("per_class", {})) > 1:
            mm = m["mean"]
            table.add_row(f"[bold]{name}", "[bold]mean", f"[bold]{_fmt(mm.get('value'))}", f"[{_fmt(mm.get('ci_low'))}, {_fmt(mm.get('ci_high'))}]", "")
    return table


def print_summary(results: Any, console: Any = None) -> None:
    """Print :func:`summary_table` (and failed samples, if any) to the console."""
    from rich.console import Console

    console = console or Console()
    console.print(summary_table(results))
    failed = results.samples[results.samples["status"] == "failed"]
    for _, row in failed.drop_duplicates("id").head(10).iterrows():
        console.print(f"[red]failed[/red] {row['id']}: {row['error']}")
