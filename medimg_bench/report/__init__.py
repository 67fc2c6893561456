"""The run page: a self-contained ``report.html`` for a run directory, or for several side by
side (a benchmark, a sweep, a ``compare``). It reads what a run wrote — ``summary.json``,
``samples.parquet``, ``manifest.json``, ``plots/``, ``worst/`` and the task's files — and never
runs the model again; input images are read again through the dataset of the saved config.
See docs/report.md."""

from __future__ import annotations

from medimg_bench.report.page import REPORT_FILE, report_html, write_report
from medimg_bench.report.rundir import RunData, find_runs, load_run

__all__ = ["REPORT_FILE", "RunData", "find_runs", "load_run", "report_html", "write_report"]
