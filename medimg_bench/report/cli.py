"""``medimg-bench report RUN_DIR [RUN_DIR…]``: write ``report.html`` for one run, for every run
below a folder (a benchmark, a multirun) or for several runs side by side."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["cli_main"]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="medimg-bench report",
        description="Write a self-contained report.html (summary with intervals, per-class and subgroup "
        "tables, worst samples with pictures, failures, plots) from run directories. One run: "
        "RUN_DIR/report.html; a folder of runs (benchmark, sweep): FOLDER/report.html; several: ./report.html.",
    )
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories, or folders holding run directories")
    ap.add_argument("--out", default=None, help="where to write the page (a file, or a folder for report.html)")
    ap.add_argument("--title", default=None, help="the page title")
    ap.add_argument("--pictures", type=int, default=None,
                    help="samples shown with pictures per run (default 8; 4 per run on a page of several)")
    ap.add_argument("--paired", default=None, metavar="JSON",
                    help="the table `medimg-bench compare A B --out FILE.json` wrote, shown above two runs")
    return ap


def cli_main(argv: Sequence[str]) -> int:
    """Exit 0 written, 2 nothing to show (the message names the path and what is missing)."""
    args = _parser().parse_args(list(argv))
    from medimg_bench.report.page import write_report

    try:
        paired = None
        if args.paired:
            try:
                paired = json.loads(Path(args.paired).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ValueError(f"--paired {args.paired}: cannot read the comparison table ({exc})") from exc
            if not isinstance(paired, list):
                raise ValueError(f"--paired {args.paired}: expected a JSON list of rows (compare --out)")
        path = write_report(args.runs, out=args.out, paired=paired, title=args.title, pictures=args.pictures)
    except ValueError as exc:
        print(f"medimg-bench report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0
