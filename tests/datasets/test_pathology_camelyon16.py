"""camelyon16: the challenge's folder layout built with tifffile (pyramidal tiled TIFFs with
resolution tags), splits (eva's validation slides), labels from reference.csv, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medimg_bench.registry import create_dataset


def _write_slide(path: Path, img: np.ndarray, mpp0: float) -> None:
    tifffile = pytest.importorskip("tifffile")
    opts = dict(tile=(64, 64), photometric="rgb", compression="zlib", resolutionunit="CENTIMETER")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tifffile.TiffWriter(path) as tw:
        tw.write(img, subifds=2, resolution=(1e4 / mpp0, 1e4 / mpp0), **opts)
        for k in (2, 4):
            tw.write(img[::k, ::k], subfiletype=1, resolution=(1e4 / (mpp0 * k), 1e4 / (mpp0 * k)), **opts)


def _slide(seed: int, tumor: bool) -> np.ndarray:
    """512×512 at 0.25 µm/px: glass with a stained tissue block (rows/cols 128-383); tumour slides
    have a darker, bluer patch in it."""
    rng = np.random.default_rng(seed)
    img = np.full((512, 512, 3), 235, np.uint8)
    img[128:384, 128:384] = rng.integers(0, 40, (256, 256, 3)) + np.array([190, 90, 160], np.uint8)
    if tumor:
        img[128:256, 128:256] = rng.integers(0, 40, (128, 128, 3)) + np.array([70, 30, 140], np.uint8)
    return img


def make_camelyon16(root: Path) -> Path:
    """training/{normal,tumor} (incl. eva's val slides normal_010 and tumor_001), testing/images
    and testing/reference.csv as the challenge ships it (no header; a normal row has no type)."""
    for i, name in enumerate(["normal_001", "normal_002", "normal_010", "normal_003"]):
        _write_slide(root / "training" / "normal" / f"{name}.tif", _slide(i, False), 0.25)
    for i, name in enumerate(["tumor_002", "tumor_001", "tumor_003", "tumor_004"]):
        _write_slide(root / "training" / "tumor" / f"{name}.tif", _slide(10 + i, True), 0.25)
    ref = [("test_001", "Tumor", "Macro"), ("test_002", "Normal", ""), ("test_003", "Tumor", "Micro"),
           ("test_049", "Tumor", "Macro")]  # test_049: the challenge's duplicate, deleted from disk
    for i, (name, lab, _) in enumerate(ref[:3]):
        _write_slide(root / "testing" / "images" / f"{name}.tif", _slide(20 + i, lab == "Tumor"), 0.25)
    (root / "testing" / "reference.csv").write_text("".join(f"{a},{b},{c}\n" for a, b, c in ref))
    return root


@pytest.fixture(scope="module")
def c16(tmp_path_factory) -> Path:
    pytest.importorskip("tiffslide")
    return make_camelyon16(tmp_path_factory.mktemp("c16"))


def _create(root: Path, split: str, **kw):
    return create_dataset("camelyon16", root=root, split=split, mpp=1.0, tile_size=32, thumbnail_size=128, **kw)


def test_splits_and_labels(c16):
    from medimg_bench.datasets.pathology.camelyon16 import camelyon16_slides

    test = camelyon16_slides(c16, "test")
    assert list(test["slide_id"]) == ["test_001", "test_002", "test_003"]
    assert list(test["label"]) == [1, 0, 1]
    assert set(camelyon16_slides(c16, "val")["slide_id"]) == {"normal_010", "tumor_001"}
    train = camelyon16_slides(c16, "train")
    assert len(train) == 6 and not set(train["slide_id"]) & {"normal_010", "tumor_001"}
    assert len(camelyon16_slides(c16, "training")) == 8
    assert len(camelyon16_slides(c16, "train", val_slides=None)) == 8
    assert (train["patient_id"] == train["slide_id"]).all()


def test_tiles_carry_slide_labels(c16):
    ds = _create(c16, "test")
    assert ds.name == "camelyon16" and ds.classes == ["normal", "tumor"]
    m = ds.manifest
    assert set(m["slide_id"]) == {"test_001", "test_002", "test_003"}
    # the 256-px tissue block at 1 µm/px is 64 px: four 32-px tiles
    assert (m.groupby("slide_id").size() == 4).all()
    assert dict(ds.slide_labels()) == {"test_001": 1, "test_002": 0, "test_003": 1}
    s = ds[0]
    assert s["image"].shape == (3, 32, 32) and s["label"] == 1 and s["meta"]["slide_id"] == "test_001"
    capped = _create(c16, "test", max_tiles_per_slide=2)
    assert (capped.manifest.groupby("slide_id").size() == 2).all()


def test_datasets_check_understands_it(c16):
    from medimg_bench.datasets.check import check_from_config

    report = check_from_config({"name": "camelyon16", "root": str(c16), "split": "test", "train_split": "train",
                                "options": {"mpp": 1.0, "tile_size": 32, "thumbnail_size": 128}})
    assert report.ok, report.format()


def test_bad_layouts_name_the_file(tmp_path, c16):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(c16, bad)
    (bad / "testing" / "reference.csv").write_text("test_001,Tumor\ntest_002,Maybe\ntest_003,Normal\n")
    with pytest.raises(ValueError, match=r"reference.csv' line 2 \(slide 'test_002'\): label 'maybe'"):
        _create(bad, "test")
    (bad / "testing" / "reference.csv").write_text("test_001,Tumor\ntest_002,Normal\n")
    with pytest.raises(ValueError, match=r"test_003.tif' has no row in testing/reference.csv"):
        _create(bad, "test")
    (bad / "testing" / "reference.csv").unlink()
    with pytest.raises(FileNotFoundError, match="reference.csv"):
        _create(bad, "test")
    (bad / "training" / "tumor" / "weird.tif").write_bytes(b"")
    with pytest.raises(ValueError, match="weird.tif' in training/tumor is not named tumor_NNN.tif"):
        _create(bad, "train")
    (bad / "training" / "tumor" / "weird.tif").unlink()
    (bad / "training" / "tumor" / "tumor_002.tif").write_bytes(b"not a tiff")
    with pytest.raises(ValueError, match="tumor_002.tif"):
        _create(bad, "train")
    with pytest.raises(ValueError, match="split='validation'"):
        _create(c16, "validation")
    pd.DataFrame()  # keep the import used by helpers importing this module
