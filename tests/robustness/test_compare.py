"""Generated suite for ``medimg-bench compare`` (issue #19 items 4 and 12): for every registered task,
run directories built through the engine (``tests/baselines/_compare_runs.py``) and compared under
each case below. A compare must never print a number computed against the other run's labels, on
other samples, or crash on a task's per-sample metrics.

Cases per task:

* ``same``: a run against a second run of the same predictions → every difference 0, labels identical;
* ``better``: a better run against a worse one → rows for every per-sample metric (or AUROC), each
  estimate equal to the run's own ``summary.json``, the CLI exits 0;
* ``swap``: A vs B and B vs A → differences of opposite sign, same p-values;
* ``relabelled``: run B on the same dataset with some references changed → refused
  (``LabelMismatchError`` naming a changed sample, CLI exit 2 naming ``--allow-label-mismatch``);
* ``relabelled_allowed``: the same with ``--allow-label-mismatch`` → B's estimates are those of B's own
  summary (its own labels), and the notes say the labels differ;
* ``missing``: run B missing a sample → refused naming it; ``--intersection`` compares the rest and
  the notes count what was left out;
* ``other_task``: a run of another task → refused.

A new task fails ``test_every_task_has_a_case`` until ``_compare_runs.TASKS`` can build its runs.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.baselines.compare import LabelMismatchError, cli_main, compare_runs
from medimg_bench.baselines.compare_figures import saved_value
from medimg_bench.registry import TASKS
from tests.baselines import _compare_runs as R

TASK_NAMES = sorted(R.TASKS)
N_RESAMPLES = 30

def test_every_task_has_a_case():
    assert sorted(TASKS.list()) == TASK_NAMES


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """task → (dataset, {run name: run dir}), built once per task when first asked for."""
    cache: dict[str, tuple] = {}

    def get(task: str):
        if task not in cache:
            make_ds, make_run, relabel = R.TASKS[task]
            root = tmp_path_factory.mktemp(f"cmp_{task}")
            ds = make_ds(root)
            good = dict(quality=0.9) if task != "classification" else dict(quality=0.6)
            runs = {
                "a": make_run(root, "a", ds, **good),
                "a2": make_run(root, "a2", ds, **good),
                "b": make_run(root, "b", ds, quality=0.4, seed=1),
                "missing": make_run(root, "missing", ds, **good, drop=(str(ds.ids[1]),)),
            }
            other = relabel(ds)
            if task == "classification":  # the same scores, scored against the changed labels
                runs["relabelled"] = make_run(root, "relabelled", other, **good, scores_from=ds)
            else:
                runs["relabelled"] = make_run(root, "relabelled", other, **good)
            cache[task] = (ds, runs)
        return cache[task]

    return get


def _summary_value(run, metric, cname):
    entry = json.loads((run / "summary.json").read_text())["metrics"][metric]
    per = (entry.get("per_class") or {}).get(str(cname)) if cname is not None else None
    per = per if per is not None else entry["mean"]
    return per.get("value", per.get("mean"))


def _tested(rows):
    return [r for r in rows if not r["test"].startswith("not tested") and r["class"] != "macro"]


@pytest.mark.parametrize("task", TASK_NAMES)
def test_same(task, built):
    _, runs = built(task)
    rows = compare_runs(runs["a"], runs["a2"], n_resamples=N_RESAMPLES)
    assert _tested(rows), "nothing was compared"
    assert rows.labels["differ"] == 0
    assert all(r["difference"] == 0 for r in rows if math.isfinite(r["difference"]))


@pytest.mark.parametrize("task", TASK_NAMES)
def test_better(task, built, capsys):
    _, runs = built(task)
    rows = compare_runs(runs["a"], runs["b"], n_resamples=N_RESAMPLES)
    tested = _tested(rows)
    assert tested
    held = set(json.loads((runs["a"] / "summary.json").read_text())["metrics"])
    for r in rows:  # the run's own metrics (and compare's accuracy at a threshold), per named class,
        # or a figure of the run's summary recomputed from the records (its path in summary_key)
        assert r["metric"] in held or r["metric"].startswith("accuracy@") or "summary_key" in r, r
        assert not (isinstance(r["class"], float) and math.isnan(r["class"])), r
    for r in tested:  # each estimate is the run's own summary value (its own labels, all its rows)
        if r.get("n_dropped"):
            continue
        for key, run in (("estimate_a", runs["a"]), ("estimate_b", runs["b"])):
            if "summary_key" in r:  # the figure as the run's summary holds it
                assert r[key] == pytest.approx(saved_value(json.loads((run / "summary.json").read_text()),
                                                           r["summary_key"]), abs=2e-6), (r, key)
                continue
            if r["metric"] not in json.loads((run / "summary.json").read_text())["metrics"]:
                continue  # accuracy@threshold: compare's own figure, not in the summary
            saved = _summary_value(run, r["metric"], r["class"])
            if saved is not None:
                assert r.get(f"run_{key}", r[key]) == pytest.approx(saved, abs=2e-6), (r, key)
        assert r["ci_low"] <= r["difference"] <= r["ci_high"] and 0 <= r["p_value"] <= 1
    assert cli_main([str(runs["a"]), str(runs["b"]), "--n-resamples", str(N_RESAMPLES)]) == 0
    assert "labels (" in capsys.readouterr().out


@pytest.mark.parametrize("task", TASK_NAMES)
def test_swap(task, built):
    _, runs = built(task)
    ab = {(r["metric"], r["class"]): r for r in _tested(compare_runs(runs["a"], runs["b"], n_resamples=N_RESAMPLES))}
    ba = {(r["metric"], r["class"]): r for r in _tested(compare_runs(runs["b"], runs["a"], n_resamples=N_RESAMPLES))}
    assert ab.keys() == ba.keys()
    for key, r in ab.items():
        assert ba[key]["difference"] == pytest.approx(-r["difference"], abs=1e-9)
        assert ba[key]["estimate_a"] == pytest.approx(r["estimate_b"], abs=1e-12)


@pytest.mark.parametrize("task", TASK_NAMES)
def test_relabelled(task, built, capsys):
    _, runs = built(task)
    with pytest.raises(LabelMismatchError, match=r"labels differ in \d+ of \d+ rows") as err:
        compare_runs(runs["a"], runs["relabelled"], n_resamples=N_RESAMPLES)
    assert "A=" in str(err.value) and "B=" in str(err.value)
    assert cli_main([str(runs["a"]), str(runs["relabelled"])]) == 2
    assert "--allow-label-mismatch" in capsys.readouterr().err


@pytest.mark.parametrize("task", TASK_NAMES)
def test_relabelled_allowed(task, built):
    _, runs = built(task)
    # segmentation's labels are mask files: relabelled, the files differ too (--different-data)
    rows = compare_runs(runs["a"], runs["relabelled"], n_resamples=N_RESAMPLES, allow_label_mismatch=True,
                        different_data=task == "segmentation")
    assert rows.labels["differ"] > 0 and any("labels differ" in n for n in rows.notes)
    own = json.loads((runs["relabelled"] / "summary.json").read_text())["metrics"]
    checked = 0
    for r in _tested(rows):
        if r["metric"] in own and not r.get("n_dropped"):
            saved = _summary_value(runs["relabelled"], r["metric"], r["class"])
            if saved is not None:
                assert r.get("run_estimate_b", r["estimate_b"]) == pytest.approx(saved, abs=2e-6), r
                checked += 1
    assert checked, "no estimate of B could be checked against B's summary"


@pytest.mark.parametrize("task", TASK_NAMES)
def test_missing(task, built):
    ds, runs = built(task)
    gone = str(ds.ids[1])
    with pytest.raises(ValueError, match=r"different samples: 1 only in") as err:
        compare_runs(runs["a"], runs["missing"], n_resamples=N_RESAMPLES)
    assert gone in str(err.value)
    rows = compare_runs(runs["a"], runs["missing"], n_resamples=N_RESAMPLES, intersection=True)
    assert any("1 sample(s) of run A left out" in n for n in rows.notes)
    assert cli_main([str(runs["a"]), str(runs["missing"])]) == 2


@pytest.mark.parametrize("task", TASK_NAMES)
def test_other_task(task, built):
    other = next(t for t in TASK_NAMES if t != task)
    _, runs = built(task)
    _, other_runs = built(other)
    with pytest.raises(ValueError, match=r"run|task|different"):
        compare_runs(runs["a"], other_runs["a"], n_resamples=N_RESAMPLES)


def test_cxreasonbench_references_hold_every_stage(built):
    """A case is judged against every stage's answer, asked or not: the relabelled final answer of a
    conversation that stopped before the final stage still refuses the pair."""
    ds, runs = built("cxreasonbench_reasoning")
    first = str(ds.ids[0])
    rows = {r["id"]: r for r in pd.read_parquet(runs["a"] / "samples.parquet").to_dict("records")}
    assert "final" not in [t["stage"] for t in json.loads(rows[first]["turns"])]
    assert json.loads(rows[first]["reference"])["path1/stage4"] == "(a) Yes"
    with pytest.raises(LabelMismatchError, match=rf"{first}/0 reference"):
        compare_runs(runs["a"], runs["relabelled"], n_resamples=N_RESAMPLES)


@pytest.mark.parametrize(("task", "field", "value"), [("moaks_vqa", "parse", "lenient"),
                                                      ("cxreasonbench_reasoning", "judge", {"judge": {"name": "other"}}),
                                                      ("cxreasonbench_reasoning", "option_files",
                                                       {"task": {"judge_prompt_dir/final.txt": "sha256:00"}})])
def test_generative_notes_say_what_is_not_compared(task, field, value, built, tmp_path):
    """The task's summary figures are compared (recomputed from the records) or named as not
    compared, and runs scored another way (parse rule, judge) are compared with a note saying so."""
    _, runs = built(task)
    rows = compare_runs(runs["a"], runs["a2"], n_resamples=N_RESAMPLES)
    figures = {r["summary_key"] for r in rows if "summary_key" in r}
    if task == "moaks_vqa":
        assert figures == {"moaks.grade_accuracy_micro"}
    else:
        assert "cxreasonbench.path1.printed.Completion_score" in figures and len(figures) == 7
        assert any(n.startswith("cxreasonbench: ") and "not compared" in n for n in rows.notes)
    assert not any("scored differently" in n or "inconsistent" in n for n in rows.notes)
    edited = R.copy_run(runs["a2"], tmp_path / "edited")
    manifest = json.loads((edited / "manifest.json").read_text())
    manifest[field] = value
    (edited / "manifest.json").write_text(json.dumps(manifest))
    rows = compare_runs(runs["a"], edited, n_resamples=N_RESAMPLES)
    assert any("scored differently" in n and f"{field}" in n for n in rows.notes), rows.notes
    assert all(r["difference"] == 0 for r in rows if math.isfinite(r["difference"]))


def test_moaks_without_references(tmp_path):
    """3DReasonKnee's zero-shot layout has no references: parse failures and completeness are
    compared, no grade figure is, and nothing claims one is missing."""
    from tests.datasets.vqa.test_reasonknee import _release

    ds = mb.create_dataset("3dreasonknee", root=_release(tmp_path / "knee"))
    good = '{"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 1, ' \
           '"Number of BML within subregion": 0}}, "ACL": {"Complete Tear": 0, "ACL Repair": 0}}'
    runs = []
    for name, bad in (("a", ()), ("b", tuple(ds.ids[::2]))):
        model = R._scripted(lambda r, bad=bad: "no JSON here" if r.sample_id in bad else good, name)
        runs.append(R._evaluate(model, ds, mb.create_task("moaks_vqa"), tmp_path / name))
    rows = compare_runs(*runs, n_resamples=N_RESAMPLES)
    assert {r["metric"] for r in rows} == {"parse_failed", "complete"}
    failed = next(r for r in rows if r["metric"] == "parse_failed")
    assert (failed["estimate_a"], failed["estimate_b"]) == (0.0, 0.5) and failed["difference"] == -0.5
    assert rows.labels["differ"] == 0 and not any("moaks" in n for n in rows.notes), rows.notes
