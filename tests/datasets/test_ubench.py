"""U-Bench's 2D datasets (``datasets/seg2d/ubench.py``): each of U-Bench's prepared layouts
(FengheTan9/U-Bench @eafbb9fb, ``dataloader/dataset.py``, ``dataset_XRay.py``, ``download.py``)
rebuilt in a temporary folder with its own names and file formats, its mask rule, the resize to
U-Bench's grid against OpenCV's, and ``datasets check`` on a broken copy. No U-Bench data is in
``../shared/data``, so nothing is read in place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from medimg_bench.datasets.check import run_check
from medimg_bench.datasets.seg2d.ubench import UBENCH_DATASETS, binarize
from medimg_bench.registry import create_dataset


def _disk(h: int = 20, w: int = 24, seed: int = 0) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(seed)
    cy, cx = rng.integers(6, h - 6), rng.integers(6, w - 6)
    return (yy - cy) ** 2 + (xx - cx) ** 2 < 20


def _image(path: Path, h: int = 20, w: int = 24, grey: bool = False, seed: int = 0) -> np.ndarray:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (h, w) if grey else (h, w, 3), dtype=np.uint8)
    Image.fromarray(a).save(path, quality=95)
    return a


def _mask(path: Path, m: np.ndarray, fg: int = 255) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.where(m, fg, 0).astype(np.uint8)).save(path)


def test_binarize_rules_are_the_loaders_thresholds():
    g = np.array([0, 1, 127, 128, 254, 255], dtype=np.uint8)
    assert binarize(g, "nonzero").tolist() == [0, 1, 1, 1, 1, 1]     # label / 255 > 0
    assert binarize(g, "gt127").tolist() == [0, 0, 0, 1, 1, 1]       # cv2.threshold 127 / >= 0.5
    assert binarize(g, "eq255").tolist() == [0, 0, 0, 0, 0, 1]       # (label / 255).astype(uint8)
    with pytest.raises(ValueError, match="mask_rule"):
        binarize(g, "otsu")


def test_readme_list_layout_busi(tmp_path):
    """README: ``images/<case>.png``, ``masks/0/<case>.png``, ``train.txt`` / ``val.txt``."""
    cases = ["benign (10)", "malignant (17)", "normal (3)"]
    for i, c in enumerate(cases):
        _image(tmp_path / "images" / f"{c}.png", grey=(i == 2), seed=i)
        # a mask value of 1 is foreground under U-Bench's label / 255 > 0
        _mask(tmp_path / "masks" / "0" / f"{c}.png", _disk(seed=i), fg=1 if i == 1 else 255)
    (tmp_path / "train.txt").write_text(f"{cases[0]}\n")
    (tmp_path / "val.txt").write_text(f"{cases[1]}\n{cases[2]}\n\n")
    val = create_dataset("ubench", root=tmp_path, name="busi")      # split=None -> U-Bench's val
    assert val.ids == cases[1:] and len(create_dataset("ubench", root=tmp_path, name="BUSI", split="train")) == 1
    s = val[0]
    assert s["image"].shape == (3, 20, 24) and s["image"].dtype == torch.float32
    assert s["mask"].dtype == torch.int64 and int(s["mask"].sum()) == int(_disk(seed=1).sum())
    grey = val[1]["image"]
    assert bool((grey[0] == grey[1]).all() and (grey[1] == grey[2]).all())   # grey repeated to 3
    # the 0/1 mask under gt127 would be empty: refused, naming the file and its values
    with pytest.raises(ValueError, match=r"malignant \(17\)\.png.*values 0, 1.*empty"):
        create_dataset("ubench", root=tmp_path, name="busi", mask_rule="gt127")[0]
    assert val.check() == []


def test_renamed_mask_layouts(tmp_path):
    """BUSBRA (``Images/bus_*`` -> ``Masks/mask_*``), Glas (``_anno.bmp``), Montgomery, NIH."""
    specs = {
        "BUSBRA": ("bus_0001-l.png", "Images/bus_0001-l.png", "Masks/mask_0001-l.png"),
        "Glas": ("testA_1.bmp", "glas_dataset/testA_1.bmp", "glas_dataset/testA_1_anno.bmp"),
        "Montgomery": ("MCUCXR_0001_0.png", "CXR_png/MCUCXR_0001_0.png", "Mask/MCUCXR_0001_0.png"),
        "NIH": ("00000001_000.png", "images/00000001_000.png", "masks/00000001_000_mask.png"),
    }
    for name, (case, image, mask) in specs.items():
        root = tmp_path / name
        _image(root / image, grey=name in ("Montgomery", "NIH"))
        _mask(root / mask, _disk(seed=3))
        (root / "train.txt").write_text(case + "\n")
        (root / "val.txt").write_text(case + "\n")
        ds = create_dataset("ubench", root=root, name=name)
        assert ds.ids == [case] and int(ds[0]["mask"].sum()) == int(_disk(seed=3).sum()), name
        assert ds.check() == [], name


def test_split_folders_pair_in_sorted_order(tmp_path):
    # CHASEDB1: Image_01L.jpg <-> Image_01L_1stHO.png (different stems, sorted order pairs them)
    for split in ("train", "val", "test"):
        for k in ("01L", "01R"):
            _image(tmp_path / "c" / split / "images" / f"Image_{k}.jpg")
            _mask(tmp_path / "c" / split / "labels" / f"Image_{k}_1stHO.png", _disk(seed=len(k)))
    ds = create_dataset("ubench", root=tmp_path / "c", name="CHASEDB1")
    assert ds.ids == ["Image_01L", "Image_01R"]
    assert Path(ds.manifest["mask"][1]).name == "Image_01R_1stHO.png"
    # DRIVE: tif images, gif manuals; U-Bench's val is test_data
    for sub in ("train_data", "test_data"):
        _image(tmp_path / "d" / sub / "images" / "01_test.tif")
        _mask(tmp_path / "d" / sub / "1st_manual" / "01_manual1.gif", _disk())
    drive = create_dataset("ubench", root=tmp_path / "d", name="DRIVE")
    assert drive.ids == ["01_test"] and int(drive[0]["mask"].sum()) == int(_disk().sum())
    # a count mismatch is an error (U-Bench asserts it too)
    (tmp_path / "c" / "val" / "labels" / "Image_01R_1stHO.png").unlink()
    with pytest.raises(ValueError, match="sorted order"):
        create_dataset("ubench", root=tmp_path / "c", name="CHASEDB1")


def test_kvasir_jpeg_masks_threshold_127_and_pair_by_name(tmp_path):
    for split in ("train", "validation", "test"):
        for i, stem in enumerate(("cju0qkwl35piu0993l0dewei2", "cju0qoxqj9q6s0835b43399p4")):
            _image(tmp_path / split / "images" / f"{stem}.jpg", seed=i)
            rgb = np.stack([np.where(_disk(seed=i), 250, 4)] * 3, -1).astype(np.uint8)
            (tmp_path / split / "masks").mkdir(parents=True, exist_ok=True)
            Image.fromarray(rgb).save(tmp_path / split / "masks" / f"{stem}.jpg", quality=75)
    ds = create_dataset("ubench", root=tmp_path, name="Kvasir-SEG")
    assert len(ds) == 2 and ds.manifest["image"][0].endswith("validation/images/cju0qkwl35piu0993l0dewei2.jpg")
    m = ds[0]["mask"].numpy()
    assert (m == _disk(seed=0)).mean() > 0.97        # JPEG noise around the edge only
    assert len(create_dataset("ubench", root=tmp_path, name="kvasir-seg", split="test")) == 2


def test_frame_csv_and_dsb2018(tmp_path):
    root = tmp_path / "PH2"
    _image(root / "images" / "IMD002.bmp")
    _mask(root / "masks" / "IMD002_lesion.bmp", _disk())
    (root / "test_frame.csv").write_text("image_path,mask_path\nIMD002.bmp,IMD002_lesion.bmp\n")
    ph2 = create_dataset("ubench", root=root, name="PH2")          # U-Bench's PH2 is scored on test
    assert ph2.ids == ["IMD002"] and int(ph2[0]["mask"].sum()) == int(_disk().sum())
    (root / "train_frame.csv").write_text("image,mask\nIMD002.bmp,IMD002_lesion.bmp\n")
    with pytest.raises(ValueError, match="image_path"):
        create_dataset("ubench", root=root, name="PH2", split="train")
    dsb = tmp_path / "DSB2018"
    iid = "00071198d059ba7f5914a526d124d28e6d010c92466da21d4a04cd5413362552"
    _image(dsb / "stage1_train" / iid / "images" / f"{iid}.png")
    a, b = _disk(seed=1), _disk(seed=2)
    _mask(dsb / "stage1_train" / iid / "masks" / "n1.png", a)
    _mask(dsb / "stage1_train" / iid / "masks" / "n2.png", b)
    # one row per nucleus: the image appears several times, once as a sample
    (dsb / "val_imageid_frame.csv").write_text(f"ImageId,EncodedPixels\n{iid},1 1\n{iid},5 1\n")
    ds = create_dataset("ubench", root=dsb, name="DSB2018")
    assert ds.ids == [iid] and np.array_equal(ds[0]["mask"].numpy(), (a | b).astype(np.int64))


def test_medsegbench_npz(tmp_path):
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (3, 16, 16), dtype=np.uint8)          # grey, as many MSB flags
    labels = np.stack([_disk(16, 16, s) for s in range(3)]).astype(np.uint8)   # 0/1
    np.savez(tmp_path / "cellnuclei_256.npz", val_images=imgs, val_label=labels,
             train_images=imgs[:2], train_label=labels[:2])
    ds = create_dataset("ubench", root=tmp_path, name="cellnuclei")
    assert ds.ids == ["val_00000", "val_00001", "val_00002"]
    s = ds[2]
    assert s["image"].shape == (3, 16, 16) and np.allclose(s["image"][1].numpy(), imgs[2] / 255.0)
    assert np.array_equal(s["mask"].numpy(), labels[2].astype(np.int64))
    assert len(create_dataset("ubench", root=tmp_path, name="cellnuclei", split="train")) == 2
    with pytest.raises(ValueError, match="test_images"):
        create_dataset("ubench", root=tmp_path, name="cellnuclei", split="test")
    # a MedSegBench copy of a dataset U-Bench otherwise reads from folders: layout= picks it
    np.savez(tmp_path / "chasedb1_256.npz", val_images=imgs, val_label=labels)
    assert len(create_dataset("ubench", root=tmp_path, name="chasedb1", layout="medsegbench")) == 3


def test_resize_matches_opencv(tmp_path):
    cv2 = pytest.importorskip("cv2")
    img = _image(tmp_path / "images" / "a.png", h=37, w=53, seed=5)
    m = _disk(37, 53, seed=5)
    _mask(tmp_path / "masks" / "0" / "a.png", m)
    (tmp_path / "val.txt").write_text("a\n")
    s = create_dataset("ubench", root=tmp_path, name="busi", size=32)[0]
    want_mask = cv2.resize(np.where(m, 255, 0).astype(np.uint8), (32, 32), interpolation=cv2.INTER_NEAREST) > 0
    assert np.array_equal(s["mask"].numpy(), want_mask.astype(np.int64))
    want = cv2.resize(img, (32, 32), interpolation=cv2.INTER_LINEAR).astype(np.float32) / 255
    got = np.moveaxis(s["image"].numpy(), 0, -1)
    assert np.abs(got - want).max() <= 1 / 255 + 1e-6   # OpenCV rounds to 8 bit, we keep floats
    up = create_dataset("ubench", root=tmp_path, name="busi", size=64)[0]
    want_up = cv2.resize(img, (64, 64), interpolation=cv2.INTER_LINEAR).astype(np.float32) / 255
    assert np.abs(np.moveaxis(up["image"].numpy(), 0, -1) - want_up).max() <= 1 / 255 + 1e-6


def test_bad_input_names_the_file_and_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown U-Bench dataset 'isic2017'"):
        create_dataset("ubench", root=tmp_path, name="isic2017")
    with pytest.raises(FileNotFoundError, match="val list"):
        create_dataset("ubench", root=tmp_path, name="busi")
    with pytest.raises(ValueError, match="layout must be one of"):
        create_dataset("ubench", root=tmp_path, layout="nnunet")
    (tmp_path / "val.txt").write_text("gone\n")
    ds = create_dataset("ubench", root=tmp_path, name="busi")
    assert {p["id"] for p in ds.check()} == {"gone"}


def test_datasets_check_on_the_config(tmp_path):
    _image(tmp_path / "images" / "a.png")
    _mask(tmp_path / "masks" / "0" / "a.png", _disk())
    _image(tmp_path / "images" / "b.png", h=10)
    _mask(tmp_path / "masks" / "0" / "b.png", _disk())          # 20 x 24 mask of a 10 x 24 image
    _image(tmp_path / "images" / "c.png")
    _mask(tmp_path / "masks" / "0" / "c.png", _disk())
    (tmp_path / "train.txt").write_text("c\n")
    (tmp_path / "val.txt").write_text("a\nb\n")
    cfg = {"name": "ubench", "root": str(tmp_path), "split": "val", "train_split": "train",
           "options": {"name": "isic18"}}
    out: list[str] = []
    assert run_check(cfg, echo=out.append) == 1
    assert "size mismatch" in "\n".join(out) and "b" in "\n".join(out)
    (tmp_path / "images" / "b.png").unlink()
    _image(tmp_path / "images" / "b.png")
    assert run_check(cfg, echo=out.append) == 0, out[-1]
    (tmp_path / "train.txt").write_text("a\n")                      # the same case in both lists
    assert run_check(cfg, echo=out.append) == 1 and "leakage train <-> val: FOUND" in out[-1]


def test_every_named_dataset_has_a_known_layout_and_rule():
    layouts = {"list", "busbra", "glas", "montgomery", "nih", "chasedb1", "drive", "kvasir",
               "frame_csv", "dsb2018", "medsegbench", "synapse", "acdc"}
    assert {v[0] for v in UBENCH_DATASETS.values()} == layouts
    binary = {k: v for k, v in UBENCH_DATASETS.items() if v[0] not in ("synapse", "acdc")}
    assert all(v[1] in ("nonzero", "gt127", "eq255") and v[2] in ("val", "test") for v in binary.values())


def test_synapse_volumes_and_slices(tmp_path):
    h5py = pytest.importorskip("h5py")
    (tmp_path / "lists" / "lists_Synapse").mkdir(parents=True)
    (tmp_path / "lists" / "lists_Synapse" / "test_vol.txt").write_text("case0001\ncase0002\n")
    (tmp_path / "lists" / "lists_Synapse" / "train.txt").write_text("case0005_slice000\n")
    (tmp_path / "test_vol_h5_new").mkdir()
    btcv = np.arange(14).repeat(2).reshape(2, 2, 7)                   # every BTCV label 0..13
    for case in ("case0001", "case0002"):
        with h5py.File(tmp_path / "test_vol_h5_new" / f"{case}.npy.h5", "w") as f:
            f["image"] = np.linspace(0, 1, btcv.size, dtype=np.float32).reshape(btcv.shape)
            f["label"] = btcv.astype(np.float32)
    (tmp_path / "train_npz_new").mkdir()
    np.savez(tmp_path / "train_npz_new" / "case0005_slice000.npz", image=np.zeros((4, 5), np.float32),
             label=np.full((4, 5), 11.0, np.float32))
    ds = create_dataset("ubench", root=tmp_path, name="Synapse")      # U-Bench scores test_vol
    assert ds.ids == ["case0001", "case0002"] and ds.classes[5] == "pancreas" and len(ds.classes) == 9
    s = ds[0]
    assert s["image"].shape == (1, 2, 2, 7) and s["mask"].shape == (2, 2, 7)
    got = dict(zip(btcv.ravel().tolist(), s["mask"].numpy().ravel().tolist()))
    # Synapse_dataset(nclass=9): 5, 9, 10, 12, 13 -> 0; 11 -> 5; the others kept
    assert got == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 0, 6: 6, 7: 7, 8: 8, 9: 0, 10: 0, 11: 5, 12: 0, 13: 0}
    train = create_dataset("ubench", root=tmp_path, name="synapse", split="train")
    assert train.ids == ["case0005_slice000"] and int(train[0]["mask"].max()) == 5
    with pytest.raises(ValueError, match="size / mask_rule"):
        create_dataset("ubench", root=tmp_path, name="synapse", size=224)


def test_acdc_volumes(tmp_path):
    (tmp_path / "lists_ACDC").mkdir()
    (tmp_path / "lists_ACDC" / "test.txt").write_text("case_002_volume_ED.npz\n")
    (tmp_path / "test").mkdir()
    lab = np.array([[[0, 1], [2, 3]]] * 3, dtype=np.uint8)
    np.savez(tmp_path / "test" / "case_002_volume_ED.npz", img=np.ones((3, 2, 2), np.float32), label=lab)
    ds = create_dataset("ubench", root=tmp_path, name="ACDC")
    assert ds.ids == ["case_002_volume_ED"] and ds.classes[1:] == ["right_ventricle", "myocardium", "left_ventricle"]
    assert np.array_equal(ds[0]["mask"].numpy(), lab.astype(np.int64))
    np.savez(tmp_path / "test" / "case_002_volume_ED.npz", img=np.ones((3, 2, 2), np.float32), label=lab + 3)
    with pytest.raises(Exception, match="outside ACDC's 0..3"):
        ds[0]
