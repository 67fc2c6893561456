"""AbdomenAtlas (Touchstone training set) in its released layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from medimg_bench.registry import create_dataset
from medimg_bench.sample import SampleError

nib = pytest.importorskip("nibabel")
AFF = np.diag([0.8, 0.8, 2.0, 1.0])


def _case(root: Path, name: str, seed: int, structures=("aorta", "liver", "spleen")) -> np.ndarray:
    rng = np.random.default_rng(seed)
    (root / name / "segmentations").mkdir(parents=True)
    nib.save(nib.Nifti1Image(rng.normal(size=(8, 7, 5)).astype(np.float32), AFF), str(root / name / "ct.nii.gz"))
    truth = np.zeros((8, 7, 5), np.int64)
    for i, s in enumerate(structures):
        m = np.zeros((8, 7, 5), np.uint8)
        m[i * 2:i * 2 + 2, 1:5, 1:4] = 1
        truth[m > 0] = sorted(structures).index(s) + 1
        nib.save(nib.Nifti1Image(m, AFF), str(root / name / "segmentations" / f"{s}.nii.gz"))
    nib.save(nib.Nifti1Image(truth.astype(np.uint8), AFF), str(root / name / "combined_labels.nii.gz"))
    return truth


def test_layout_labels_and_splits(tmp_path):
    truths = {f"BDMAP_0000000{i}": _case(tmp_path, f"BDMAP_0000000{i}", i) for i in range(1, 4)}
    ds = create_dataset("abdomenatlas", root=tmp_path)
    assert ds.ids == sorted(truths) and ds.classes == ["background", "aorta", "liver", "spleen"]
    assert set(ds.manifest["split"]) == {"train"}
    s = ds[1]
    np.testing.assert_array_equal(s["mask"].numpy(), truths["BDMAP_00000002"])
    (tmp_path / "splits.csv").write_text("BDMAP_ID,split\nBDMAP_00000001,train\nBDMAP_00000002,val\nBDMAP_00000003,val\n")
    val = create_dataset("abdomenatlas", root=tmp_path, split="val", split_file=tmp_path / "splits.csv")
    assert val.ids == ["BDMAP_00000002", "BDMAP_00000003"]
    only = create_dataset("abdomenatlas", root=tmp_path, structures=["liver"])
    assert only.classes == ["background", "liver"] and set(np.unique(only[0]["mask"].numpy())) == {0, 1}


def test_missing_structure_names_the_file(tmp_path):
    _case(tmp_path, "BDMAP_00000001", 1)
    _case(tmp_path, "BDMAP_00000002", 2, structures=("aorta", "liver"))
    ds = create_dataset("abdomenatlas", root=tmp_path)
    assert ds[0]["mask"].max() == 3
    with pytest.raises(SampleError, match=r"BDMAP_00000002/segmentations/spleen\.nii\.gz"):
        ds[1]
    with pytest.raises(FileNotFoundError, match="BDMAP"):
        create_dataset("abdomenatlas", root=tmp_path / "BDMAP_00000001" / "segmentations")
