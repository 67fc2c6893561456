"""The page on real CT (TotalSegmentator's reference case in ../shared/data, read in place through
symlinks): the worst cases' slices show the real image and organ names, the ranking follows the
size of the error, and the pictures decode in a browser where one is installed."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

import medimg_bench as mb
from medimg_bench.report import write_report
from medimg_bench.tasks.segmentation import SegmentationTask
from tests.report._browser import Chromium, find_browser

#: voxels each case's prediction is moved by: the larger, the worse its Dice
SHIFTS = {"case_a": 1, "case_b": 4, "case_c": 2}
ORGANS = {1: "spleen", 2: "kidney_right", 3: "kidney_left", 5: "liver", 6: "stomach"}


@pytest.fixture(scope="module")
def real_seg_run(shared_data, tmp_path_factory):
    src = shared_data / "totalseg_ct"
    root = tmp_path_factory.mktemp("totalseg_pairs")
    for d in ("images", "labels"):
        (root / d).mkdir()
    for case in SHIFTS:  # three names for the one real case, read in place
        (root / "images" / f"{case}.nii.gz").symlink_to(src / "ct.nii.gz")
        (root / "labels" / f"{case}.nii.gz").symlink_to(src / "seg.nii.gz")
    classes = ["background"] + [ORGANS[k] for k in sorted(ORGANS)]
    remap = {k: i + 1 for i, k in enumerate(sorted(ORGANS))}

    ds = mb.create_dataset("nifti_pairs", root=root, split="test", classes=classes)
    ds_mapped = _Remapped(ds, remap)
    res = mb.evaluate(_Shift(), ds_mapped, task=SegmentationTask(keep_worst=2),
                      metrics={"dice": {}, "hd95": {}}, batch_size=1, progress=False, n_resamples=20)
    out = tmp_path_factory.mktemp("real_run") / "run"
    res.save(out, config={"task": {"name": "segmentation"}, "model": {"name": "shifted_organs"},
                          "dataset": {"name": "nifti_pairs", "root": str(root), "split": "test"}})
    write_report(out)
    return out


def _remap(mask, remap):
    m = torch.as_tensor(mask)
    out = torch.zeros_like(m)
    for old, new in remap.items():
        out[m == old] = new
    return out


class _Remapped:
    """The dataset with the five organs' labels made contiguous (1..5), everything else 0."""

    def __init__(self, ds, remap):
        self.ds, self.remap = ds, remap

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        s = dict(self.ds[i])
        s["mask"] = _remap(s["mask"], self.remap)
        return s

    def __getattr__(self, name):
        return getattr(self.ds, name)


class _Shift:
    """A stand-in model: the reference moved along the first axis by the case's shift."""

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        out = [torch.roll(torch.as_tensor(m), shifts=SHIFTS[str(s)], dims=0) for s, m in zip(batch["id"], batch["mask"])]
        return {"labels": torch.stack(out)}


def test_real_ct_worst_cases_are_the_largest_shifts_with_real_pictures(real_seg_run):
    meta = json.loads((real_seg_run / "worst" / "segmentation.json").read_text())
    assert [c["id"] for c in meta["cases"]] == ["case_b", "case_c"]  # shift 4, then 2; case_a (1) not kept
    assert meta["classes"][1:] == [ORGANS[k] for k in sorted(ORGANS)]
    arrays = np.load(real_seg_run / "worst" / "segmentation.npz", allow_pickle=False)
    image = arrays["image_0"]
    assert image.dtype == np.uint8 and image.std() > 20  # a windowed CT slice, not a blank
    assert set(np.unique(arrays["reference_0"])) > {0, 5}  # liver (5 after remapping) on the slice
    page = (real_seg_run / "report.html").read_text(encoding="utf-8")
    headings = re.findall(r"<h4>([^<]*)</h4>", page)
    assert headings[0].startswith("case_b — mean dice") and headings[1].startswith("case_c — mean dice")
    for organ in ORGANS.values():
        assert organ in page
    assert len(re.findall(r'<img src="data:image/png;base64,[^"]+" alt="(?:image|reference|prediction|errors)"', page)) == 8


@pytest.mark.skipif(find_browser() is None, reason="no Chromium/Chrome found (apt-get install -y chromium)")
def test_real_ct_page_renders(real_seg_run, tmp_path):
    with Chromium(find_browser(), tmp_path / "profile") as browser:
        seen = browser.open_page(real_seg_run / "report.html", tmp_path / "real_ct.png")
    assert seen.problems() == []
    assert sum(1 for i in seen["images"] if i["alt"] in ("image", "reference", "prediction", "errors")) == 8
    assert all(i["width"] > 0 for i in seen["images"])
