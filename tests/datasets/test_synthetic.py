import numpy as np
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.datasets.synthetic import (
    CT_ORGANS,
    CXR_FINDINGS,
    make_ct_phantom,
    make_cxr_phantom,
)
from medimg_bench.sample import SampleError, validate_sample


def test_cxr_phantom_is_seeded_and_labels_match_mask():
    a, ma = make_cxr_phantom([1, 1, 1], size=64, seed=3)
    b, mb = make_cxr_phantom([1, 1, 1], size=64, seed=3)
    assert np.array_equal(a, b) and np.array_equal(ma, mb)
    assert set(np.unique(ma)) == {0, 1, 2, 3}
    _, m0 = make_cxr_phantom([0, 0, 0], size=64, seed=3)
    assert m0.max() == 0


def test_ct_phantom_hu_ranges_and_organs():
    vol, lab = make_ct_phantom(shape=(48, 48, 24), seed=1)
    assert vol.dtype == np.float32 and lab.dtype == np.uint8
    assert set(np.unique(lab)) == set(range(len(CT_ORGANS)))
    assert vol.min() < -900  # air
    assert 500 < vol[lab == 4].mean() < 900  # bone
    assert 30 < vol[lab == 1].mean() < 90  # liver
    assert abs(vol[lab == 2].mean() - 150) < 10  # contrast-enhanced kidney


def test_synthetic_cxr_dataset_roundtrip(synthetic_root):
    ds = create("synthetic_cxr", cache_dir=synthetic_root / "cxr", split="test", n=20, size=32)
    train = create("synthetic_cxr", cache_dir=synthetic_root / "cxr", split="train", n=20, size=32)
    assert len(ds) + len(train) == 20
    assert not set(ds.manifest["patient_id"]) & set(train.manifest["patient_id"])
    s = ds[0]
    validate_sample(s, task="classification")
    assert s["image"].shape == (1, 32, 32) and 0 <= s["image"].min() and s["image"].max() <= 1
    assert s["label"].shape == (len(CXR_FINDINGS),)
    assert ds.classes == list(CXR_FINDINGS)
    # labels in the manifest agree with the lesion mask written to disk
    for i in range(len(ds)):
        sample = ds[i]
        present = {int(v) - 1 for v in sample["mask"].unique() if v > 0}
        assert present <= {j for j in range(3) if sample["label"][j] == 1}


def test_synthetic_ct_dataset_spacing_and_mask(synthetic_root):
    ds = create("synthetic_ct", cache_dir=synthetic_root / "ct", split="all", n=3, shape=(32, 32, 16), spacing=(1.5, 1.5, 3.0))
    s = ds[0]
    validate_sample(s, task="segmentation")
    assert s["image"].shape == (1, 32, 32, 16)
    assert s["meta"]["spacing"] == pytest.approx((1.5, 1.5, 3.0))
    assert s["mask"].dtype == torch.int64 and s["mask"].max() <= 4
    raw = create("synthetic_ct", cache_dir=synthetic_root / "ct", split="all", n=3, shape=(32, 32, 16), window=None)[0]
    assert raw["image"].min() < -900  # HU kept


def test_builtin_real_files_match_their_libraries():
    import nibabel as nib
    import pydicom

    ds = create("builtin_real")
    by_id = {ds.sample_id(i): ds[i] for i in range(len(ds))}
    ct = by_id["CT_small.dcm"]
    ref = pydicom.dcmread(ct["meta"]["path"])
    hu = ref.pixel_array * float(ref.RescaleSlope) + float(ref.RescaleIntercept)
    assert np.allclose(ct["image"][0].numpy(), hu)
    assert ct["meta"]["spacing"] == pytest.approx([float(v) for v in ref.PixelSpacing])
    anat = by_id["anatomical.nii"]
    img = nib.load(anat["meta"]["path"])
    assert np.allclose(anat["image"][0].numpy(), np.asanyarray(img.dataobj))
    assert anat["meta"]["spacing"] == pytest.approx(img.header.get_zooms()[:3])


def test_bad_inputs_name_file_and_problem(synthetic_root):
    root = synthetic_root / "bad_ct"
    ds = create("synthetic_ct", cache_dir=root, split="all", n=3, shape=(16, 16, 8))
    # corrupt one image, delete another's mask
    (ds.root / ds.manifest["image"][0]).write_bytes(b"not a nifti at all")
    (ds.root / ds.manifest["mask"][1]).unlink()
    with pytest.raises(SampleError) as err:
        ds[0]
    assert ds.sample_id(0) in str(err.value) and str(ds.root / ds.manifest["image"][0]) in str(err.value)
    with pytest.raises(SampleError) as err:
        ds[1]
    assert "does not exist" in str(err.value) and ds.manifest["mask"][1] in str(err.value)
    assert [p["id"] for p in ds.check()] == [ds.sample_id(1)]


def test_corrupt_dicom_and_shape_mismatch(tmp_path):
    from medimg_bench.datasets.io import ImageReadError, read_dicom

    bad = tmp_path / "broken.dcm"
    bad.write_bytes(b"\x00" * 64 + b"garbage")
    with pytest.raises(ImageReadError, match="broken.dcm"):
        read_dicom(bad)
    root = tmp_path / "cxr"
    ds = create("synthetic_cxr", cache_dir=root, split="all", n=2, size=16)
    from PIL import Image

    Image.fromarray(np.zeros((8, 8), np.uint8)).save(ds.root / ds.manifest["mask"][0])
    with pytest.raises(SampleError, match="shape mismatch"):
        ds[0]


def test_create_on_error_skip_drops_rows_with_missing_files(tmp_path, caplog):
    root = tmp_path / "skip"
    ds = create("synthetic_cxr", cache_dir=root, split="all", n=6, size=16)
    (ds.root / ds.manifest["image"][2]).unlink()
    with caplog.at_level("WARNING"):
        kept = create("synthetic_cxr", cache_dir=root, split="all", n=6, size=16, on_error="skip")
    assert len(kept) == 5 and ds.sample_id(2) not in kept.ids
    assert "skipped 1 of 6 samples" in caplog.text and ds.manifest["image"][2] in caplog.text
    assert len(create("synthetic_cxr", cache_dir=root, split="all", n=6, size=16)) == 6  # default keeps the row
    with pytest.raises(ValueError, match="on_error"):
        create("synthetic_cxr", cache_dir=root, split="all", n=6, size=16, on_error="ignore")


# -- where phantoms are written (issue #19 item 20: dataset.root=/x wrote phantoms into /x) --------
SYNTHETIC = [("synthetic_cxr", {"n": 4, "size": 16}), ("synthetic_ct", {"n": 2, "shape": (16, 12, 8)}),
             ("synthetic_vqa", {"n": 4, "size": 16})]


@pytest.mark.parametrize("name,opts", SYNTHETIC)
def test_root_that_is_not_a_phantom_folder_is_refused_and_left_alone(name, opts, tmp_path):
    missing, empty, foreign = tmp_path / "x", tmp_path / "empty", tmp_path / "mine"
    empty.mkdir()
    foreign.mkdir()
    (foreign / "notes.txt").write_text("my files")
    for root in (missing, empty, foreign):
        with pytest.raises(ValueError, match=r"not read from a root.*cache_dir=DIR") as err:
            create(name, root, split=None, **opts)
        assert repr(str(root)) in str(err.value)
    assert not missing.exists() and not any(empty.iterdir())  # nothing written
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("name,opts", SYNTHETIC)
def test_cache_dir_writes_phantoms_and_root_reads_them_back(name, opts, tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "env_cache"))
    ds = create(name, cache_dir=tmp_path / "phantoms", split=None, **opts)
    assert ds.root.parent == tmp_path / "phantoms" and (ds.root / "params.json").is_file()
    again = create(name, ds.root, split=None, **opts)  # a folder the writer left: read back
    assert list(again.ids) == list(ds.ids)
    default = create(name, split=None, **opts)  # no cache_dir: $MEDIMG_BENCH_CACHE/synthetic
    assert default.root.parent == tmp_path / "env_cache" / "synthetic" and list(default.ids) == list(ds.ids)
    other = {**opts, "seed": 1}
    with pytest.raises(ValueError, match=r"holds phantoms made with .*not the ones asked for"):
        create(name, ds.root, split=None, **other)


def test_a_run_with_dataset_root_on_a_synthetic_dataset_is_refused(tmp_path, monkeypatch):
    from medimg_bench.builders import build_dataset
    from medimg_bench.runs import compose_config

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    cfg = compose_config([f"dataset.root={tmp_path / 'x'}", "dataset.options.n=4", "dataset.options.size=16"])
    with pytest.raises(ValueError, match="dataset.options.cache_dir"):
        build_dataset(cfg["dataset"], "test")
    assert not (tmp_path / "x").exists()
    cfg = compose_config([f"dataset.options.cache_dir={tmp_path / 'here'}", "dataset.options.n=4",
                          "dataset.options.size=16"])
    assert build_dataset(cfg["dataset"], "test").root.parent == tmp_path / "here"
