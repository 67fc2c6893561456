"""One accounting rule for samples (issue #35 item 4): every item a dataset's layout lists is a
sample of the dataset or an exclusion (``dataset.exclusions``: id, file, reason) — nothing
leaves a test set silently. Exclusions are counted and shown: ``summary.json`` (``n_excluded``,
``exclusions``), the console, ``report.html`` and ``datasets check``.

A dataset is covered by a layout writer in ``LAYOUTS`` returning the dataset and how many items
the layout lists (in the dataset's own unit: images, volumes, slides); loaders that share
another's reader are listed in ``SAME_LOADER``; ``test_every_registered_dataset_is_accounted``
fails for a new dataset until it is in one of them (or excused, with the reason).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.datasets import create, list_datasets
from tests.robustness import test_dataset_bad_input as bad

# the items the bad-input suite's layouts list (tests/robustness/test_dataset_bad_input.py)
BAD_INPUT_LISTED = {"3dreasonknee": 2, "skm_tea": 3, "seg2d_folder": 2, "ubench": 2, "csv": 3, "nih_cxr14": 3,
                    "image_folder": 4, "nifti_pairs": 3, "msd": 2, "brats": 2, "synthetic_ct": 2,
                    "synthetic_cxr": 4}


def _bad_input(name: str) -> Callable[[Path], tuple[object, int]]:
    def write(root: Path) -> tuple[object, int]:
        ds, _ = bad.LAYOUTS[name](root)
        return ds, BAD_INPUT_LISTED[name]
    return write


def _camelyon16(root: Path) -> tuple[object, int]:
    """The challenge layout (test_049 listed in reference.csv, absent from disk) plus a test
    slide of bare glass: five slides listed, three with tissue."""
    pytest.importorskip("tiffslide")
    from tests.datasets.test_pathology_camelyon16 import _write_slide, make_camelyon16

    make_camelyon16(root)
    _write_slide(root / "testing" / "images" / "test_004.tif", np.full((512, 512, 3), 235, np.uint8), 0.25)
    with open(root / "testing" / "reference.csv", "a") as f:
        f.write("test_004,Normal,\n")
    ds = create("camelyon16", root=root, split="test", mpp=1.0, tile_size=32, thumbnail_size=128)
    return ds, 5


def _wsi_tiles(root: Path) -> tuple[object, int]:
    """Three slides, one of bare glass."""
    pytest.importorskip("tiffslide")
    from tests.datasets.test_pathology_camelyon16 import _slide, _write_slide

    for i in range(2):
        _write_slide(root / f"s{i}.tif", _slide(i, bool(i)), 0.25)
    _write_slide(root / "glass.tif", np.full((512, 512, 3), 235, np.uint8), 0.25)
    return create("wsi_tiles", root, mpp=1.0, tile_size=32, thumbnail_size=128), 3


def _medmnist(root: Path) -> tuple[object, int]:
    from tests.datasets.test_medmnist import SPLITS, write_npz

    write_npz(root, "pneumoniamnist")
    return create("medmnist", root=root, flag="pneumoniamnist", split="test"), SPLITS["test"]


def _csv_blank_labels(root: Path) -> tuple[object, int]:
    """Five rows, two with a blank label, dropped on request (on_missing_label=skip)."""
    for i in range(5):
        bad._png(root / f"img/{i}.png", i)
    (root / "labels.csv").write_text("path,label\nimg/0.png,a\nimg/1.png,\nimg/2.png,b\nimg/3.png, \nimg/4.png,a\n")
    return create("csv", root, on_missing_label="skip"), 5


def _seg2d_unpaired(root: Path) -> tuple[object, int]:
    """Four images: two with their masks, one without, one whose mask differs only in case
    (the last two fail their samples, naming the reason)."""
    import shutil

    bad._seg2d(root)
    for name in ("s2", "s3"):
        shutil.copy(root / "images" / "s0.png", root / "images" / f"{name}.png")
    shutil.copy(root / "masks" / "s0.png", root / "masks" / "S3.png")
    return create("seg2d_folder", root), 4


def _phase_eval_files(root: Path) -> tuple[object, int]:
    """Three videos' ground-truth phase files (with a header line): one sample per frame line."""
    from tests.datasets.test_phase_eval_files import _layout, _videos

    videos = _videos(0)
    _layout(root, videos, header=True, named=True, step=1)
    return create("phase_eval_files", root), sum(gt.size for gt, _ in videos)


LAYOUTS: dict[str, Callable[[Path], tuple[object, int]]] = {
    **{name: _bad_input(name) for name in BAD_INPUT_LISTED},
    "camelyon16": _camelyon16, "wsi_tiles": _wsi_tiles, "medmnist": _medmnist,
    "csv (on_missing_label=skip)": _csv_blank_labels, "phase_eval_files": _phase_eval_files,
    "seg2d_folder (unpaired)": _seg2d_unpaired,
}
# the same manifest-building loader as a covered one (the bad-input suite's list), so the same
# accounting
SAME_LOADER = dict(bad.SAME_READERS)
EXCUSED = {
    "builtin_real": "reads the sample files shipped inside pydicom/nibabel: the test writes no layout",
    "pcam": "HDF5 arrays: every row of the file is a sample (test_pathology)",
    "hest1k": "every spot of an ST sample's HDF5 patches is a sample; a benchmark sample's missing file refuses "
              "the dataset, a release row not downloaded is an exclusion (test_pathology_hest1k::test_release_layout)",
}


def _units(ds) -> int:
    """Samples in the layout's unit: slides for a tile dataset, else rows."""
    m = ds.manifest
    return int(m["slide_id"].nunique()) if "slide_id" in m.columns else len(ds)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_listed_item_is_a_sample_or_an_exclusion(tmp_path, name):
    ds, listed = LAYOUTS[name](tmp_path)
    excluded = ds.exclusions
    assert _units(ds) + len(excluded) == listed, (name, _units(ds), excluded)
    for e in excluded:
        assert e["id"] and e["reason"], e
        assert e["id"] not in set(ds.manifest.get("slide_id", ds.manifest["id"]).astype(str))


def test_rows_dropped_on_request_are_named(tmp_path):
    ds, _ = _csv_blank_labels(tmp_path)
    assert ds.dropped == {"missing_label": 2}
    assert [(e["id"], e["file"]) for e in ds.exclusions] == [("img/1", "img/1.png"), ("img/3", "img/3.png")]
    assert all("blank label in 'label' (on_missing_label=skip)" == e["reason"] for e in ds.exclusions)


def test_an_image_without_its_mask_is_a_failed_sample(tmp_path):
    """The issue's example: such an image was no sample at all ("3 samples, 0 failed")."""
    from medimg_bench.sample import SampleError

    ds, _ = _seg2d_unpaired(tmp_path)
    errors = {}
    for i, sid in enumerate(ds.ids):
        try:
            ds[i]
        except SampleError as exc:
            errors[sid] = str(exc)
    assert sorted(errors) == ["s2", "s3"]
    assert "has no mask 's2.*'" in errors["s2"] and "differs from it only in case" in errors["s3"]


def test_every_registered_dataset_is_accounted():
    known = {n.split(" ")[0] for n in LAYOUTS} | set(SAME_LOADER) | set(EXCUSED)
    missing = sorted(set(list_datasets()) - known)
    assert not missing, f"add a layout to LAYOUTS (or the reason to EXCUSED) for: {missing}"
    assert not set(EXCUSED) & set(LAYOUTS)


def test_slides_without_tissue_and_absent_files_are_named(tmp_path):
    ds, _ = _camelyon16(tmp_path)
    by_id = {e["id"]: e for e in ds.exclusions}
    assert set(by_id) == {"test_004", "test_049"}
    assert by_id["test_004"]["file"] == "testing/images/test_004.tif" and "without tissue" in by_id["test_004"]["reason"]
    assert "not on disk" in by_id["test_049"]["reason"]
    assert by_id["test_004"]["kind"] == "no_tiles" and by_id["test_049"]["kind"] == "excluded"
    assert ds.subset(ds.ids[:2]).exclusions == ds.exclusions  # a subset keeps its set's exclusions
    ds.subset(ds.ids[:2]).exclude("x", reason="only on the copy")
    assert len(ds.exclusions) == 2


class _Brightness:
    """Two-class probabilities from each tile's mean intensity (no weights)."""

    task, name = "classification", "brightness"

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        m = batch["image"].float().mean(dim=(1, 2, 3)).clamp(0, 1)
        return {"probs": torch.stack([m, 1 - m], dim=1)}


def test_exclusions_reach_summary_console_report_and_check(tmp_path):
    import medimg_bench as mb
    from medimg_bench.datasets.check import check_dataset
    from medimg_bench.engine.report import print_summary
    from medimg_bench.report.page import write_report
    from medimg_bench.tasks.classification import ClassificationTask

    ds, _ = _camelyon16(tmp_path / "c16")
    res = mb.evaluate(_Brightness(), ds, task=ClassificationTask(multilabel=False), progress=False,
                      n_resamples=5, device="cpu")
    assert res.summary["n_excluded"] == 2
    assert [e["id"] for e in res.summary["exclusions"]] == ["test_004", "test_049"]
    run = res.save(tmp_path / "run")
    saved = json.loads((run / "summary.json").read_text())
    assert saved["n_excluded"] == 2 and saved["exclusions"] == res.summary["exclusions"]
    html = write_report(run).read_text()
    assert "Exclusions (2)" in html and "test_049" in html and "testing/images/test_004.tif" in html
    assert "2 excluded" in html
    from rich.console import Console

    console = Console(record=True, width=200)
    print_summary(res, console)
    text = console.export_text()
    assert "2 excluded" in text and "excluded test_004 (testing/images/test_004.tif): slide without tissue" in text
    report = check_dataset({"test": ds}, read_pixels=False)
    out = report.format()
    assert "excluded (listed by the layout, not samples):" in out
    assert "[test] test_049 (testing/images/test_049.tif): listed in testing/reference.csv" in out
    assert report.to_dict()["splits"]["test"]["excluded"][0]["id"] == "test_004"


@pytest.mark.parametrize("kind", ["scores", "answers"])
def test_a_prediction_for_an_id_the_dataset_lacks_is_an_exclusion(tmp_path, kind):
    """A stored prediction whose id the dataset does not have was only a log warning; it is now
    an exclusion of the run, counted in summary.json and shown."""
    import pandas as pd

    import medimg_bench as mb
    from medimg_bench.builders import build_model

    ds = mb.create_dataset("synthetic_cxr", cache_dir=tmp_path / "cxr", split="test", n=6, size=16)
    if kind == "scores":
        table = pd.DataFrame({"id": list(ds.ids) + ["stranger"]})
        for c in ds.classes:
            table[c] = 0.5
        path = tmp_path / "predictions.csv"
        table.to_csv(path, index=False)
    else:
        path = tmp_path / "answers.jsonl"
        path.write_text("".join(json.dumps({"id": i, "text": "yes"}) + "\n" for i in [*ds.ids[:2], "stranger"]))
    model = build_model({"name": "predictions", "options": {"root": str(path)}}, ds)
    assert model.unknown_ids(ds.ids) == ["stranger"]
    assert ds.exclusions == [{"id": "stranger", "file": str(path), "kind": "excluded",
                              "reason": "a stored prediction for an id the dataset does not have (not scored)"}]
    build_model({"name": "predictions", "options": {"root": str(path)}}, ds)  # bound again: counted once
    assert len(ds.exclusions) == 1
    if kind == "scores":
        res = mb.evaluate(model, ds, task="classification", progress=False, n_resamples=5)
        assert res.summary["n_samples"] == len(ds) and res.summary["n_excluded"] == 1
        assert res.summary["exclusions"][0]["id"] == "stranger"


def test_exclusions_survive_a_merge_of_shards(tmp_path, monkeypatch):
    import pandas as pd

    from medimg_bench.engine.merge import merge_runs
    from medimg_bench.runs import run

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    ds = create("synthetic_cxr", cache_dir=tmp_path / "data", split="test", n=8, size=16)
    table = pd.DataFrame({"id": [*ds.ids, "stranger"]})
    for c in ds.classes:
        table[c] = np.linspace(0.1, 0.9, len(table))
    table.to_csv(tmp_path / "predictions.csv", index=False)
    common = ["dataset=synthetic_cxr", f"dataset.root={ds.root}", "dataset.options.n=8", "dataset.options.size=16",
              "model=predictions", f"model.options.root={tmp_path / 'predictions.csv'}",
              "bootstrap.n_resamples=5", "progress=false", "device=cpu"]
    shards = [run([*common, f"shard={i}/2"], run_dir=tmp_path / f"s{i}").run_dir for i in range(2)]
    merged = merge_runs(shards, tmp_path / "merged")
    assert merged.summary["n_excluded"] == 1 and merged.summary["exclusions"][0]["id"] == "stranger"
    saved = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert saved["exclusions"] == merged.summary["exclusions"]
