"""Touchstone's TotalSegmentator test cases (``datasets/volumetric/touchstone.py``): a
TotalSegmentator V2 folder and a per-case results file in Touchstone's format
(``totalsegmentator_results/<model>/dsc.csv`` @f32135a9: ``name`` then nine organ columns, blank =
not scored)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from medimg_bench.datasets.volumetric.touchstone import TOUCHSTONE_ORGANS, read_case_list
from medimg_bench.registry import create_dataset

nib = pytest.importorskip("nibabel")
AFF = np.diag([1.5, 1.5, 3.0, 1.0])
HEADER = "name,aorta,gall_bladder,kidney_left,kidney_right,liver,pancreas,postcava,spleen,stomach"


def _totalseg(root: Path, ids: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "meta.csv").write_text("image_id;split\n" + "".join(f"{i};{'test' if k % 2 else 'train'}\n"
                                                                for k, i in enumerate(ids)))
    for k, i in enumerate(ids):
        seg = root / i / "segmentations"
        seg.mkdir(parents=True)
        nib.save(nib.Nifti1Image(np.zeros((10, 4, 3), np.int16), AFF), str(root / i / "ct.nii.gz"))
        # every TotalSegmentator structure file Touchstone's organs need, plus one it does not score
        for j, s in enumerate([*TOUCHSTONE_ORGANS.values(), "colon"]):
            m = np.zeros((10, 4, 3), np.uint8)
            m[j, : 1 + k % 3, :] = 1
            nib.save(nib.Nifti1Image(m, AFF), str(seg / f"{s}.nii.gz"))


def test_cases_of_a_touchstone_results_file(tmp_path):
    _totalseg(tmp_path / "ts", ["s0000", "s0001", "s0002", "s0003"])
    dsc = tmp_path / "dsc.csv"
    dsc.write_text(HEADER + "\ns0000,,,,,,,,,\ns0003,0.93,,0.96,0.96,0.97,0.91,0.90,0.98,0.97\n")
    assert read_case_list(dsc) == ["s0000", "s0003"]
    ds = create_dataset("touchstone", root=tmp_path / "ts", cases=dsc)
    assert ds.ids == ["s0000", "s0003"] and ds.name == "touchstone"
    assert ds.classes == ["background", *TOUCHSTONE_ORGANS.values()]
    s = ds[1]
    labels = s["mask"].numpy().reshape(s["mask"].shape[-3:])
    # structure j of the list is label j + 1 on row j; colon is not read
    for j in range(9):
        assert set(np.unique(labels[j])) == {0, j + 1}
    assert labels[9].max() == 0
    assert create_dataset("touchstone", root=tmp_path / "ts", cases=dsc, split="test").ids == ["s0003"]
    ids = tmp_path / "ids.txt"
    ids.write_text("s0001\n\ns0002\n")
    assert create_dataset("touchstone", root=tmp_path / "ts", cases=ids).ids == ["s0001", "s0002"]


def test_bad_case_lists_name_the_file(tmp_path):
    _totalseg(tmp_path / "ts", ["s0000"])
    with pytest.raises(FileNotFoundError, match="absent.csv"):
        create_dataset("touchstone", root=tmp_path / "ts", cases=tmp_path / "absent.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("case,aorta\ns0000,0.9\n")
    with pytest.raises(ValueError, match="no 'name' column"):
        create_dataset("touchstone", root=tmp_path / "ts", cases=bad)
    more = tmp_path / "more.csv"
    more.write_text(HEADER + "\ns0000,,,,,,,,,\ns0999,,,,,,,,,\n")
    with pytest.raises(ValueError, match=r"1 of the 2 cases .* e\.g\. \['s0999'\]"):
        create_dataset("touchstone", root=tmp_path / "ts", cases=more)
    (tmp_path / "ts" / "s0000" / "segmentations" / "inferior_vena_cava.nii.gz").unlink()
    ds = create_dataset("touchstone", root=tmp_path / "ts", cases=_ids(tmp_path, ["s0000"]))
    with pytest.raises(Exception, match="inferior_vena_cava"):
        ds[0]


def _ids(tmp_path: Path, ids: list[str]) -> Path:
    p = tmp_path / "ids.txt"
    p.write_text("\n".join(ids) + "\n")
    return p
