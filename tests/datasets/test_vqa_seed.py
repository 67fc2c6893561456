"""Seed VQA sets of issue #21 on tiny copies of their released layouts (file names and fields as
each benchmark's own evaluation code reads them)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medimg_bench.datasets import vqa as _module
from tests.datasets._helpers import edit_json_item, family_tests, vqa_sample

_NAMES = ["omnibrainbench", "cxreasonbench"]

create, test_registered, test_configs_match_factories = family_tests(_module, _NAMES)


def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 8), value, np.uint8)).save(path)


def _omnibrain(root: Path) -> None:
    """closed-ended-qa_6823.json / open-ended-qa_2704.json and their image folders, as
    utils/OmniBrainBench/OmniBrainBench.py (88427de) load_data reads them."""
    closed = [
        {"id": 0, "question": "Which sequence is shown?", "options": ["T1", "T2", "FLAIR", "DWI", "SWI"],
         "answer": "C", "image_path": "mri/a.png", "task_label": "Modality Recognition",
         "clinical_phase": "Imaging Acquisition", "source_file": "x.json"},
        {"id": 1, "question": "Where is the lesion?", "options": ["A. Frontal", "B. Parietal", "C. Temporal",
                                                                  "D. Occipital", "E. Cerebellum"],
         "answer": "Temporal", "image_path": ["mri/a.png", "mri/b.png"], "task_label": "Lesion Localization",
         "clinical_phase": "Diagnosis"},
    ]
    open_ = [{"id": "o7", "question": "What is the diagnosis?", "answer": "glioblastoma",
              "image_path": "ct/c.png", "task_label": "Disease Diagnosis", "clinical_phase": "Diagnosis"}]
    (root / "closed-ended-qa_6823.json").write_text(json.dumps(closed))
    (root / "open-ended-qa_2704.json").write_text(json.dumps(open_))
    _png(root / "closed-ended-qa_6823" / "mri" / "a.png", 40)
    _png(root / "closed-ended-qa_6823" / "mri" / "b.png", 80)
    _png(root / "open-ended-qa_2704" / "ct" / "c.png", 120)


def test_omnibrainbench_closed_and_open(tmp_path):
    _omnibrain(tmp_path)
    ds = create("omnibrainbench", tmp_path)
    assert ds.ids == ["0", "1"]
    s = vqa_sample(ds)
    assert s["answer"] == "C" and s["answer_type"] == "mcq" and len(s["image"]) == 1
    assert s["meta"]["task_label"] == "Modality Recognition" and s["meta"]["clinical_phase"] == "Imaging Acquisition"
    s = ds[1]
    assert s["answer"] == "C" and s["options"][2] == "Temporal" and len(s["image"]) == 2  # answer given as text
    assert float(s["image"][1].mean()) == pytest.approx(80 / 255, abs=1e-6)
    assert ds[0]["meta"]["patient_id"] == ds[1]["meta"]["patient_id"]  # same first image
    op = create("omnibrainbench", tmp_path, split="open")
    s = op[0]
    assert (s["id"], s["answer"], s["answer_type"], s["options"]) == ("o7", "glioblastoma", "open", None)
    assert list(op.manifest["task_label"]) == ["Disease Diagnosis"]


def test_omnibrainbench_bad_rows_name_the_file(tmp_path):
    _omnibrain(tmp_path)
    edit_json_item(tmp_path / "closed-ended-qa_6823.json", 1, answer="Thalamus")
    with pytest.raises(ValueError, match=r"closed-ended-qa_6823.json.*1 \(id 1\).*Thalamus"):
        create("omnibrainbench", tmp_path)
    assert create("omnibrainbench", tmp_path, on_error="skip").ids == ["0"]
    with pytest.raises(ValueError, match="split must be"):
        create("omnibrainbench", tmp_path, split="val")
    with pytest.raises(FileNotFoundError, match="FrankPN/OmniBrainBench"):
        create("omnibrainbench", tmp_path / "empty")


def _cxreason(root: Path, mimic: Path) -> None:
    """dx_by_dicoms.json and qa/<task>/path1/init/basic/<dicom>.json as evaluate_reasoning.py
    (72357fe) reads them; images under the MIMIC-CXR-JPG files folder."""
    (root / "dx_by_dicoms.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "dx_by_dicoms.json").write_text(json.dumps({"cardiomegaly": ["d1", "d2"], "inspiration": ["d1"]}))
    for task, dicom, answer in (("cardiomegaly", "d1", "(a) Yes"), ("cardiomegaly", "d2", "(b) No"),
                                ("inspiration", "d1", "(b) No")):
        f = root / "qa" / task / "path1" / "init" / "basic" / f"{dicom}.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps({"question": f"Does this patient have {task}? (a) Yes (b) No",
                                 "answer": answer, "img_path": [f"p10/p100/s1/{dicom}.jpg"]}))
    _png(mimic / "p10" / "p100" / "s1" / "d1.jpg", 30)
    _png(mimic / "p10" / "p100" / "s1" / "d2.jpg", 60)


def test_cxreasonbench_initial_questions(tmp_path):
    root, mimic = tmp_path / "CXReasonBench", tmp_path / "mimic" / "files"
    _cxreason(root, mimic)
    ds = create("cxreasonbench", root, mimic_root=mimic)
    assert ds.ids == ["cardiomegaly/d1", "cardiomegaly/d2", "inspiration/d1"]
    s = vqa_sample(ds, 1)
    assert (s["answer"], s["answer_type"], s["meta"]["diagnostic_task"]) == ("(b) No", "open", "cardiomegaly")
    assert len(s["image"]) == 1 and float(s["image"][0].mean()) == pytest.approx(60 / 255, abs=1e-6)
    assert ds[0]["meta"]["patient_id"] == ds[2]["meta"]["patient_id"] == "d1"
    assert create("cxreasonbench", root, mimic_root=mimic, tasks=["inspiration"]).ids == ["inspiration/d1"]
    with pytest.raises(ValueError, match="unknown task"):
        create("cxreasonbench", root, tasks=["pneumonia"])
    (root / "qa" / "inspiration" / "path1" / "init" / "basic" / "d1.json").unlink()
    with pytest.raises(ValueError, match=r"d1.json.*inspiration/d1.*missing"):
        create("cxreasonbench", root, mimic_root=mimic)
    assert len(create("cxreasonbench", root, mimic_root=mimic, on_error="skip")) == 2
