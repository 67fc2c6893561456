"""Report datasets: section parser on realistic texts, IU X-ray (both layouts), MIMIC-CXR."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from medimg_bench.datasets import reports as _module
from medimg_bench.datasets.reports import parse_report_sections, select_report_text
from medimg_bench.sample import validate_sample
from tests.datasets._helpers import family_tests

MIMIC_REPORT = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  ___F with new onset ascites  // eval for infection

 TECHNIQUE:  Chest PA and lateral

 COMPARISON:  None.

 FINDINGS:

 There is no focal consolidation, pleural effusion or pneumothorax.  Bilateral
 nodular opacities that most likely represent nipple shadows. The
 cardiomediastinal silhouette is normal.

 IMPRESSION:

 No acute cardiopulmonary process.
"""

NO_FINDINGS = """                                 FINAL REPORT
 HISTORY:  Shortness of breath.

 COMPARISON:  ___

 IMPRESSION:  Interval increase in small right pleural effusion.  Otherwise no change.
"""

COMBINED = """WET READ: ___ ___ 10:43 AM
  No pneumothorax.
 ______________________________________________________________________________
                                 FINAL REPORT
 INDICATION: Line placement.
 FINDINGS AND IMPRESSION:  Right internal jugular catheter ends in the
 low SVC.  No pneumothorax.
"""

LOWERCASE = """indication: cough
findings: Lungs are clear.
No effusion.
impression: normal chest.
"""

NO_HEADERS = """PA and lateral views of the chest.

The lungs are clear without consolidation.

No acute cardiopulmonary abnormality.
"""

_NAMES = ["iu_xray", "mimic_cxr_reports"]


create, test_registered, test_configs_match_factories = family_tests(_module, _NAMES)



def test_parse_mimic_report():
    s = parse_report_sections(MIMIC_REPORT)
    assert s["findings"] == (
        "There is no focal consolidation, pleural effusion or pneumothorax. Bilateral nodular "
        "opacities that most likely represent nipple shadows. The cardiomediastinal silhouette "
        "is normal."
    )
    assert s["impression"] == "No acute cardiopulmonary process."
    assert s["indication"] == "___F with new onset ascites // eval for infection"
    assert s["comparison"] == "None."
    assert s["technique"] == "Chest PA and lateral"
    assert s["examination"] == "CHEST (PA AND LAT)"
    assert s["preamble"] == "FINAL REPORT"
    assert select_report_text(s, "both").startswith("There is no focal")
    assert select_report_text(s, "both").endswith("No acute cardiopulmonary process.")


def test_parse_missing_findings():
    s = parse_report_sections(NO_FINDINGS)
    assert s["findings"] is None
    assert s["impression"] == "Interval increase in small right pleural effusion. Otherwise no change."
    assert s["history"] == "Shortness of breath."
    assert select_report_text(s, "findings") is None
    assert select_report_text(s, "both") == s["impression"]


def test_parse_findings_and_impression_and_wet_read():
    s = parse_report_sections(COMBINED)
    text = "Right internal jugular catheter ends in the low SVC. No pneumothorax."
    assert s["findings"] == text and s["impression"] == text
    assert s["wet read"].startswith("___ ___ 10:43 AM No pneumothorax.")
    assert s["indication"] == "Line placement."
    assert select_report_text(s, "both") == text  # not duplicated


def test_parse_lowercase_headers_and_no_headers():
    s = parse_report_sections(LOWERCASE)
    assert s["findings"] == "Lungs are clear. No effusion."
    assert s["impression"] == "normal chest."
    assert s["indication"] == "cough"
    s = parse_report_sections(NO_HEADERS)
    assert s["findings"] is None and s["impression"] is None
    assert s["preamble"].startswith("PA and lateral views")
    # a time such as 10:43 or a lowercase non-section word is not a header
    s = parse_report_sections("FINDINGS: seen at 10:43 today, note: stable.\nIMPRESSION: ok")
    assert s["findings"] == "seen at 10:43 today, note: stable." and s["impression"] == "ok"
    with pytest.raises(TypeError):
        parse_report_sections(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="section"):
        select_report_text(s, "summary")


def _png(path: Path, value: int, size=(8, 6)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full(size[::-1], value, np.uint8), mode="L").save(path)


def _iu_openi(root: Path) -> None:
    (root / "indiana_reports.csv").write_text(
        "uid,MeSH,Problems,image,indication,comparison,findings,impression\n"
        '1,normal,normal,Xray Chest PA and Lateral,Positive TB test,None.,"The cardiac silhouette '
        'and mediastinum size are within normal limits.",Normal chest x-XXXX.\n'
        '2,Cardiomegaly/borderline,Cardiomegaly,Chest 2V,Preop,,,"Borderline cardiomegaly."\n'
        "3,normal,normal,Chest,XXXX,,Lungs clear.,No acute disease.\n"
    )
    (root / "indiana_projections.csv").write_text(
        "uid,filename,projection\n"
        "1,1_IM-0001-4001.dcm.png,Frontal\n1,1_IM-0001-3001.dcm.png,Lateral\n"
        "2,2_IM-0652-2001.dcm.png,Lateral\n2,2_IM-0652-1001.dcm.png,Frontal\n"
    )
    img = root / "images" / "images_normalized"
    for i, name in enumerate(["1_IM-0001-4001", "1_IM-0001-3001", "2_IM-0652-2001", "2_IM-0652-1001"]):
        _png(img / f"{name}.dcm.png", 40 * (i + 1))


def test_iu_xray_openi(tmp_path, caplog):
    _iu_openi(tmp_path)
    with caplog.at_level(logging.WARNING):
        ds = create("iu_xray", tmp_path, split="all")
    # uid 2 has no findings -> dropped; uid 3 has no image -> dropped
    assert ds.ids == ["1"]
    assert "no findings text" in caplog.text and "no image" in caplog.text
    s = ds[0]
    validate_sample(s, task="report")
    assert s["report"].startswith("The cardiac silhouette and mediastinum")
    assert s["meta"]["impression"] == "Normal chest x-XXXX."
    assert s["meta"]["view"] == "Frontal"
    assert s["image"].shape == (1, 6, 8)
    assert torch.allclose(s["image"], torch.full((1, 6, 8), 40 / 255))
    ds = create("iu_xray", tmp_path, split="all", section="impression", views="all")
    assert ds.ids == ["1", "2"]
    s = ds[1]
    assert s["report"] == "Borderline cardiomegaly."
    assert [float(i.mean()) for i in s["image"]] == pytest.approx([120 / 255, 160 / 255])
    assert s["meta"]["views"] == ["Lateral", "Frontal"]
    frontal = create("iu_xray", tmp_path, split="all", section="impression")[1]
    assert float(frontal["image"].mean()) == pytest.approx(160 / 255)  # the frontal view
    with pytest.raises(ValueError, match="no official split"):
        create("iu_xray", tmp_path, split="test")
    with pytest.raises(ValueError, match="no findings text"):
        create("iu_xray", tmp_path, split="all", drop_empty=False)


def test_iu_xray_r2gen(tmp_path):
    ann = {
        "train": [{"id": "CXR2384_IM-0942", "report": "The heart size and pulmonary vascularity appear within normal limits.",
                   "image_path": ["CXR2384_IM-0942/0.png", "CXR2384_IM-0942/1.png"], "split": "train"}],
        "val": [],
        "test": [{"id": "CXR1000_IM-0003", "report": "Heart size normal.  Lungs are clear.",
                  "image_path": ["CXR1000_IM-0003/0.png", "CXR1000_IM-0003/1.png"], "split": "test"}],
    }
    (tmp_path / "annotation.json").write_text(json.dumps(ann))
    for sid in ("CXR2384_IM-0942", "CXR1000_IM-0003"):
        _png(tmp_path / "images" / sid / "0.png", 10)
        _png(tmp_path / "images" / sid / "1.png", 20)
    ds = create("iu_xray", tmp_path, split="test")
    assert ds.ids == ["CXR1000_IM-0003"]
    s = ds[0]
    assert s["report"] == "Heart size normal. Lungs are clear."
    assert s["meta"]["patient_id"] == "CXR1000"
    assert s["image"].shape == (1, 6, 8)
    s = create("iu_xray", tmp_path, split="train", views="all")[0]
    assert len(s["image"]) == 2 and s["meta"]["split"] == "train"
    with pytest.raises(ValueError, match="split 'dev'"):
        create("iu_xray", tmp_path, split="dev")


def _mimic(root: Path, jpg: Path) -> None:
    reports = {
        ("10000032", "50414267"): MIMIC_REPORT,
        ("10000032", "53189527"): NO_FINDINGS,
        ("10000764", "57375967"): COMBINED,
        ("10000898", "50771383"): NO_HEADERS,
    }
    for (subject, study), text in reports.items():
        p = root / "files" / f"p{subject[:2]}" / f"p{subject}" / f"s{study}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    jpg.mkdir(parents=True, exist_ok=True)
    (jpg / "mimic-cxr-2.0.0-split.csv").write_text(
        "dicom_id,study_id,subject_id,split\n"
        "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014,50414267,10000032,train\n"
        "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962,50414267,10000032,train\n"
        "2a2277a9-b0ded155-c0de8eb9-c124d10e-82c5caab,53189527,10000032,train\n"
        "68b5c4b1-227d0485-9cc38c3f-7b84ab51-4b472714,57375967,10000764,test\n"
        "fffabebf-74fd3a1f-673b6b41-96ec0ac9-2ab69818,50771383,10000898,test\n"
    )
    (jpg / "mimic-cxr-2.0.0-metadata.csv").write_text(
        "dicom_id,subject_id,study_id,PerformedProcedureStepDescription,ViewPosition,Rows,Columns\n"
        "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014,10000032,50414267,CHEST (PA AND LAT),LATERAL,6,8\n"
        "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962,10000032,50414267,CHEST (PA AND LAT),PA,6,8\n"
        "2a2277a9-b0ded155-c0de8eb9-c124d10e-82c5caab,10000032,53189527,CHEST (PA AND LAT),PA,6,8\n"
        "68b5c4b1-227d0485-9cc38c3f-7b84ab51-4b472714,10000764,57375967,CHEST (PORTABLE AP),AP,6,8\n"
        "fffabebf-74fd3a1f-673b6b41-96ec0ac9-2ab69818,10000898,50771383,CHEST (PA AND LAT),PA,6,8\n"
    )
    for k, line in enumerate((jpg / "mimic-cxr-2.0.0-metadata.csv").read_text().splitlines()[1:]):
        dicom, subject, study = line.split(",")[:3]
        _png(jpg / "files" / f"p{subject[:2]}" / f"p{subject}" / f"s{study}" / f"{dicom}.jpg", 30 + 10 * k)


def test_mimic_cxr_reports(tmp_path, caplog):
    root, jpg = tmp_path / "mimic-cxr-reports", tmp_path / "mimic-cxr-jpg"
    _mimic(root, jpg)
    with caplog.at_level(logging.WARNING):
        ds = create("mimic_cxr_reports", root, split="train", jpg_root=jpg)
    assert ds.ids == ["s50414267"]  # s53189527 has no FINDINGS -> dropped, logged
    assert "dropped 1 reports with no findings" in caplog.text
    s = ds[0]
    validate_sample(s, task="report")
    assert s["report"].startswith("There is no focal consolidation")
    assert s["meta"]["patient_id"] == "10000032" and s["meta"]["study_id"] == "50414267"
    assert s["meta"]["view"] == "PA"
    assert float(s["image"].mean()) == pytest.approx(40 / 255, abs=0.02)  # the PA, not the lateral
    ds = create("mimic_cxr_reports", root, split="test", jpg_root=jpg, section="impression",
                fallback_last_paragraph=True)
    assert ds.ids == ["s57375967", "s50771383"]  # report files in path order
    assert ds[0]["report"] == "Right internal jugular catheter ends in the low SVC. No pneumothorax."
    assert ds[1]["report"] == "No acute cardiopulmonary abnormality."  # last paragraph
    with pytest.raises(ValueError, match="no reports left"):
        create("mimic_cxr_reports", root, split="val", jpg_root=jpg)
    ds = create("mimic_cxr_reports", root, split="all", section="both")  # text only
    assert len(ds) == 3 and "image" not in ds[0]
    ds = create("mimic_cxr_reports", root, split="train", jpg_root=jpg, views="all", section="both")
    assert [len(ds[i]["image"]) for i in range(len(ds))] == [2, 1]
    with pytest.raises(FileNotFoundError, match="split"):
        create("mimic_cxr_reports", root, split="test")


_SECTION_NAMES = {
    "FINDINGS": "findings", "IMPRESSION": "impression", "INDICATION": "indication",
    "COMPARISON": "comparison", "TECHNIQUE": "technique", "HISTORY": "history",
}


@settings(max_examples=40, deadline=None)
@given(
    order=st.permutations(sorted(_SECTION_NAMES)),
    keep=st.lists(st.booleans(), min_size=6, max_size=6),
    case=st.sampled_from([str.upper, str.lower, str.title]),
    bodies=st.lists(
        st.lists(st.from_regex(r"[a-z]{1,8}[.,]?", fullmatch=True), min_size=1, max_size=12),
        min_size=6, max_size=6,
    ),
    newline=st.sampled_from([" ", "\n", "\n\n "]),
)
def test_parse_sections_roundtrip(order, keep, case, bodies, newline):
    """Any subset of sections, in any order and header case, parses back to its bodies."""
    text, expected = " FINAL REPORT\n", {}
    for header, use, words in zip(order, keep, bodies):
        if not use:
            continue
        body = newline.join(words)
        text += f" {case(header)}:{newline}{body}\n\n"
        expected[_SECTION_NAMES[header]] = " ".join(words)
    parsed = parse_report_sections(text)
    for key in ("findings", "impression"):
        assert parsed[key] == expected.get(key)
    for key, body in expected.items():
        assert parsed[key] == body
    assert parsed["preamble"] == "FINAL REPORT"
