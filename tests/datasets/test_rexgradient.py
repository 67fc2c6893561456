"""ReXGradient-160K on a tiny copy of its release layout: metadata/<split>_metadata_view_position.json
(study id -> study with report sections and parallel ImagePath / ImageViewPosition lists,
paths relative to metadata/) and deid_png/ images."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medimg_bench.datasets import reports as _module
from medimg_bench.sample import validate_sample
from tests.datasets._helpers import family_tests

create, test_registered, test_configs_match_factories = family_tests(_module, ["rexgradient"])


def _png(root: Path, rel: str, value: int) -> str:
    path = root / "deid_png" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 8), value, np.uint8)).save(path)
    return f"../deid_png/{rel}"


def _release(root: Path) -> None:
    a_pa = _png(root, "P1/A1/studies/S1/series/R1/instances/I1.png", 50)
    a_lat = _png(root, "P1/A1/studies/S1/series/R2/instances/I2.png", 90)
    b_lat = _png(root, "P2/A2/studies/S2/series/R1/instances/I3.png", 10)
    c_ap = _png(root, "P1/A3/studies/S3/series/R1/instances/I4.png", 200)
    studies = {
        "P1_A1": {"PatientID": "P1", "AccessionNumber": "A1", "PatientSex": "F", "PatientAge": "054Y",
                  "StudyDate": 20200101, "Indication": "Cough.", "Comparison": "None",
                  "Findings": "The lungs are clear.\n No effusion.", "Impression": "No acute disease.",
                  "ImagePath": [a_lat, a_pa], "ImageViewPosition": ["LATERAL", "PA"]},
        "P2_A2": {"PatientID": "P2", "AccessionNumber": "A2", "Indication": None, "Comparison": None,
                  "Findings": "Heart size normal.", "Impression": "Normal.",
                  "ImagePath": [b_lat], "ImageViewPosition": ["LL"]},
        "P1_A3": {"PatientID": "P1", "AccessionNumber": "A3", "Findings": "None", "Impression": "Stable.",
                  "ImagePath": [c_ap], "ImageViewPosition": ["AP"]},
    }
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    (root / "metadata" / "test_metadata_view_position.json").write_text(json.dumps(studies))


def test_rexgradient_findings_frontal(tmp_path, caplog):
    _release(tmp_path)
    with caplog.at_level(logging.WARNING):
        ds = create("rexgradient", tmp_path)
    assert ds.ids == ["P1_A1"]  # P2_A2 has no PA/AP image, P1_A3 no findings
    assert "1 studies with no findings" in caplog.text and "1 studies without a PA/AP" in caplog.text
    s = ds[0]
    validate_sample(s, task="report")
    assert s["report"] == "The lungs are clear. No effusion."
    assert float(s["image"].mean()) == pytest.approx(50 / 255, abs=1e-6)  # the PA view, not the lateral
    assert s["meta"]["patient_id"] == "P1" and s["meta"]["impression"] == "No acute disease."
    assert "comparison" not in s["meta"]  # "None" is a missing section


def test_rexgradient_all_views_sections_and_errors(tmp_path):
    _release(tmp_path)
    ds = create("rexgradient", tmp_path, section="impression", views="all")
    assert ds.ids == ["P1_A1", "P2_A2", "P1_A3"]
    assert [len(ds[i]["image"]) for i in range(3)] == [2, 1, 1]
    assert ds[2]["report"] == "Stable."
    both = create("rexgradient", tmp_path, section="both", views="all")
    assert both[0]["report"] == "The lungs are clear. No effusion. No acute disease."
    with pytest.raises(ValueError, match="1 studies .* have no findings text, e.g. 'P1_A3'"):
        create("rexgradient", tmp_path, drop_empty=False)
    with pytest.raises(FileNotFoundError, match="valid_metadata_view_position.json"):
        create("rexgradient", tmp_path, split="val")
    with pytest.raises(ValueError, match="split must be"):
        create("rexgradient", tmp_path, split="private")
    bad = json.loads((tmp_path / "metadata" / "test_metadata_view_position.json").read_text())
    bad["P2_A2"]["ImageViewPosition"] = ["LL", "PA"]
    (tmp_path / "metadata" / "test_metadata_view_position.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="study 'P2_A2': ImagePath and ImageViewPosition"):
        create("rexgradient", tmp_path)
