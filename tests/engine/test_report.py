"""The console summary of a run (engine/report.py) on TotalSegmentator's 117-class map (issue 36
item 7: 485 console lines, three quarters of them "—", a mean over the 41 present classes shown
as over 117, "[—, —]" with no reason on one case, a missed organ's distances unflagged)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import medimg_bench as mb
from medimg_bench.engine.report import class_notes, empty_classes, subgroup_table, summary_table
from medimg_bench.engine.results import Results
from medimg_bench.tasks.segmentation import SegmentationTask


class _Missing:
    """The reference label map with one organ left out of the prediction (a missed structure)."""

    def __init__(self, organ: int) -> None:
        self.organ = organ

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        out = [torch.where(torch.as_tensor(m) == self.organ, 0, torch.as_tensor(m)) for m in batch["mask"]]
        return {"labels": torch.stack(out)}


def _text(renderable) -> str:
    from rich.console import Console

    console = Console(record=True, width=160)
    console.print(renderable)
    return console.export_text()


@pytest.fixture(scope="module")
def totalseg_run(shared_data, tmp_path_factory):
    src = shared_data / "totalseg_ct"
    names = json.loads((src / "labels.json").read_text())
    classes = ["background"] + [names[str(k)] for k in range(1, len(names) + 1)]
    root = tmp_path_factory.mktemp("totalseg")
    for d in ("images", "labels"):
        (root / d).mkdir()
    (root / "images" / "s0011.nii.gz").symlink_to(src / "ct.nii.gz")
    (root / "labels" / "s0011.nii.gz").symlink_to(src / "seg.nii.gz")
    ds = mb.create_dataset("nifti_pairs", root=root, split="test", classes=classes)
    res = mb.evaluate(_Missing(organ=1), ds, task=SegmentationTask(keep_worst=0), metrics={"dice": {}, "hd95": {}},
                      progress=False, n_resamples=20)
    return res, classes


def test_totalsegmentator_console_shows_present_classes_and_says_the_rest(totalseg_run):
    res, classes = totalseg_run
    present = sorted({str(c) for c in res.samples.loc[res.samples["target_voxels"] > 0, "class"]})
    hidden = empty_classes(res)
    assert len(classes) - 1 == 117 and len(present) == 41
    assert set(hidden) == set(classes[1:]) - set(present)  # no value anywhere: absent from the case
    text = _text(summary_table(res))
    lines = [ln for ln in text.splitlines() if "│" in ln]
    assert len(lines) <= 2 * 41 + 2 + 2  # a row per present class and metric, the means, the header
    assert "mean (41 of 117)" in text
    assert "1 patient: no interval" in text and "[—, —]" not in text
    notes = class_notes(res)
    assert notes[0].startswith(f"{len(hidden)} class(es) have no value in any case")
    assert notes[1].startswith("MISSED: the prediction is empty where the reference has the class in 1 case(s) "
                               "of 1 class(es) (spleen)")


def test_subgroup_interval_column_is_dropped_when_never_computed():
    summary = {"subgroups": {"sex": {"dice": {"per_group": {"F": {"value": 0.8, "n": 3}, "M": {"value": 0.7, "n": 2}},
                                              "gap": 0.1}}}}
    res = Results(name="x", task=None, samples=pd.DataFrame(), summary=summary, manifest={})
    text = _text(subgroup_table(res))
    assert "CI" not in text and "[—, —]" not in text and "0.800" in text
    summary["subgroups"]["sex"]["dice"]["per_group"]["F"].update(ci_low=0.7, ci_high=0.9)
    assert "[0.700, 0.900]" in _text(subgroup_table(res))
