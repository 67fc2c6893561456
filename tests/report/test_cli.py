"""`medimg-bench report` and the commands that write a page: the subcommand's contract, `compare
--html` (the paired table above both runs), `sweep` (the jobs side by side), a protocol run's own
page, and `report=false`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd

from medimg_bench.cli import main
from medimg_bench.report.html import fmt
from tests.report._html import read_page, table_with
from tests.report.conftest import TINY


def test_report_help_exits_zero_and_lists_the_options():
    proc = subprocess.run([sys.executable, "-m", "medimg_bench.cli", "report", "--help"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "RUN_DIR" in proc.stdout and "--out" in proc.stdout and "--paired" in proc.stdout


def test_report_of_a_run_a_folder_and_a_missing_path(cls_run, vqa_run, runs_root, tmp_path, capsys):
    (cls_run / "report.html").unlink()
    assert main(["report", str(cls_run)]) == 0
    assert (cls_run / "report.html").is_file() and str(cls_run / "report.html") in capsys.readouterr().out
    assert main(["report", str(runs_root), "--out", str(tmp_path)]) == 0
    page = read_page(tmp_path / "report.html")
    assert {"cls", "vqa"} <= {r[0] for t in page.tables if t and t[0][:1] == ["run"] for r in t[1:]}
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such file or directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "no run directory (summary.json + manifest.json)" in capsys.readouterr().err


def test_compare_html_shows_the_paired_table_above_both_runs(cls_run, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(cls_run, other)
    s = pd.read_parquet(other / "samples.parquet")
    s["score"] = (s["score"] * 0.7 + 0.3 * s["label"].fillna(0)).clip(0, 1)  # a better model, same samples
    s.to_parquet(other / "samples.parquet", index=False)
    rows_json, html = tmp_path / "rows.json", tmp_path / "compare.html"
    assert main(["compare", str(cls_run), str(other), "--n-resamples", "50", "--out", str(rows_json),
                 "--html", str(html)]) == 0
    rows = json.loads(rows_json.read_text())
    page = read_page(html)
    paired = table_with(page, "metric", "class")
    assert paired[0][2].startswith("A: ") and paired[0][3].startswith("B: ")
    assert [(r[0], r[1]) for r in paired[1:]] == [(r["metric"], str(r["class"])) for r in rows]
    for cell, r in zip(paired[1:], rows):
        assert cell[2] == fmt(r["estimate_a"]) and cell[4].startswith(fmt(r["difference"]))
    assert page.sections[0] == "paired"
    # the same page from the saved table
    assert main(["report", str(cls_run), str(other), "--paired", str(rows_json), "--out", str(tmp_path / "p2.html")]) == 0
    assert table_with(read_page(tmp_path / "p2.html"), "metric", "class") == paired
    assert main(["report", str(cls_run), "--paired", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the comparison table" in capsys.readouterr().err


def test_sweep_writes_the_runs_side_by_side(runs_root, cls_run, seg_run, tmp_path):
    from medimg_bench.runs.sweep import cli_main

    assert cli_main([str(runs_root), "--out", str(tmp_path)]) == 0
    page = read_page(tmp_path / "report.html")
    names = {r[0] for t in page.tables if t and t[0][:3] == ["run", "dataset", "model"] for r in t[1:]}
    assert {"cls", "seg"} <= names


def test_protocol_runs_write_their_page_and_report_false_skips_it(tmp_path, synthetic_root, monkeypatch):
    from medimg_bench.runs import run

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(synthetic_root / "cache"))
    fast = ["dataset.options.n=24", "dataset.options.size=32", *TINY]
    run(["protocol=knn", "model=timm_resnet10t", *fast], run_dir=tmp_path / "knn")
    page = read_page(tmp_path / "knn" / "report.html")
    summary = json.loads((tmp_path / "knn" / "summary.json").read_text())
    rows = {r[0].split(" ")[0]: r for r in table_with(page, "metric", "kind", "scope")[1:]}
    assert rows["auroc"][3] == fmt(summary["metrics"]["auroc"]["mean"]["value"])
    run(["dataset.options.n=12", "dataset.options.size=16", "report=false", *TINY], run_dir=tmp_path / "plain")
    assert (tmp_path / "plain" / "summary.json").exists() and not (tmp_path / "plain" / "report.html").exists()
