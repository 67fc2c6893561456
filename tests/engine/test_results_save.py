"""``Results.save(dir)`` refuses a directory that already holds results unless ``overwrite=True``
(issue #19 item 20: it silently replaced them while the CLI refused); the CLI, protocol and merge
paths pass their own ``overwrite`` through."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.engine.results import Results


@pytest.fixture()
def results(tmp_path):
    ds = mb.create_dataset("synthetic_cxr", cache_dir=tmp_path / "cache", split="test", n=16, size=16)
    table = pd.DataFrame({"id": ds.ids, **{c: np.linspace(0, 1, len(ds)) for c in ds.classes}})
    table.to_csv(tmp_path / "predictions.csv", index=False)
    model = mb.create_model("predictions", root=tmp_path / "predictions.csv", num_classes=len(ds.classes))
    return mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=10)


def test_save_refuses_a_directory_with_results_unless_overwrite(results, tmp_path):
    run = results.save(tmp_path / "run", plots=False)
    before = (run / "summary.json").read_text()
    with pytest.raises(FileExistsError, match=r"already holds results \(summary.json, samples.parquet\).*overwrite=True"):
        results.save(run, plots=False)
    assert (run / "summary.json").read_text() == before
    (run / "summary.json").unlink()  # one result file is enough to refuse
    with pytest.raises(FileExistsError, match=r"\(samples.parquet\)"):
        results.save(run, plots=False)
    results.summary["note"] = "second"
    results.save(run, plots=False, overwrite=True)
    assert json.loads((run / "summary.json").read_text())["note"] == "second"
    assert Results.load(run).summary["note"] == "second"


def test_save_into_an_empty_or_unrelated_directory_is_fine(results, tmp_path):
    (tmp_path / "empty").mkdir()
    results.save(tmp_path / "empty", plots=False)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    results.save(tmp_path / "other", plots=False)
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def test_cli_run_with_overwrite_true_replaces_and_without_refuses(tmp_path, monkeypatch):
    from medimg_bench.runs import run

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    over = ["dataset.options.n=12", "dataset.options.size=16", "model=timm_resnet10t", "bootstrap.n_resamples=5",
            "progress=false"]
    first = run(over, run_dir=tmp_path / "r").run_dir
    with pytest.raises(FileExistsError, match="overwrite=true"):
        run(over, run_dir=first)
    assert run([*over, "overwrite=true"], run_dir=first).run_dir == first
