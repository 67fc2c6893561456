"""The page shows the run's own numbers: summary and per-class tables equal summary.json, the
worst samples are the ones samples.parquet says are worst (recomputed here independently), and
everything is inline (no request can leave the page)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from medimg_bench.report import write_report
from medimg_bench.report.html import fmt, fmt_ci
from tests.report._html import read_page, table_with
from tests.report.conftest import REPORTS, VQA, VQA_FAIL


def _macro(m):
    e = m.get("mean") or {}
    if e.get("value") is None and len(m.get("per_class") or {}) == 1:
        e = next(iter(m["per_class"].values()))
    return e.get("value", e.get("mean")), e.get("ci_low"), e.get("ci_high")


def _check_summary(page, summary):
    rows = {r[0].split(" ")[0]: r for r in table_with(page, "metric", "kind", "scope")[1:]}
    assert set(rows) == set(summary["metrics"])
    for name, m in summary["metrics"].items():
        value, low, high = _macro(m)
        assert rows[name][3] == fmt(value), name
        assert rows[name][4] == fmt_ci(low, high), name


def _self_contained(page):
    for src in page.sources:
        assert src.startswith(("data:", "#")), f"a reference out of the page: {src[:80]}"
    assert all(i["src"].startswith("data:image/png;base64,") for i in page.images)
    assert "Content-Security-Policy" in page.text and "default-src 'none'" in page.text


def test_every_run_writes_its_page_with_summary_and_per_class_values(cls_run):
    page = read_page(cls_run / "report.html")  # written by the run itself, at its end
    summary = json.loads((cls_run / "summary.json").read_text())
    _check_summary(page, summary)
    per_class = table_with(page, "class", "auroc ↑", "auroc CI")
    for row in per_class[1:-1]:
        e = summary["metrics"]["auroc"]["per_class"][row[0]]
        assert row[1] == fmt(e["value"]) and row[2] == fmt_ci(e["ci_low"], e["ci_high"])
    assert per_class[-1][0] == "macro mean" and per_class[-1][1] == fmt(summary["metrics"]["auroc"]["mean"]["value"])
    for attribute in ("sex", "site"):  # subgroups=[sex,site]: one table per attribute
        t = table_with(page, attribute)
        groups = summary["subgroups"][attribute]["auroc"]["per_group"]
        assert sorted(r[0] for r in t[1:]) == sorted(groups)
        col = t[0].index("auroc")
        for r in t[1:]:
            assert r[col] == fmt(groups[r[0]]["value"])
    assert {"summary", "per-class", "subgroups", "worst", "plots", "run"} <= set(page.sections)
    _self_contained(page)


def test_classification_most_confident_errors_are_recomputed_from_the_samples(cls_run):
    page = read_page(cls_run / "report.html")
    s = pd.read_parquet(cls_run / "samples.parquet")
    s = s[(s["status"] == "ok") & s["label"].notna()]
    fp = s[(s["label"] == 0) & (s["score"] >= 0.5)].assign(conf=lambda d: d["score"])
    fn = s[(s["label"] == 1) & (s["score"] < 0.5)].assign(conf=lambda d: 1 - d["score"])
    errors = pd.concat([fp, fn]).sort_values(["conf", "id", "class"], ascending=[False, True, True])
    assert len(errors) > 0
    t = table_with(page, "id", "class", "error", "score", "label", "confidence")
    expected = errors.head(50)
    assert [(r[0], r[1]) for r in t[1:]] == list(zip(expected["id"], expected["class"]))
    assert [r[5] for r in t[1:]] == [fmt(v) for v in expected["conf"]]
    assert [r[2] for r in t[1:]] == ["false positive" if lab == 0 else "false negative" for lab in expected["label"]]
    # the first errors come with their input image, read again through the dataset
    assert len(page.images) >= min(8, len(errors)) + 1  # + the ROC plot


def test_segmentation_worst_cases_are_the_lowest_dice_with_their_slices(seg_run):
    page = read_page(seg_run / "report.html")
    s = pd.read_parquet(seg_run / "samples.parquet")
    per_case = s[s["status"] == "ok"].groupby("id")["dice"].mean().sort_values()
    info = json.loads((seg_run / "worst" / "segmentation.json").read_text())
    kept = [c["id"] for c in info["cases"]]
    assert len(kept) == 4 < len(per_case)  # task.options.keep_worst=4 of 6 cases
    # the run kept the 4 lowest mean Dice (its Dice from voxel counts = the metric's)
    assert set(kept) == set(per_case.index[:4])
    for c in info["cases"]:
        assert c["dice"] == pytest.approx(per_case[c["id"]], abs=1e-6)
    titles = [c for c in page.cards if " — mean dice " in c]
    assert [t.split(" — ")[0] for t in titles] == list(per_case.index[:4])
    for t in titles:
        sid = t.split(" — ")[0]
        assert f"mean dice {fmt(per_case[sid])}" in t and "slice" in t
    # four panels per case: image, reference, prediction, errors
    assert sum(1 for i in page.images if i.get("alt") == "errors") == 4
    ranking = table_with(page, "id", "dice")
    assert [r[0] for r in ranking[1:]] == list(per_case.index)
    arrays = np.load(seg_run / "worst" / "segmentation.npz")
    for j, c in enumerate(info["cases"]):
        ref, pred = arrays[f"reference_{j}"], arrays[f"prediction_{j}"]
        assert ref.shape == pred.shape == tuple(c["shape"][:-1]) and arrays[f"image_{j}"].dtype == np.uint8
        assert ref.max() < len(info["classes"]) and pred.max() < len(info["classes"])


def test_vqa_wrong_answers_with_their_rule_and_image(vqa_run):
    page = read_page(vqa_run / "report.html")
    s = pd.read_parquet(vqa_run / "samples.parquet").drop_duplicates("id")
    ok = s[s["status"] == "ok"]
    wrong = ok[ok["correct"] == 0]
    assert set(wrong["id"]) == {"2", "3", "5", "7", "8"}  # by construction (tests/report/conftest.py VQA)
    parsed_first = list(wrong[wrong["unparsed"] == 0]["id"]) + list(wrong[wrong["unparsed"] > 0]["id"])
    assert [c.split(" ")[0] for c in page.cards] == parsed_first
    t = table_with(page, "id", "answer_type", "question", "reference", "response", "parsed", "rule")
    by_id = {r[0]: r for r in t[1:]}
    assert list(by_id) == parsed_first
    for sid, r in by_id.items():
        row = ok[ok["id"] == sid].iloc[0]
        assert r[2] == VQA[int(sid)][0] and r[3] == VQA[int(sid)][1] and r[4] == VQA[int(sid)][3]
        assert r[5] == ("" if row["parsed"] is None or row["parsed"] != row["parsed"] else str(row["parsed"]))
        assert r[6] == str(row["rule"])
    counts = table_with(page, "answer_type", "questions", "accuracy", "unparsed rate")
    for r in counts[1:]:
        g = ok[ok["answer_type"] == r[0]]
        assert int(r[1]) == len(g) and r[2] == fmt(g["correct"].mean()) and r[3] == fmt(g["unparsed"].mean())
    assert sum(1 for i in page.images if i.get("alt") in parsed_first) == len(parsed_first)  # one image each
    failures = table_with(page, "id", "stage", "error")
    assert [r[0] for r in failures[1:]] == sorted(VQA_FAIL) and "HTTP 503" in failures[1][2]
    _self_contained(page)


def test_report_generation_texts_and_labeler_findings_side_by_side(report_run):
    page = read_page(report_run / "report.html")
    s = pd.read_parquet(report_run / "samples.parquet").drop_duplicates("id")
    obs = [c[4:] for c in s.columns if c.startswith("gen_")]
    g, r = s[[f"gen_{o}" for o in obs]].to_numpy(float), s[[f"ref_{o}" for o in obs]].to_numpy(float)
    differ = dict(zip(s["id"], (~((g == r) | (np.isnan(g) & np.isnan(r)))).sum(1)))
    order = [c.split(" — ")[0] for c in page.cards]
    assert sorted(order) == sorted(REPORTS)
    assert [differ[i] for i in order] == sorted(differ.values(), reverse=True)
    for c in page.cards:
        sid, rest = c.split(" — ")
        assert rest == f"{differ[sid]} finding{'s differ' if differ[sid] != 1 else ' differs'}"
    texts = [t for t in page.tables if t and t[0] == ["reference", "generated"]]
    assert [(t[1][0], t[1][1]) for t in texts] == [REPORTS[i] for i in order]
    findings = [t for t in page.tables if t and t[0] == ["observation", "reference", "generated"]]
    assert findings  # CXR2: cardiomegaly positive in the reference, negative in the generated report
    card2 = findings[order.index("CXR2_IM-2")]
    row = next(x for x in card2[1:] if x[0] == "Cardiomegaly")
    assert row[1:] == ["positive", "negative"]
    assert re.search(r'class="bad">negative<', page.text)
    assert sum(1 for i in page.images if i.get("alt") in REPORTS) == len(REPORTS)


def test_a_benchmark_folder_gives_one_page_with_the_runs_side_by_side(runs_root, cls_run, seg_run, vqa_run, tmp_path):
    out = write_report([cls_run.parent], out=tmp_path / "all.html")
    page = read_page(out)
    for task, run in (("classification", cls_run), ("segmentation", seg_run), ("vqa", vqa_run)):
        summary = json.loads((run / "summary.json").read_text())
        t = next(t for t in page.tables if t and t[0][:3] == ["run", "dataset", "model"] and
                 any(r[0] == run.name for r in t[1:]))
        row = next(r for r in t[1:] if r[0] == run.name)
        for name, m in summary["metrics"].items():
            value, low, high = _macro(m)
            assert row[t[0].index(name)] == f"{fmt(value)} {fmt_ci(low, high)}".strip(), (task, name)
    assert {"overview", "run0", "run1"} <= set(page.sections)
    _self_contained(page)


def test_missing_data_leaves_the_page_without_pictures_and_says_why(vqa_run, tmp_path):
    import shutil

    copy = tmp_path / "vqa"
    shutil.copytree(vqa_run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["config"]["dataset"]["root"] = str(tmp_path / "gone")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    page = read_page(write_report(copy))
    assert not page.images and "could not be opened again" in page.text and "gone" in page.text
    assert len(page.cards) == 5  # the wrong answers are still shown, as text


def test_unreadable_run_directories_are_named(tmp_path):
    with pytest.raises(ValueError, match="no run directory"):
        write_report(tmp_path)
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text("{not json")
    (tmp_path / "r" / "manifest.json").write_text("{}")
    with pytest.raises(ValueError, match=r"summary.json: not valid JSON"):
        write_report(tmp_path / "r")


def test_summary_scope_counts_the_classes_the_mean_is_over(tmp_path):
    """A 117-class label map with 41 organs present: the page says the mean is over 41 of 117
    classes, not over 117 (issue 36 item 7)."""
    from medimg_bench.report.rundir import RunData
    from medimg_bench.report.sections import summary_section

    per = {str(c): {"value": 0.9 if c <= 41 else None, "mean": None, "n": 1} for c in range(1, 118)}
    per["5"]["value"] = float("nan")  # NaN is no value either
    run = RunData(path=tmp_path, manifest={}, summary={
        "n_samples": 1, "metrics": {"dice": {"kind": "per_sample", "mean": {"value": 0.9}, "per_class": per}}})
    html = summary_section(run)
    assert "macro over 40 of 117 classes (77 without a value)" in html
    full = {str(c): {"value": 0.5, "n": 1} for c in range(3)}
    run.summary["metrics"]["dice"]["per_class"] = full
    assert "macro over 3 classes" in summary_section(run)
