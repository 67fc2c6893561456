"""model=predictions label-map folders: values that are not labels (0.6 from a probability map,
negative, beyond the dataset's labels) fail their sample naming the file (issue #19 item 8)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import medimg_bench as mb
from medimg_bench.builders import build_model
from medimg_bench.engine.results import EvaluationFailed
from medimg_bench.models.predictions.checks import check_label_values

nib = pytest.importorskip("nibabel")
REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "totalseg_ct"


def _seg(model, ds):
    return mb.evaluate(model, ds, task="segmentation", metrics={"dice": {}}, progress=False, n_resamples=10)


@pytest.fixture()
def ct(tmp_path):
    ds = mb.create_dataset("synthetic_ct", cache_dir=tmp_path / "ct", split=None, n=2, shape=(16, 12, 8))
    preds = tmp_path / "preds"
    preds.mkdir()
    for sid, mask in zip(ds.manifest["id"], ds.manifest["mask"]):
        shutil.copy(ds.resolve(mask), preds / f"{sid}.nii.gz")  # perfect predictions
    return ds, preds


def _rewrite(path: Path, fn) -> None:
    img = nib.load(str(path))
    nib.save(nib.Nifti1Image(fn(np.asarray(img.dataobj)), img.affine), str(path))


def test_float_labels_are_refused_naming_the_file(ct):
    ds, preds = ct
    target = preds / f"{ds.ids[1]}.nii.gz"
    _rewrite(target, lambda a: np.where(a > 0, 0.6, 0.0).astype(np.float32))  # was cast to 0: Dice 0
    res = _seg(mb.create_model("predictions", root=preds), ds)
    assert res.summary["n_failed"] == 1
    err = res.samples.set_index("id").loc[ds.ids[1], "error"]
    err = err if isinstance(err, str) else err.dropna().iloc[0]
    assert str(target) in err and "not whole numbers" in err and "0.6" in err
    # whole numbers stored as floats are labels
    shutil.copy(ds.resolve(ds.manifest["mask"].iloc[1]), target)
    _rewrite(target, lambda a: a.astype(np.float32))
    res = _seg(mb.create_model("predictions", root=preds), ds)
    assert res.summary["n_failed"] == 0
    assert res.summary["metrics"]["dice"]["mean"]["value"] == pytest.approx(1.0)


def test_labels_beyond_the_dataset_are_refused_once_bound(ct):
    ds, preds = ct
    target = preds / f"{ds.ids[0]}.nii.gz"
    _rewrite(target, lambda a: np.where(a > 0, len(ds.classes), 0).astype(np.uint8))
    model = build_model({"name": "predictions", "options": {"root": str(preds)}}, ds)
    res = _seg(model, ds)
    assert res.summary["n_failed"] == 1
    err = res.samples.set_index("id").loc[ds.ids[0], "error"]
    err = err if isinstance(err, str) else err.dropna().iloc[0]
    assert str(target) in err and f"label {len(ds.classes)} but the dataset has {len(ds.classes)} labels" in err


def test_check_label_values_rules():
    assert check_label_values(np.array([0.0, 2.0]), "x.nii.gz", sample_id="s").dtype == np.int64
    with pytest.raises(ValueError, match=r"'x.nii.gz': negative label -1.*\(sample 's'\)"):
        check_label_values(np.array([0, -1], np.int16), "x.nii.gz", sample_id="s")
    with pytest.raises(ValueError, match="1 of 3 values are not whole numbers"):
        check_label_values(np.array([0, 1, 1.0001]), "x.nii.gz", sample_id="s")
    with pytest.raises(ValueError, match="not a label map"):
        check_label_values(np.array(["a"]), "x.nii.gz", sample_id="s")


def test_real_totalsegmentator_mask_as_predictions(tmp_path):
    """The real 41-organ CT mask scored against itself (Dice 1 on every organ present), then as a
    probability-like float map (a blurred edge gives fractions): refused naming the file."""
    if not (REAL / "seg.nii.gz").exists():
        pytest.skip(f"real data not found at {REAL} (../shared/data is absent in a fresh clone)")
    root = tmp_path / "pairs"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    os.symlink(REAL / "ct.nii.gz", root / "images" / "ct.nii.gz")  # read in place, never copied
    os.symlink(REAL / "seg.nii.gz", root / "labels" / "ct.nii.gz")
    seg = nib.load(str(REAL / "seg.nii.gz"))
    labels = np.asarray(seg.dataobj)
    ds = mb.create_dataset("nifti_pairs", root=root, classes=[str(i) for i in range(int(labels.max()) + 1)])
    preds = tmp_path / "preds"
    preds.mkdir()
    os.symlink(REAL / "seg.nii.gz", preds / "ct.nii.gz")
    res = _seg(build_model({"name": "predictions", "options": {"root": str(preds)}}, ds), ds)
    assert res.summary["n_failed"] == 0
    per_class = res.summary["metrics"]["dice"]["per_class"]
    present = [str(v) for v in np.unique(labels) if v > 0]
    assert len(present) == 41 and all(per_class[c]["mean"] == pytest.approx(1.0) for c in present)
    (preds / "ct.nii.gz").unlink()
    smooth = labels.astype(np.float32)
    smooth[1:] = 0.6 * smooth[1:] + 0.4 * smooth[:-1]  # partial-volume edges along x
    nib.save(nib.Nifti1Image(smooth, seg.affine), str(preds / "ct.nii.gz"))
    with pytest.raises(EvaluationFailed) as failed:  # the one case failed: the run failed
        _seg(mb.create_model("predictions", root=preds), ds)
    res = failed.value.results
    assert res.summary["n_failed"] == 1
    err = res.samples["error"].dropna().iloc[0]
    assert str(preds / "ct.nii.gz") in err and "not whole numbers" in err
