"""A run whose samples (nearly) all failed is not a success anywhere: the CLI exits non-zero,
saying why, after writing the run directory; the Python API (``evaluate``, ``run``) raises
``EvaluationFailed`` carrying the results; the console's last line says how many samples were
scored of how many."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from medimg_bench.cli import EXIT_FAILED_SAMPLES, _failure_verdict, _max_failure_rate
from medimg_bench.engine.results import Results


def _results(n, failed, name="classification/x"):
    rows = [{"id": f"s{i}", "status": "failed" if i < failed else "ok",
             "error": f"[load] OSError: cannot read s{i}.png" if i < failed else None} for i in range(n)]
    samples = pd.DataFrame(rows)
    summary = {"n_samples": n, "n_failed": failed, "failed_ids": [f"s{i}" for i in range(failed)]}
    return Results(name=name, task=None, samples=samples, summary=summary, manifest={})


def test_failure_rate_rule():
    assert _results(10, 10).exceeds_failure_rate()  # nothing scored: fails even at 1.0
    assert _results(0, 0).exceeds_failure_rate()  # an empty run scored nothing either
    assert not _results(10, 9).exceeds_failure_rate()  # the default fails only "none scored"
    assert not _results(100, 5).exceeds_failure_rate(0.05)  # at the limit: not more than it
    assert _results(100, 6).exceeds_failure_rate(0.05)
    assert not _results(100, 0).exceeds_failure_rate(0.0)
    assert _results(100, 1).exceeds_failure_rate(0.0)


def test_failure_report_names_the_count_and_the_first_errors():
    assert _results(100, 5).failure_report(0.05) is None
    text = _results(100, 6).failure_report(0.05)
    assert "6 of 100 samples failed (6.0%), more than max_failure_rate=0.05" in text
    assert "s0: [load] OSError: cannot read s0.png" in text and "s2:" in text and "s3:" not in text
    assert "and 3 more" in text
    none = _results(4, 4).failure_report()
    assert "no sample was scored (4 of 4 failed)" in none
    bench = _failure_verdict({"a": _results(4, 4, "a"), "b": _results(4, 0, "b")}, 1.0)
    assert "a: no sample was scored" in bench and "b:" not in bench and f"exit {EXIT_FAILED_SAMPLES}" in bench
    assert _failure_verdict(_results(4, 1), 1.0) is None
    assert _failure_verdict(object(), 0.0) is None  # protocol results: not per-sample runs


def test_max_failure_rate_from_the_config():
    from medimg_bench.runs import compose_config

    assert _max_failure_rate(compose_config([])) == 1.0
    assert _max_failure_rate(compose_config(["max_failure_rate=0.05"])) == 0.05
    for bad in ("1.5", "-0.1", "lots"):
        with pytest.raises(ValueError, match="max_failure_rate"):
            _max_failure_rate(compose_config([f"max_failure_rate={bad}"]))


TINY = ["dataset.options.n=12", "dataset.options.size=16", "model.options.model_name=resnet10t",
        "bootstrap.n_resamples=10", "progress=false", "batch_size=8"]


def test_cli_exits_non_zero_when_no_sample_was_scored_and_keeps_the_run_directory(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from medimg_bench.builders import build_dataset
    from medimg_bench.runs import compose_config

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    dcfg = OmegaConf.to_container(compose_config(TINY).dataset, resolve=True)
    ds = build_dataset(dcfg, dcfg["split"])
    for image in ds.manifest["image"]:  # the data server is down: every sample fails to load
        ds.resolve(image).write_bytes(b"not a png")
    out = subprocess.run([sys.executable, "-m", "medimg_bench.cli", "run", f"hydra.run.dir={tmp_path}/run", *TINY,
                          "model.options.in_channels=1"],  # not inferred: no sample loads
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == EXIT_FAILED_SAMPLES, out.stderr
    assert f"no sample was scored ({len(ds)} of {len(ds)} failed)" in out.stderr
    # the last line of the console says it: never a summary that looks like a success
    assert out.stderr.strip().splitlines()[-1] == f"scored 0 of {len(ds)} samples ({len(ds)} failed): the run FAILED"
    assert f"{ds.sample_id(0)}: [load]" in out.stderr and "Traceback" not in out.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())  # nothing computed is lost
    assert summary["n_failed"] == len(ds)


class _Broken:
    """A model whose every prediction fails (a served model that answers nothing usable)."""

    name = "broken"

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        raise RuntimeError("the server answered 500")


def test_api_evaluate_raises_when_no_sample_was_scored(tmp_path):
    import medimg_bench as mb
    from medimg_bench.datasets import create

    ds = create("synthetic_cxr", cache_dir=tmp_path / "cxr", split="all", n=6, size=16)
    with pytest.raises(mb.EvaluationFailed) as info:
        mb.evaluate(_Broken(), ds, task="classification", progress=False, n_resamples=10)
    res = info.value.results  # what the run computed is not lost
    assert res.summary["n_failed"] == 6 and len(res.failures) == 6
    assert "no sample was scored (6 of 6 failed)" in str(info.value)
    assert "the server answered 500" in str(info.value)
    assert str(info.value).splitlines()[-1] == "scored 0 of 6 samples (6 failed)"
    # the caller who judges for themselves
    quiet = mb.evaluate(_Broken(), ds, task="classification", progress=False, n_resamples=10, max_failure_rate=None)
    assert quiet.exceeds_failure_rate() and quiet.scored_line() == "scored 0 of 6 samples (6 failed)"
    with pytest.raises(ValueError, match="max_failure_rate"):
        mb.evaluate(_Broken(), ds, task="classification", progress=False, max_failure_rate=2)


def test_api_run_raises_after_writing_the_run_directory(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from medimg_bench.builders import build_dataset
    from medimg_bench.engine.results import EvaluationFailed
    from medimg_bench.runs import compose_config
    from medimg_bench.runs.run import run

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    dcfg = OmegaConf.to_container(compose_config(TINY).dataset, resolve=True)
    ds = build_dataset(dcfg, dcfg["split"])
    for image in ds.manifest["image"][:3]:
        ds.resolve(image).write_bytes(b"not a png")
    overrides = [*TINY, "model.options.in_channels=1", "max_failure_rate=0.1"]
    with pytest.raises(EvaluationFailed, match=f"3 of {len(ds)} samples failed") as info:
        run(overrides, run_dir=tmp_path / "run")
    assert info.value.results.summary["n_failed"] == 3
    assert (tmp_path / "run" / "summary.json").is_file()
    assert run([*overrides[:-1], "max_failure_rate=0.5"], run_dir=tmp_path / "run2").summary["n_failed"] == 3


def test_sweep_marks_a_failed_run_and_exits_3(tmp_path, monkeypatch, capsys):
    """A multirun whose job scored nothing: ``medimg-bench sweep`` still writes the table, marks
    the job FAILED, ends with the scored count and exits 3."""
    from omegaconf import OmegaConf

    from medimg_bench.builders import build_dataset
    from medimg_bench.engine.results import EvaluationFailed
    from medimg_bench.runs import compose_config
    from medimg_bench.runs.run import run
    from medimg_bench.runs.sweep import cli_main

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    sweep = tmp_path / "multirun"
    good = run([*TINY, "report=false", "model.options.in_channels=1"], run_dir=sweep / "0")
    dcfg = OmegaConf.to_container(compose_config(TINY).dataset, resolve=True)
    ds = build_dataset(dcfg, dcfg["split"])
    for image in ds.manifest["image"]:
        ds.resolve(image).write_bytes(b"not a png")
    with pytest.raises(EvaluationFailed):
        run([*TINY, "report=false", "model.options.in_channels=1"], run_dir=sweep / "1")
    capsys.readouterr()
    assert cli_main([str(sweep)]) == 3
    table = pd.read_parquet(sweep / "sweep.parquet").set_index("job")
    assert table.loc["0", "status"] == "ok" and table.loc["1", "status"] == "failed_samples"
    n = good.summary["n_samples"]
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"scored {n} of {2 * n} samples ({n} failed) in 2 run(s); 1 run(s) FAILED") and err.endswith(": 1")


def test_cli_exits_3_when_a_protocol_evaluation_raises_evaluation_failed(capsys, monkeypatch):
    """A protocol's own ``evaluate`` (a seed that scored nothing) raises EvaluationFailed: the CLI
    says so without a traceback and exits 3, as for a run."""
    from medimg_bench.cli import _call_hydra
    from medimg_bench.engine.results import EvaluationFailed

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def main_fn():
        raise EvaluationFailed(_results(4, 4, "linear_probe/x"))

    assert _call_hydra(main_fn, []) == EXIT_FAILED_SAMPLES
    err = capsys.readouterr().err
    assert "linear_probe/x: no sample was scored (4 of 4 failed)" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "scored 0 of 4 samples (4 failed)"
