"""The report_generation task end to end: a deterministic generative adapter through
mb.evaluate, and the CLI with the tiny offline VLM on a tiny IU X-ray (R2Gen) layout."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import medimg_bench as mb
from medimg_bench.metrics import report_text_scores
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

REPORTS = {
    "CXR1_IM-1": "Heart size normal. Lungs are clear. No pleural effusion.",
    "CXR2_IM-2": "Mild cardiomegaly. Small left pleural effusion.",
    "CXR3_IM-3": "No pneumothorax. Endotracheal tube tip 4.5 cm above the carina.",
    "CXR4_IM-4": "Possible right lower lobe pneumonia.",
}
ANSWERS = {
    "CXR1_IM-1": "Heart size normal. Lungs are clear.",
    "CXR2_IM-2": "Cardiomegaly. No effusion.",
    "CXR3_IM-3": "ET tube tip 3 cm above the carina. No pneumothorax.",
    "CXR4_IM-4": "",  # empty answer: scored, never a crash
}


def _iu_xray(root, reports=REPORTS):
    ann = {"train": [], "val": [], "test": [
        {"id": sid, "report": rep, "image_path": [f"{sid}/0.png"], "split": "test"}
        for sid, rep in reports.items()]}
    root.mkdir(parents=True, exist_ok=True)
    (root / "annotation.json").write_text(json.dumps(ann))
    for k, sid in enumerate(reports):
        (root / "images" / sid).mkdir(parents=True)
        Image.fromarray(np.full((12, 10), 20 * k, np.uint8)).save(root / "images" / sid / "0.png")
    return root


class Scripted(GenerativeAdapter):
    backend = "scripted"

    def __init__(self, answers, fail=()):
        super().__init__(name="scripted")
        self.answers, self.fail, self.calls = answers, set(fail), 0

    def identity(self):
        return {"answers": sorted(self.answers.items())}

    def _generate(self, requests):
        self.calls += len(requests)
        out = []
        for r in requests:
            assert r.images and r.settings.max_new_tokens == 256
            if r.sample_id in self.fail:
                out.append(GenerationResponse(error="HTTP 500 from http://127.0.0.1:1/v1", prompt=r.user))
            else:
                out.append(GenerationResponse(text=self.answers[r.sample_id], prompt=r.user))
        return out


def test_evaluate_writes_per_report_metrics_labels_and_corpus_scores(tmp_path):
    ds = mb.create_dataset("iu_xray", root=_iu_xray(tmp_path / "iu"), split="test")
    model = Scripted(ANSWERS, fail={"CXR4_IM-4"})
    res = mb.evaluate(model, ds, task="report_generation", batch_size=2, progress=False, n_resamples=50)
    assert res.summary["n_failed"] == 1  # the failed request is a failed sample, named
    failed = res.samples[res.samples["status"] != "ok"] if "status" in res.samples else None
    assert failed is not None and "CXR4_IM-4" in set(failed["id"])
    m = res.summary["metrics"]
    ok = [s for s in REPORTS if s != "CXR4_IM-4"]
    ref = report_text_scores([ANSWERS[s] for s in ok], [REPORTS[s] for s in ok], meteor=False)
    # per-report means differ from corpus BLEU; the per-report ROUGE-L mean equals the corpus value
    assert m["rouge_l"]["mean"]["value"] == pytest.approx(ref["rouge_l"], abs=1e-6)
    assert "chexpert_5_micro_f1" in m and "chexpert_f1" in m
    row = res.samples[res.samples["id"] == "CXR2_IM-2"].iloc[0]
    assert row["gen_Cardiomegaly"] == 1.0 and row["gen_Pleural Effusion"] == 0.0
    assert row["ref_Pleural Effusion"] == 1.0
    out = tmp_path / "run"
    res.save(out)
    scores = json.loads((out / "plots" / "report_scores.json").read_text()) if (out / "plots" / "report_scores.json").exists() \
        else json.loads(next(out.rglob("report_scores.json")).read_text())
    assert scores["text"]["rouge_l"] == pytest.approx(ref["rouge_l"], abs=1e-9)
    assert scores["measurements"]["mean_abs_error_cm"] == pytest.approx(1.5)


def test_empty_generated_report_is_scored_not_failed(tmp_path):
    ds = mb.create_dataset("iu_xray", root=_iu_xray(tmp_path / "iu"), split="test")
    res = mb.evaluate(Scripted(ANSWERS), ds, task="report_generation", batch_size=4, progress=False,
                      n_resamples=20)
    assert res.summary["n_failed"] == 0
    row = res.samples[res.samples["id"] == "CXR4_IM-4"].iloc[0]
    assert row["generated"] == "" and math.isnan(row["gen_Pneumonia"])


def test_missing_reference_fails_only_that_sample(tmp_path):
    from medimg_bench.datasets.reports import ReportDataset

    root = _iu_xray(tmp_path / "iu")
    manifest = pd.DataFrame({
        "id": list(REPORTS), "patient_id": list(REPORTS),
        "report": [REPORTS[s] if s != "CXR2_IM-2" else "  " for s in REPORTS],
        "image_path": [f"images/{s}/0.png" for s in REPORTS],
    })
    ds = ReportDataset(manifest, root=root, name="reports")
    res = mb.evaluate(Scripted(ANSWERS), ds, task="report_generation", batch_size=4, progress=False,
                      n_resamples=20)
    errors = res.samples.drop_duplicates("id").set_index("id")
    assert res.summary["n_failed"] == 1
    assert "CXR2_IM-2" in str(errors.loc["CXR2_IM-2"].get("error", ""))
    assert "no reference report" in str(errors.loc["CXR2_IM-2"].get("error", ""))


def test_cli_run_with_the_tiny_offline_vlm(tmp_path, monkeypatch):
    from medimg_bench.cli import main

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root = _iu_xray(tmp_path / "iu")
    out = tmp_path / "runs"
    rc = main(["run", "task=report_generation", "dataset=iu_xray", f"dataset.root={root}",
               "model=tiny_vlm", "bootstrap.n_resamples=20", "progress=false",
               f"output_dir={out}", "task.options.max_new_tokens=8"])
    assert rc == 0
    run = next(p.parent for p in out.rglob("summary.json"))
    summary = json.loads((run / "summary.json").read_text())
    assert "bleu4" in summary["metrics"] and "chexpert_5_micro_f1" in summary["metrics"]
    samples = pd.read_parquet(run / "samples.parquet")
    assert set(samples["id"]) == set(REPORTS) and "generated" in samples
