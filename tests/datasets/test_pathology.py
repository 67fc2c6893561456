"""Pathology loaders on tiny copies of the official layouts written by the tests."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.datasets.pathology import otsu_threshold, select_level, tissue_mask
from medimg_bench.sample import SampleError, validate_sample

PIL = pytest.importorskip("PIL.Image")


# -- PatchCamelyon ---------------------------------------------------------------------------------


@pytest.fixture()
def pcam_root(tmp_path: Path) -> Path:
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(0)
    for split, n in (("train", 3), ("valid", 2), ("test", 4)):
        x = rng.integers(0, 256, (n, 96, 96, 3), dtype=np.uint8)
        y = (np.arange(n) % 2).astype(np.uint8).reshape(n, 1, 1, 1)
        stem = f"camelyonpatch_level_2_split_{split}"
        with h5py.File(tmp_path / f"{stem}_x.h5", "w") as f:
            f.create_dataset("x", data=x, chunks=(1, 96, 96, 3))
        with h5py.File(tmp_path / f"{stem}_y.h5", "w") as f:
            f.create_dataset("y", data=y)
        if split == "test":
            pd.DataFrame(
                {
                    "coord_y": np.arange(n) * 96,
                    "coord_x": np.arange(n),
                    "tumor_patch": y.ravel() > 0,
                    "center_tumor_patch": y.ravel() > 0,
                    "wsi": [
                        "camelyon16_test_001",
                        "camelyon16_test_001",
                        "camelyon16_test_002",
                        "camelyon16_test_002",
                    ],
                }
            ).to_csv(tmp_path / f"{stem}_meta.csv", index=False)
    return tmp_path


def test_pcam(pcam_root: Path) -> None:
    import h5py

    ds = create("pcam", pcam_root, split="test")
    assert len(ds) == 4 and ds.classes == ["normal", "tumor"]
    s = ds[3]
    validate_sample(s, task="classification")
    with h5py.File(pcam_root / "camelyonpatch_level_2_split_test_x.h5") as f:
        ref = torch.from_numpy(f["x"][3] / 255.0).permute(2, 0, 1).float()
    assert s["image"].shape == (3, 96, 96) and torch.allclose(s["image"], ref)
    assert (
        s["label"] == 1
        and s["meta"]["patient_id"] == "camelyon16_test_002"
        and s["meta"]["coord_x"] == 3
    )
    assert ds.ids[0] == "test_000000"
    v = create("pcam", pcam_root, split="val")
    assert [v[i]["label"] for i in range(2)] == [0, 1]
    clone = pickle.loads(pickle.dumps(v))  # h5 handle reopened after pickling (DataLoader workers)
    assert torch.equal(clone[1]["image"], v[1]["image"])


def test_pcam_errors(pcam_root: Path) -> None:
    import h5py

    (pcam_root / "camelyonpatch_level_2_split_train_y.h5").unlink()
    with pytest.raises(FileNotFoundError, match="camelyonpatch_level_2_split_train_y.h5"):
        create("pcam", pcam_root, split="train")
    with h5py.File(pcam_root / "camelyonpatch_level_2_split_valid_y.h5", "w") as f:
        f.create_dataset("y", data=np.array([0, 3], np.uint8).reshape(2, 1, 1, 1))
    with pytest.raises(ValueError, match="label 3 at index 1"):
        create("pcam", pcam_root, split="valid")


# -- image folders ---------------------------------------------------------------------------------


def _tile(seed: int, size: int = 16) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)


def test_image_folder_nct_crc(tmp_path: Path) -> None:
    for split_dir, classes in (
        ("NCT-CRC-HE-100K", ["ADI", "TUM"]),
        ("CRC-VAL-HE-7K", ["ADI", "BACK", "TUM"]),
    ):
        for k, c in enumerate(classes):
            for j in range(2):
                p = tmp_path / split_dir / c / f"{c}-TCGA-AA{k}{j}.tif"
                p.parent.mkdir(parents=True, exist_ok=True)
                PIL.fromarray(_tile(10 * k + j)).save(p)
    dirs = {"train": "NCT-CRC-HE-100K", "test": "CRC-VAL-HE-7K"}
    test = create("image_folder", tmp_path, split="test", split_dirs=dirs)
    assert test.classes == ["ADI", "BACK", "TUM"] and len(test) == 6
    s = test[3]
    validate_sample(s, task="classification")
    assert (
        s["id"] == "BACK/BACK-TCGA-AA11" and s["label"] == 1 and s["meta"]["class_name"] == "BACK"
    )
    assert torch.allclose(s["image"], torch.from_numpy(_tile(11) / 255.0).permute(2, 0, 1).float())
    # the training folder lacks BACK: pass the class list so indices agree across splits
    train = create("image_folder", tmp_path, split="train", split_dirs=dirs, classes=test.classes)
    assert sorted(set(train.manifest["label"])) == [0, 2]
    with pytest.raises(ValueError, match=r"folder\(s\) \['BACK'\].*not in classes"):
        create("image_folder", tmp_path, split="test", split_dirs=dirs, classes=["ADI", "TUM"])
    (tmp_path / "CRC-VAL-HE-7K" / "TUM" / "TUM-TCGA-AA20.tif").write_bytes(b"garbage")
    with pytest.raises(SampleError, match=r"TUM/TUM-TCGA-AA20.*TUM-TCGA-AA20\.tif"):
        test[4]


def test_image_folder_bach_default_dir(tmp_path: Path) -> None:
    photos = tmp_path / "ICIAR2018_BACH_Challenge" / "Photos"
    for c in ("Benign", "InSitu", "Invasive", "Normal"):
        (photos / c).mkdir(parents=True)
        PIL.fromarray(_tile(len(c), 12)).save(photos / c / f"{c[:2].lower()}001.tif")
    ds = create("image_folder", photos)
    assert ds.classes == ["Benign", "InSitu", "Invasive", "Normal"]
    assert [ds[i]["label"] for i in range(4)] == [0, 1, 2, 3] and ds[0]["image"].shape == (
        3,
        12,
        12,
    )


# -- MHIST -----------------------------------------------------------------------------------------


def test_mhist(tmp_path: Path) -> None:
    ann = pd.DataFrame(
        {
            "Image Name": ["MHIST_aaa.png", "MHIST_aab.png", "MHIST_aac.png"],
            "Majority Vote Label": ["SSA", "HP", "HP"],
            "Number of Annotators who Selected SSA": [6, 0, 2],
            "Partition": ["train", "train", "test"],
        }
    )
    ann.to_csv(tmp_path / "annotations.csv", index=False)
    for i, n in enumerate(ann["Image Name"]):
        (tmp_path / "images").mkdir(exist_ok=True)
        PIL.fromarray(_tile(i, 8)).save(tmp_path / "images" / n)
    train = create("mhist", tmp_path, split="train")
    assert train.ids == ["MHIST_aaa", "MHIST_aab"] and train.classes == ["HP", "SSA"]
    s = train[0]
    validate_sample(s, task="classification")
    assert s["label"] == 1 and s["meta"]["n_ssa_votes"] == 6 and s["meta"]["split"] == "train"
    assert create("mhist", tmp_path, split="test").ids == ["MHIST_aac"]
    ann.loc[2, "Majority Vote Label"] = "TA"
    ann.to_csv(tmp_path / "annotations.csv", index=False)
    with pytest.raises(ValueError, match=r"line 4 \(image 'MHIST_aac.png'\): label 'TA'"):
        create("mhist", tmp_path, split="test")
    ann.loc[2, "Majority Vote Label"] = "HP"
    ann.to_csv(tmp_path / "annotations.csv", index=False)
    (tmp_path / "images" / "MHIST_aab.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"line 3: image .*MHIST_aab.png"):
        create("mhist", tmp_path, split="train")


# -- whole-slide tiles -----------------------------------------------------------------------------


def test_otsu_and_level_selection() -> None:
    values = np.concatenate([np.full(100, 0.1), np.full(50, 0.8)])
    t = otsu_threshold(values)
    assert 0.1 < t <= 0.8
    skimage_filters = pytest.importorskip("skimage.filters")
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.normal(0.2, 0.05, 500), rng.normal(0.7, 0.05, 300)])
    # same histogram criterion as scikit-image; thresholds agree within one bin width
    assert (
        abs(otsu_threshold(v) - skimage_filters.threshold_otsu(v, nbins=256))
        <= (v.max() - v.min()) / 256 + 1e-9
    )
    assert select_level([1.0, 2.0, 4.0, 16.0], 4.0) == 2
    assert select_level([1.0, 2.0, 4.0], 3.0) == 1
    assert select_level([1.0, 4.0], 0.5) == 0


def _write_slide(path: Path, img: np.ndarray, mpp0: float) -> None:
    tifffile = pytest.importorskip("tifffile")
    opts = dict(tile=(64, 64), photometric="rgb", compression="zlib", resolutionunit="CENTIMETER")
    with tifffile.TiffWriter(path) as tw:
        tw.write(img, subifds=2, resolution=(1e4 / mpp0, 1e4 / mpp0), **opts)
        for k in (2, 4):
            tw.write(
                img[::k, ::k],
                subfiletype=1,
                resolution=(1e4 / (mpp0 * k), 1e4 / (mpp0 * k)),
                **opts,
            )


def test_wsi_tiles(tmp_path: Path) -> None:
    pytest.importorskip("tiffslide")
    rng = np.random.default_rng(0)
    # 512×768 slide at 0.25 µm/px: white glass, stained tissue block at rows 128-383, cols 256-511
    img = np.full((512, 768, 3), 235, np.uint8)
    img[128:384, 256:512] = rng.integers(0, 60, (256, 256, 3)) + np.array([150, 40, 120], np.uint8)
    (tmp_path / "slides").mkdir()
    _write_slide(tmp_path / "slides" / "tumor_001.tif", img, 0.25)
    _write_slide(tmp_path / "slides" / "normal_001.tif", img[:, ::-1].copy(), 0.25)
    pd.DataFrame(
        {
            "slide": ["tumor_001.tif", "normal_001"],
            "label": ["tumor", "normal"],
            "patient": ["P1", "P2"],
        }
    ).to_csv(tmp_path / "reference.csv", index=False)
    # 32-px tiles at 1.0 µm/px = 128 level-0 px; level 2 (downsample 4) is read as is
    ds = create(
        "wsi_tiles",
        tmp_path,
        labels_csv="reference.csv",
        patient_column="patient",
        mpp=1.0,
        tile_size=32,
        thumbnail_size=96,
    )
    assert ds.classes == ["normal", "tumor"]
    tumor = ds.filter(slide_id="slides/tumor_001")
    assert sorted(zip(tumor.manifest["x"], tumor.manifest["y"])) == [
        (256, 128),
        (256, 256),
        (384, 128),
        (384, 256),
    ]
    assert set(ds.manifest["level"]) == {2} and set(ds.manifest["read_size"]) == {32}
    row = tumor.manifest.iloc[0]
    s = tumor[0]
    validate_sample(s, task="classification")
    ref = img[row.y : row.y + 128 : 4, row.x : row.x + 128 : 4] / 255.0
    assert s["image"].shape == (3, 32, 32) and torch.allclose(
        s["image"], torch.from_numpy(ref).permute(2, 0, 1).float()
    )
    assert (
        s["label"] == 1
        and s["meta"]["patient_id"] == "P1"
        and s["meta"]["slide_id"] == "slides/tumor_001"
    )
    bags = ds.bags()
    assert (
        set(bags) == {"slides/tumor_001", "slides/normal_001"}
        and len(bags["slides/tumor_001"]) == 4
    )
    assert ds.slide_labels().to_dict() == {"slides/tumor_001": 1, "slides/normal_001": 0}

    def tumor_tiles(**options):
        shared = {"pattern": "tumor_*", "tile_size": 64, "thumbnail_size": 96}
        return create("wsi_tiles", tmp_path / "slides", **shared, **options)

    # 0.5 µm/px needs downsample 2: level 1 read, 64-px tiles → 16 tiles of tissue per slide
    fine = tumor_tiles(mpp=0.5)
    assert set(fine.manifest["level"]) == {1} and len(fine) == 4 and "label" not in fine[0]
    # mpp between levels: read finer level 1 (128 px region) and resize to 64
    mid = tumor_tiles(mpp=0.75)
    # 192-px level-0 grid: only tiles (192,192) and (384,192) are ≥ 50 % tissue (2/3 each)
    assert sorted(zip(mid.manifest["x"], mid.manifest["y"])) == [(192, 192), (384, 192)]
    assert set(mid.manifest["level"]) == {1} and set(mid.manifest["read_size"]) == {96}
    assert mid[0]["image"].shape == (3, 64, 64)
    capped = tumor_tiles(mpp=0.5, max_tiles_per_slide=2, seed=1)
    assert len(capped) == 2
    pd.DataFrame({"slide": ["missing_009"], "label": ["tumor"]}).to_csv(
        tmp_path / "bad.csv", index=False
    )
    with pytest.raises(FileNotFoundError, match=r"line 2: slide 'missing_009'"):
        create("wsi_tiles", tmp_path, labels_csv="bad.csv")


def test_tissue_mask_blank_slide() -> None:
    assert not tissue_mask(np.full((10, 10, 3), 240, np.uint8)).any()
    img = np.full((10, 10, 3), 240, np.uint8)
    img[2:5, 2:5] = (180, 60, 140)
    m = tissue_mask(img)
    assert m[2:5, 2:5].all() and m.sum() == 9
