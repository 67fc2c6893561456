"""2D image/mask folder datasets (``datasets/seg2d``): every published layout rebuilt in a temporary
folder with its own file formats (JPEG images, 0/255 PNG, 1-bit PNG, palette PNG, JPEG masks,
16-bit PNG, BUSI's several masks per image), and COVID-SemiSeg read in place when present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medimg_bench.datasets.masks import decode_mask
from medimg_bench.registry import create_dataset
from medimg_bench.sample import SampleError

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "infnet_covid_semiseg"


def _shape(h: int = 20, w: int = 24, seed: int = 0) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(seed)
    cy, cx = rng.integers(5, h - 5), rng.integers(5, w - 5)
    return (yy - cy) ** 2 + (xx - cx) ** 2 < 20


def _img(path: Path, h: int = 20, w: int = 24, rgb: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    a = (np.arange(h * w).reshape(h, w) % 251).astype(np.uint8)
    Image.fromarray(np.stack([a] * 3, -1) if rgb else a).save(path, quality=95)


def _mask255(path: Path, m: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.where(m, 255, 0).astype(np.uint8)).save(path)


def test_mask_formats(tmp_path):
    m = _shape()
    Image.fromarray(m).convert("1").save(tmp_path / "bit.png")
    _mask255(tmp_path / "l.png", m)
    Image.fromarray(m.astype(np.uint8)).save(tmp_path / "01.png")
    Image.fromarray(np.where(m, 65535, 0).astype(np.uint16)).save(tmp_path / "16.png")
    pal = Image.fromarray(np.where(m, 2, 0).astype(np.uint8), mode=None).convert("P")
    pal.save(tmp_path / "pal.png")
    rgb = np.stack([np.where(m, 250, 3)] * 3, -1).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "rgb.jpg", quality=75)
    for name in ("bit.png", "l.png", "01.png", "16.png", "rgb.jpg"):
        for encoding in ("auto", "binary"):
            got = decode_mask(tmp_path / name, encoding=encoding, num_classes=2)
            assert got.dtype == np.int64 and got.shape == m.shape, name
            assert (got == m).mean() > (0.97 if name.endswith(".jpg") else 1 - 1e-9), name
    assert set(np.unique(decode_mask(tmp_path / "pal.png", num_classes=3))) <= {0, 2}
    # 0/1 masks are no longer emptied by the toolbox's > 128: a declared 255 refuses them, naming the file
    assert decode_mask(tmp_path / "01.png", encoding="binary").sum() == m.sum()
    with pytest.raises(ValueError, match=r"01\.png.*values 0, 1.*empty"):
        decode_mask(tmp_path / "01.png", encoding="binary", foreground=255)
    with pytest.raises(ValueError, match="encoding"):
        decode_mask(tmp_path / "l.png", encoding="bits")


def _covid(root: Path, n: int = 3) -> Path:
    base = root / "Dataset" / "TestingSet"
    for i in range(n):
        stem = str(60 + i)
        m1, m2 = _shape(seed=i), _shape(seed=i + 7) & ~_shape(seed=i)
        if i == 1:
            m2[:] = False  # an empty consolidation mask, as 10 of the real 48
        for sub in ("LungInfection-Test", "MultiClassInfection-Test"):
            _img(base / sub / "Imgs" / f"{stem}.jpg")
        _mask255(base / "LungInfection-Test" / "GT" / f"{stem}.png", m1 | m2)
        labels = np.where(m2, 2, np.where(m1, 1, 0)).astype(np.uint8)
        p = Image.fromarray(labels, mode=None).convert("P")
        p.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * (253 * 3))
        (base / "MultiClassInfection-Test" / "GT").mkdir(parents=True, exist_ok=True)
        p.save(base / "MultiClassInfection-Test" / "GT" / f"{stem}.png")
        for k, m in ((1, m1 & ~m2), (2, m2)):
            d = base / "MultiClassInfection-Test" / f"GT-{k}"
            d.mkdir(parents=True, exist_ok=True)
            Image.fromarray(m).convert("1").save(d / f"{stem}.png")
    return root


def test_covid_semiseg_layout(tmp_path):
    root = _covid(tmp_path)
    ds = create_dataset("covid_semiseg", root=root, split="test")
    assert len(ds) == 3 and ds.classes == ["background", "infection"]
    s = ds[0]
    assert s["id"] == "60" and s["image"].shape == (1, 20, 24) and set(s["mask"].unique().tolist()) == {0, 1}
    multi = create_dataset("covid_semiseg", root=root / "Dataset", split="test", subset="multiclass")
    assert multi.classes == ["background", "ggo", "consolidation"]
    assert set(multi[0]["mask"].unique().tolist()) <= {0, 1, 2}
    cons = create_dataset("covid_semiseg", root=root, split="test", subset="multiclass", class_name="consolidation")
    assert int(cons[1]["mask"].sum()) == 0 and int(cons[0]["mask"].sum()) > 0
    # the 1-bit GT-2 equals the palette mask's label 2
    assert (cons[0]["mask"] == (multi[0]["mask"] == 2)).all()
    with pytest.raises(ValueError, match="class_name"):
        create_dataset("covid_semiseg", root=root, subset="multiclass", class_name="lung")


def test_check_reports_unpaired_and_size_mismatch(tmp_path):
    root = _covid(tmp_path)
    gt = root / "Dataset/TestingSet/LungInfection-Test/GT"
    _img(root / "Dataset/TestingSet/LungInfection-Test/Imgs/99.jpg")  # image without a mask
    _mask255(gt / "98.png", _shape())  # mask without an image
    _mask255(gt / "61.png", np.zeros((10, 24), dtype=bool))  # wrong size
    ds = create_dataset("covid_semiseg", root=root)
    problems = {(p["id"], p["problem"].split(":")[0]) for p in ds.check()}
    assert ("98", "mask without an image") in problems and ("61", "size mismatch") in problems
    # the image without its mask is a sample that fails, not one that vanishes
    assert "99" in ds.ids and ("99", "image '99.jpg' has no mask '99.*' in the mask folder ('" + str(gt) + "')") in {
        (p["id"], p["problem"]) for p in ds.check()}
    with pytest.raises(SampleError, match=r"sample '99'.*99\.jpg.*no mask '99\.\*'") as info:
        ds[ds.ids.index("99")]
    assert info.value.stage == "target"
    with pytest.raises(Exception, match="61.*20x24|20x24.*10x24"):
        ds[1]


def test_pranet_kvasir_isic_busi_layouts(tmp_path):
    for name in ("a", "b"):
        _img(tmp_path / "TestDataset" / "CVC-300" / "images" / f"{name}.png", rgb=True)
        _mask255(tmp_path / "TestDataset" / "CVC-300" / "masks" / f"{name}.png", _shape())
    ds = create_dataset("pranet_polyp", root=tmp_path, subset="CVC-300")
    assert len(ds) == 2 and ds[0]["image"].shape == (3, 20, 24)
    kv = tmp_path / "Kvasir-SEG"
    _img(kv / "images" / "cju0.jpg", rgb=True)
    m = np.stack([np.where(_shape(), 255, 0)] * 3, -1).astype(np.uint8)
    (kv / "masks").mkdir(parents=True)
    Image.fromarray(m).save(kv / "masks" / "cju0.jpg", quality=80)
    ks = create_dataset("kvasir_seg", root=tmp_path)
    assert (ks[0]["mask"].numpy() == _shape()).mean() > 0.97
    _img(tmp_path / "ISIC2018_Task1-2_Training_Input" / "ISIC_0000000.jpg", rgb=True)
    _mask255(tmp_path / "ISIC2018_Task1_Training_GroundTruth" / "ISIC_0000000_segmentation.png", _shape())
    isic = create_dataset("isic2018_task1", root=tmp_path, split="train")
    assert isic.ids == ["ISIC_0000000"] and int(isic[0]["mask"].sum()) == int(_shape().sum())
    b = tmp_path / "Dataset_BUSI_with_GT"
    _img(b / "benign" / "benign (1).png")
    _mask255(b / "benign" / "benign (1)_mask.png", _shape(seed=1))
    _mask255(b / "benign" / "benign (1)_mask_1.png", _shape(seed=2))
    _img(b / "normal" / "normal (1).png")
    _mask255(b / "normal" / "normal (1)_mask.png", np.zeros((20, 24), dtype=bool))
    busi = create_dataset("busi", root=tmp_path)
    assert sorted(busi.ids) == ["benign (1)", "normal (1)"]
    s = busi[busi.ids.index("benign (1)")]
    assert (s["mask"].numpy() == (_shape(seed=1) | _shape(seed=2))).all()  # several masks merged
    assert set(busi.manifest["group"]) == {"benign", "normal"}


def test_generic_folder_16bit_and_labels(tmp_path):
    (tmp_path / "images").mkdir()
    Image.fromarray((np.arange(480).reshape(20, 24) * 100).astype(np.uint16)).save(tmp_path / "images" / "x.png")
    Image.fromarray(np.where(_shape(), 2, 0).astype(np.uint8)).save(tmp_path / "x_lab.png")
    (tmp_path / "masks").mkdir()
    (tmp_path / "x_lab.png").rename(tmp_path / "masks" / "x_lab.png")
    ds = create_dataset("seg2d_folder", root=tmp_path, mask_suffix="_lab", classes=["bg", "a", "b"])
    s = ds[0]
    assert float(s["image"].max()) == pytest.approx(479 * 100 / 65535, rel=1e-6)
    assert set(s["mask"].unique().tolist()) == {0, 2}


@pytest.mark.skipif(not REAL.exists(), reason=f"real data {REAL} is absent (a fresh clone has no ../shared)")
def test_covid_semiseg_real_folder():
    ds = create_dataset("covid_semiseg", root=REAL)
    assert len(ds) == 48 and ds.check() == []
    cons = create_dataset("covid_semiseg", root=REAL, subset="multiclass", class_name="consolidation")
    empty = sorted(int(s) for s in cons.ids if int(cons[cons.ids.index(s)]["mask"].sum()) == 0)
    assert empty == [62, 64, 78, 81, 83, 89, 91, 93, 96, 98]  # PROVENANCE.md
    train = create_dataset("covid_semiseg", root=REAL, split="train")
    assert len(train) == 50 and not set(train.ids) & set(ds.ids)
