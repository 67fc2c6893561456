"""A predicted label map off the image's grid is the prediction's fault: ``[predict]``, not
``[target]`` (issue #19 item 15)."""

from __future__ import annotations

import shutil

import nibabel as nib
import numpy as np

import medimg_bench as mb


def test_off_grid_predicted_label_map_fails_as_predict(tmp_path):
    ds = mb.create_dataset("synthetic_ct", cache_dir=tmp_path / "ct", split=None, n=2, shape=(16, 12, 8))
    preds = tmp_path / "preds"
    preds.mkdir()
    for sid, mask in zip(ds.manifest["id"], ds.manifest["mask"]):
        shutil.copy(ds.resolve(mask), preds / f"{sid}.nii.gz")
    shifted = nib.load(preds / f"{ds.ids[1]}.nii.gz")
    affine = shifted.affine.copy()
    affine[:3, 3] += 7.5  # 7.5 mm away: not a flip or permutation of the image's grid
    nib.save(nib.Nifti1Image(np.asarray(shifted.dataobj), affine), preds / f"{ds.ids[1]}.nii.gz")
    res = mb.evaluate(mb.create_model("predictions", root=preds), ds, task="segmentation",
                      metrics={"dice": {}}, progress=False, n_resamples=10)
    failed = res.samples[res.samples["status"] == "failed"]
    assert list(failed["id"].unique()) == [ds.ids[1]]
    error = failed["error"].iloc[0]
    assert error.startswith("[predict]") and f"{ds.ids[1]}.nii.gz" in error
