"""nifti_pairs without ``classes``: from dataset.json, else named after the label values found."""

from __future__ import annotations

import json

import numpy as np
import pytest

nib = pytest.importorskip("nibabel")

from medimg_bench.datasets import create  # noqa: E402


def _pair(root, case, top):
    for sub in ("images", "labels"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    lab = np.zeros((4, 4, 3), dtype=np.uint8)
    lab[0, 0, 0] = top
    nib.save(nib.Nifti1Image(np.random.default_rng(0).random((4, 4, 3)).astype(np.float32), np.eye(4)),
             str(root / "images" / f"{case}.nii.gz"))
    nib.save(nib.Nifti1Image(lab, np.eye(4)), str(root / "labels" / f"{case}.nii.gz"))


def test_classes_from_the_label_values_found(tmp_path):
    _pair(tmp_path, "a", 1)
    _pair(tmp_path, "b", 3)
    ds = create("nifti_pairs", tmp_path)
    assert list(ds.classes) == ["background", "label_1", "label_2", "label_3"]
    assert "label values" in ds.classes_note and "dataset.options.classes" in ds.classes_note


@pytest.mark.parametrize("labels", [{"0": "background", "1": "spleen"}, {"background": 0, "spleen": 1}])
def test_classes_from_dataset_json_v1_and_v2(tmp_path, labels):
    _pair(tmp_path, "a", 1)
    (tmp_path / "dataset.json").write_text(json.dumps({"labels": labels}))
    ds = create("nifti_pairs", tmp_path)
    assert list(ds.classes) == ["background", "spleen"] and "dataset.json" in ds.classes_note


def test_given_classes_win(tmp_path):
    _pair(tmp_path, "a", 2)
    ds = create("nifti_pairs", tmp_path, classes=["background", "liver", "tumour"])
    assert list(ds.classes) == ["background", "liver", "tumour"] and ds.classes_note is None


def test_segmentation_without_classes_names_the_option():
    from medimg_bench.tasks.segmentation import SegmentationTask

    with pytest.raises(ValueError, match=r"dataset\.options\.classes=\[background,"):
        SegmentationTask().build_metrics(None, None)
