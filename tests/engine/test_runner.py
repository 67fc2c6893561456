import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from medimg_bench.datasets import create
from medimg_bench.engine.results import Results
from medimg_bench.engine.runner import evaluate
from medimg_bench.registry import create_model
from tests.engine._models import MeanModel


class ThresholdModel(MeanModel):
    """Scores each finding by the mean intensity: deterministic, no training needed."""

    name = "threshold"


class FailOn(ThresholdModel):
    def __init__(self, bad_id):
        self.bad_id = bad_id

    def predict(self, batch):
        if self.bad_id in batch["id"]:
            raise RuntimeError(f"cannot predict {self.bad_id}")
        return super().predict(batch)


@pytest.fixture(scope="module")
def cxr(tmp_path_factory):
    return create("synthetic_cxr", cache_dir=tmp_path_factory.mktemp("cxr"), split="all", n=24, size=32)


def test_auroc_and_table_match_sklearn(cxr):
    res = evaluate(ThresholdModel(), cxr, task="classification", batch_size=5, progress=False, n_resamples=50)
    s = res.samples
    assert set(s["status"]) == {"ok"} and len(s) == 24 * 3
    for cname, grp in s.groupby("class"):
        ref = roc_auc_score(grp["label"], grp["score"])
        assert res.summary["metrics"]["auroc"]["per_class"][cname]["value"] == pytest.approx(ref, abs=1e-6)
        assert res.summary["metrics"]["auroc"]["per_class"][cname]["n"] == grp["label"].notna().sum()
    assert (s["patient_id"] == s["id"].map(dict(zip(cxr.manifest["id"], cxr.manifest["patient_id"])))).all()


def test_failing_samples_are_recorded_and_others_scored(cxr, tmp_path):
    ds = create("synthetic_cxr", cache_dir=tmp_path / "broken", split="all", n=12, size=32)
    (ds.root / ds.manifest["image"][3]).write_bytes(b"\x89PNG broken")
    bad_predict = ds.sample_id(7)
    res = evaluate(FailOn(bad_predict), ds, task="classification", batch_size=4, progress=False, n_resamples=20)
    failed = res.failures.set_index("id")["error"]
    assert set(failed.index) == {ds.sample_id(3), bad_predict}
    assert "[load]" in failed[ds.sample_id(3)] and ds.manifest["image"][3] in failed[ds.sample_id(3)]
    assert "[predict]" in failed[bad_predict] and "cannot predict" in failed[bad_predict]
    ok = res.samples[res.samples["status"] == "ok"]
    assert ok["id"].nunique() == 10  # the other samples of both bad batches were scored
    assert res.summary["n_failed"] == 2
    assert len(res.metrics["auroc"].ids) == 10
    with pytest.raises(Exception, match="cannot predict"):
        evaluate(FailOn(bad_predict), ds.filter(lambda m: m["id"] != ds.sample_id(3)), task="classification",
                 batch_size=4, progress=False, fail_fast=True)


def test_results_directory_layout(tmp_path, synthetic_root):
    ds = create("synthetic_ct", cache_dir=synthetic_root / "ct_layout", split="all", n=3, shape=(16, 16, 8))
    model = create_model("monai_unet", num_classes=5, channels=(4, 8), strides=(2,), num_res_units=0)
    res = evaluate(model, ds, task="segmentation", metrics={"dice": {}}, progress=False, n_resamples=20)
    run = res.save(tmp_path / "run", config={"seed": 0})
    assert {p.name for p in run.iterdir()} >= {"samples.parquet", "summary.json", "manifest.json", "plots"}
    table = pd.read_parquet(run / "samples.parquet")
    assert list(table.columns[:5]) == ["id", "patient_id", "class", "status", "error"]
    assert len(table) == 3 * 4 and "dice" in table.columns
    assert set(table["class"]) == {"liver", "kidney", "spleen", "spine"}
    summary = json.loads((run / "summary.json").read_text())
    liver = summary["metrics"]["dice"]["per_class"]["liver"]
    assert liver["mean"] == pytest.approx(table.loc[table["class"] == "liver", "dice"].mean(), abs=1e-6)
    assert liver["ci_low"] <= liver["mean"] <= liver["ci_high"]
    assert set(summary["cases"]["liver"]) == {"absent", "missed", "present"}
    manifest = json.loads((run / "manifest.json").read_text())
    for key in ("config", "environment", "device", "dataset", "start_time", "end_time", "seed", "wall_time_s"):
        assert key in manifest
    assert manifest["dataset"]["fingerprint"] == ds.fingerprint()
    import importlib.metadata

    assert manifest["environment"]["packages"]["torch"] == importlib.metadata.version("torch")
    assert (run / "plots" / "per_class_dice.png").stat().st_size > 1000
    again = Results.load(run)
    assert again.summary == summary and len(again.samples) == len(table)


def test_summary_bootstrap_resamples_patients(cxr, monkeypatch):
    import medimg_bench.engine.summary as summary_mod

    seen = []
    real = summary_mod.bootstrap_cis

    def spy(*args, **kwargs):
        seen.append(kwargs["groups"])
        return real(*args, **kwargs)

    monkeypatch.setattr(summary_mod, "bootstrap_cis", spy)
    res = evaluate(ThresholdModel(), cxr, task="classification", progress=False, n_resamples=50)
    patients = dict(zip(cxr.manifest["id"], cxr.manifest["patient_id"]))
    assert seen and seen[0] == [patients[i] for i in res.metrics["auroc"].ids]
    assert len(set(seen[0])) < len(seen[0])  # two images per patient in the phantoms
    ci = res.summary["metrics"]["auroc"]["mean"]
    assert ci["ci_low"] < ci["value"] < ci["ci_high"]


def test_subgroup_breakdown_matches_per_group_recomputation(cxr):
    res = evaluate(ThresholdModel(), cxr, task="classification", metrics={"auroc": {}}, progress=False,
                   n_resamples=10, subgroups=["sex", "age"])
    by_sex = res.summary["subgroups"]["sex"]["auroc"]
    s = res.samples
    sex = dict(zip(cxr.manifest["id"], cxr.manifest["sex"]))
    for group, entry in by_sex["per_group"].items():
        part = s[s["id"].map(sex) == group]
        per_class = [roc_auc_score(g["label"], g["score"]) for _, g in part.groupby("class") if g["label"].nunique() == 2]
        assert entry["value"] == pytest.approx(np.mean(per_class), abs=1e-6)  # summary rounds to 6 digits
        assert entry["n"] == part["id"].nunique()
    values = [e["value"] for e in by_sex["per_group"].values()]
    assert by_sex["gap"] == pytest.approx(max(values) - min(values), abs=1e-6)
    overall = by_sex["overall"]
    assert by_sex["equity_scaled"] == pytest.approx(overall / (1 + sum(abs(v - overall) for v in values)), abs=1e-6)
    assert set(res.summary["subgroups"]["age"]["auroc"]["per_group"]) <= {"0-40", "40-60", "60-80", "80+"}
    with pytest.raises(ValueError, match="not a manifest column"):
        evaluate(ThresholdModel(), cxr, task="classification", progress=False, n_resamples=5, subgroups=["race"])


def test_evaluate_keywords_are_the_options_and_run_evaluation_gives_the_same_run(cxr):
    import inspect

    from medimg_bench.engine.runner import EvalOptions, build_metrics, run_evaluation
    from medimg_bench.registry import create_task

    keywords = [p for p in inspect.signature(evaluate).parameters if p not in ("model", "dataset", "task", "metrics")]
    # max_failure_rate judges the outcome (EvaluationFailed), it does not change the run
    assert keywords == [*EvalOptions.names(), "max_failure_rate"]
    opts = EvalOptions(batch_size=5, progress=False, n_resamples=20, shard="1/2", subgroups=["sex"])
    assert opts.shard == (1, 2) and opts.subgroups == ("sex",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.batch_size = 3
    with pytest.raises(ValueError, match="shard="):
        EvalOptions(shard="3/2")
    with pytest.raises(ValueError, match="batch_size=0"):
        EvalOptions(batch_size=0)
    task = create_task("classification")
    direct = run_evaluation(ThresholdModel(), cxr, task, build_metrics(task, None, cxr), opts)
    via_keywords = evaluate(ThresholdModel(), cxr, task="classification", batch_size=5, progress=False,
                            n_resamples=20, shard="1/2", subgroups=["sex"])
    assert direct.summary == via_keywords.summary
    pd.testing.assert_frame_equal(direct.samples, via_keywords.samples, check_exact=True)


def test_engine_functions_stay_small():
    """No engine function over 80 lines or with more than 10 parameters, except ``evaluate``,
    whose keyword-only options are its public API (docs/design.md, "Small functions")."""
    import ast
    from pathlib import Path

    import medimg_bench.engine as engine

    allowed = {("runner.py", "evaluate")}
    too_big = []
    for path in sorted(Path(engine.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]
            n_params = len([p for p in params if p.arg not in ("self", "cls")])
            lines = node.end_lineno - node.lineno + 1
            if (lines > 80 or n_params > 10) and (path.name, node.name) not in allowed:
                too_big.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines, {n_params} parameters")
    assert not too_big, too_big
