"""Prints, at the end of a run, how many bad-input cases of tests/robustness were tried and how
many passed (per file), as docs/reliability.md reports them."""

from __future__ import annotations

from collections import Counter


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    counts: dict[str, Counter] = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if "tests/robustness/" not in nodeid or getattr(report, "when", "call") not in ("call", "setup"):
                continue
            if outcome == "passed" and report.when != "call":
                continue
            counts.setdefault(nodeid.split("::")[0], Counter())[outcome] += 1
    for path, c in sorted(counts.items()):
        tried = c["passed"] + c["failed"] + c["error"]
        terminalreporter.write_line(
            f"bad-input cases {path}: {c['passed']} passed of {tried} tried"
            f" ({c['skipped']} skipped as not applicable)"
        )
