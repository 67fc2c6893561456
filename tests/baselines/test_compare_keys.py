"""medimg-bench compare pairs samples by id: runs that read different data under the same ids
(other bytes in the files, other labels) are refused; other loader options are a warning."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.baselines.compare import cli_main, compare_runs, data_differences


def _run(tmp_path, name, ds):
    rng = np.random.default_rng(0)
    folder = tmp_path / f"pred_{name}"
    folder.mkdir()
    pd.DataFrame({"id": ds.ids, **{c: rng.random(len(ds)) for c in ds.classes}}).to_csv(
        folder / "predictions.csv", index=False)
    model = mb.create_model("predictions", root=folder, num_classes=len(ds.classes))
    res = mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=10)
    res.save(tmp_path / name, plots=False)
    return tmp_path / name


def test_runs_on_other_bytes_are_refused_and_other_options_warned(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    ds = mb.create_dataset("synthetic_cxr", cache_dir=tmp_path / "cxr", split="test", n=40, size=16)
    a = _run(tmp_path, "a", ds)
    same = _run(tmp_path, "same", ds)
    assert data_differences(a, same) == ([], [])
    first = ds.resolve(ds.manifest["image"].iloc[0])
    first.write_bytes(ds.resolve(ds.manifest["image"].iloc[1]).read_bytes())  # same id, other pixels
    other = _run(tmp_path, "other", ds)
    data, options = data_differences(a, other)
    assert any(d.startswith("content_sha256") for d in data) and options == []
    with pytest.raises(ValueError, match="read different data.*content_sha256"):
        compare_runs(a, other, n_resamples=10)
    assert compare_runs(a, other, n_resamples=10, different_data=True)
    assert cli_main([str(a), str(other)]) == 2
    # a run without the identity (written before it existed) is compared by fingerprint
    man = json.loads((other / "manifest.json").read_text())
    del man["dataset"]["identity"]
    (other / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ValueError, match="fingerprint"):
        compare_runs(a, other, n_resamples=10)
    # only the options differ: compared, with a warning naming them
    man = json.loads((same / "manifest.json").read_text())
    man["dataset"]["identity"]["options"]["factory"]["options"]["size"] = 32
    man["dataset"]["identity"]["fingerprint"] = man["dataset"]["fingerprint"] = "changed"
    (same / "manifest.json").write_text(json.dumps(man))
    with caplog.at_level(logging.WARNING):
        assert compare_runs(a, same, n_resamples=10)
    assert "options.factory.options.size" in caplog.text
