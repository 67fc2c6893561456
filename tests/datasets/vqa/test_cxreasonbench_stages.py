"""cxreasonbench with stages=True: each case's later stage files and images, as the harness reads
them (ttumyche/CXReasonBench 72357fe), and errors naming the file."""

from __future__ import annotations

import pytest

from medimg_bench.registry import create_dataset
from medimg_bench.sample import validate_sample
from tests.datasets.vqa.cxreasonbench_fixture import write_release


def test_stage_files_and_images(tmp_path):
    root, mimic = write_release(tmp_path)
    ds = create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True)
    assert ds.ids == ["cardiomegaly/d1", "cardiomegaly/d2", "cardiomegaly/d3", "inclusion/d1", "inclusion/d4"]
    s = ds[0]
    validate_sample(s, task="vqa")
    stages = s["meta"]["stages"]
    assert sorted(stages) == ["path1/init", "path1/stage1", "path1/stage2", "path1/stage3", "path1/stage4",
                              "path2/stage1", "path2/stage2", "path2/stage3"]
    assert stages["path1/stage1"]["file"] == "qa/cardiomegaly/path1/stage1/threshold/d1.json"
    assert stages["path1/stage2"]["content"]["answer"] == ["(a) 1st image", "(b) 2nd image"]
    images = s["meta"]["stage_images"]
    assert sorted(images) == ["pnt:/cardiomegaly/d1/points.png", "segmask:/cardiomegaly/d1/guide.png",
                              "segmask:/cardiomegaly/d1/heart_1.png", "segmask:/cardiomegaly/d1/heart_2.png",
                              "segmask:/cardiomegaly/d1/thorax.png"]
    assert float(images["pnt:/cardiomegaly/d1/points.png"].mean()) == pytest.approx(200 / 255, abs=1e-6)
    assert "path1/stage1.5" in ds[3]["meta"]["stages"] and "path1/stage1.5" not in stages
    # the stage images are part of the dataset's identity
    assert ds.identity()["n_files"] == 4 + 5 * 5  # d1 of both tasks is one radiograph
    plain = create_dataset("cxreasonbench", root=root, mimic_root=mimic)
    assert "stages" not in plain[0]["meta"]


def test_missing_or_malformed_stage_files_name_the_file(tmp_path):
    root, mimic = write_release(tmp_path)
    (root / "qa/inclusion/path1/stage1.5/basic/d4.json").unlink()
    with pytest.raises(ValueError, match=r"stage1\.5.*inclusion/d4.*path1/stage1\.5 stage file is missing"):
        create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True)
    assert len(create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True, on_error="skip")) == 4
    (root / "qa/cardiomegaly/path1/stage2/segmask/d2.json").write_text('{"question": ["a", "b"], "answer": ["x"], "img_path": [[], []]}')
    with pytest.raises(ValueError, match=r"d2\.json.*path1/stage2: lists .* differ in length"):
        create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True, tasks=["cardiomegaly"])
    (root / "qa/cardiomegaly/path1/stage2/segmask/d2.json").unlink()
    (root / "segmask_bodypart/cardiomegaly/d1/thorax.png").unlink()
    ds = create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True, tasks=["cardiomegaly"], on_error="skip")
    with pytest.raises(ValueError, match=r"cardiomegaly/d1.*thorax\.png"):
        ds[0]
