"""GMAI-MMBench TEST (answers withheld): the run scores nothing, fails nothing, says so in
summary.json and writes submission.tsv (VLMEvalKit's prediction-file layout, TSV)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import medimg_bench as mb
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.tasks.vqa import SUBMISSION_FILE


def _png_b64(value):
    buf = io.BytesIO()
    Image.fromarray(np.full((12, 10, 3), value, np.uint8)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def _gmai_tsv(path, *, answers=None):
    rows = [
        {"index": 11, "question": "Which organ?", "A": "liver", "B": "lung", "C": "heart",
         "image": _png_b64(40), "department": "Radiology"},
        {"index": 12, "question": "Which modality?", "A": "CT", "B": "MRI", "C": "",
         "image": "11", "department": "Radiology"},          # reuses row 11's image
        {"index": 13, "question": "Which finding?", "A": "mass", "B": "cyst", "C": "normal",
         "image": _png_b64(90), "department": "Oncology"},
    ]
    frame = pd.DataFrame(rows)
    if answers is not None:
        frame["answer"] = answers
    frame.to_csv(path, sep="\t", index=False)
    return path


class ByQuestion(GenerativeAdapter):
    backend = "by_question"

    def identity(self):
        return {}

    def _generate(self, requests):
        out = []
        for r in requests:
            text = {"Which organ?": "B. lung", "Which modality?": "It is an MRI scan",
                    "Which finding?": "hard to say"}[r.user.split("\n")[1]]
            out.append(GenerationResponse(text=text, prompt=r.user))
        return out


def test_withheld_answers_give_a_submission_file_and_no_accuracy(tmp_path):
    _gmai_tsv(tmp_path / "GMAI-MMBench_TEST.tsv")
    ds = mb.create_dataset("gmai_mmbench", root=tmp_path, split="test")
    res = mb.evaluate(ByQuestion(), ds, task="vqa", batch_size=2, progress=False, n_resamples=20)
    run = res.save(tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n_failed"] == 0
    assert summary["answers_withheld"]["n"] == 3 == summary["answers_withheld"]["n_questions"]
    assert "withheld" in summary["answers_withheld"]["note"]
    assert not any(k.startswith("accuracy") for k in summary["metrics"])
    assert summary["metrics"]["unparsed_rate"]["mean"]["value"] == pytest.approx(1 / 3, abs=1e-6)  # "hard to say"

    sub = pd.read_csv(run / SUBMISSION_FILE, sep="\t", dtype=str, keep_default_na=False)
    assert list(sub.columns[:5]) == ["index", "question", "A", "B", "C"]
    assert list(sub["index"]) == ["11", "12", "13"]
    assert list(sub["prediction"]) == ["B. lung", "It is an MRI scan", "hard to say"]
    assert list(sub["parsed"]) == ["B", "B", ""]
    assert list(sub["unparsed"].astype(float)) == [0.0, 0.0, 1.0]
    assert sub.loc[1, "C"] == ""  # two options only
    assert (sub["error"] == "").all()


def test_split_with_answers_writes_no_submission(tmp_path):
    _gmai_tsv(tmp_path / "GMAI-MMBench_VAL.tsv", answers=["B", "B", "C"])
    ds = mb.create_dataset("gmai_mmbench", root=tmp_path, split="val")
    res = mb.evaluate(ByQuestion(), ds, task="vqa", batch_size=3, progress=False, n_resamples=20,
                      subgroups=["department"])
    run = res.save(tmp_path / "run")
    assert not (run / SUBMISSION_FILE).exists()
    summary = json.loads((run / "summary.json").read_text())
    assert "answers_withheld" not in summary
    assert summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(2 / 3, abs=1e-6)
    table = pd.read_csv(run / "per_category.csv")
    acc = table[(table["metric"] == "accuracy")].set_index("group")
    assert set(acc.index) == {"Radiology", "Oncology"}
    assert acc.loc["Radiology", "value"] == 1.0 and acc.loc["Radiology", "n"] == 2
