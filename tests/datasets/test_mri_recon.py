"""SKM-TEA / fastMRI loaders (format-faithful HDF5 fixtures), fastMRI's masks, task=reconstruction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.datasets.mri_recon.base import fft2c, zero_filled
from medimg_bench.datasets.mri_recon.masks import file_seed, undersampling_mask
from medimg_bench.registry import create_dataset
from medimg_bench.sample import SampleError

h5py = pytest.importorskip("h5py", reason="h5py reads the HDF5 k-space files")
MASKS = Path(__file__).parent / "data" / "fastmri_masks.npz"


def test_masks_equal_fastmri_subsample():
    d = np.load(MASKS)
    for i in range(len(d["kind"])):
        cfs = [c for c in d["cfs"][i] if not np.isnan(c)]
        accs = [int(a) for a in d["accs"][i] if not np.isnan(a)]
        seed = file_seed(f"file{1000 + int(d['seed'][i])}.h5") if d["seed_is_file"][i] else int(d["seed"][i])
        cols = int(d["cols"][i])
        mask, n_low = undersampling_mask(str(d["kind"][i]), cols, center_fractions=cfs, accelerations=accs, seed=seed)
        assert n_low == d["num_low"][i], i
        np.testing.assert_array_equal(mask, d["mask"][i, :cols], err_msg=f"mask {i}")


def _phantom(rng, s, h, w):
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.exp(-((yy - h / 2) ** 2 + (xx - w / 2) ** 2) / (2 * (h / 3) ** 2))
    return (img[None] * rng.uniform(0.5, 1.5, (s, 1, 1))).astype(np.complex64)


def make_skm_tea(root: Path, scans=("MTR_001", "MTR_002", "MTR_003"), coils=4, shape=(3, 16, 12)) -> dict:
    """SKM-TEA v1.0.0 layout; the target is the SENSE image, k-space = FFT(maps × image)."""
    rng = np.random.default_rng(0)
    (root / "annotations" / "v1.0.0").mkdir(parents=True)
    (root / "files_recon_calib-24").mkdir()
    (root / "segmentation_masks" / "raw-data-track").mkdir(parents=True)
    splits = {"train": [scans[0]], "val": [scans[1]], "test": list(scans[2:])}
    nx, ny, nz = shape
    truth = {}
    for split, names in splits.items():
        images = [{"id": i, "file_name": f"{n}.h5", "scan_id": n, "subject_id": 100 + i, "timepoint": 0,
                   "voxel_spacing": [0.3125, 0.3125, 0.8], "matrix_shape": list(shape), "orientation": ["SI", "AP", "LR"],
                   "num_echoes": 2} for i, n in enumerate(names)]
        (root / "annotations" / "v1.0.0" / f"{split}.json").write_text(
            json.dumps({"info": {}, "categories": [], "images": images, "annotations": []}))
    for n in scans:
        maps = (rng.normal(size=(nx, ny, nz, coils)) + 1j * rng.normal(size=(nx, ny, nz, coils))).astype(np.complex64)
        maps /= np.sqrt((np.abs(maps) ** 2).sum(-1, keepdims=True))
        echoes = [_phantom(rng, nx, ny, nz), 0.5 * _phantom(rng, nx, ny, nz)]
        kspace = np.stack([fft2c(torch.from_numpy(np.moveaxis(maps * e[..., None], -1, 1))).numpy()
                           for e in echoes], 0)  # (E, Nx, C, Ny, Nz)
        kspace = np.transpose(kspace, (1, 3, 4, 0, 2))  # (Nx, Ny, Nz, E, C)
        target = np.stack(echoes, -1)[..., None]  # (Nx, Ny, Nz, E, 1)
        with h5py.File(root / "files_recon_calib-24" / f"{n}.h5", "w") as f:
            f["kspace"], f["maps"], f["target"] = kspace, maps[..., None], target
        seg = np.zeros(shape, dtype=np.uint8)
        seg[:, 4:8, 3:6], seg[:, 9:12, 6:9] = 2, 5
        import nibabel as nib

        nib.save(nib.Nifti1Image(seg, np.diag([0.3125, 0.3125, 0.8, 1])),
                 root / "segmentation_masks" / "raw-data-track" / f"{n}.nii.gz")
        truth[n] = (echoes, seg)
    return truth


def test_skm_tea_layout_and_full_sampling(tmp_path):
    truth = make_skm_tea(tmp_path)
    ds = create_dataset("skm_tea", root=tmp_path, split=None, accelerations=[1], center_fractions=[0.5])
    assert ds.ids == ["MTR_001_echo1", "MTR_001_echo2", "MTR_002_echo1", "MTR_002_echo2",
                      "MTR_003_echo1", "MTR_003_echo2"]
    assert set(ds.manifest["split"]) == {"train", "val", "test"}
    assert ds.classes[0] == "background" and len(ds.classes) == 7
    s = ds[3]  # MTR_002 echo 2
    echoes, seg = truth["MTR_002"]
    assert s["kspace"].shape == (3, 4, 16, 12) and s["maps"].shape == (3, 4, 16, 12)
    np.testing.assert_allclose(s["target"].numpy(), np.abs(echoes[1]), rtol=1e-6)
    # fully sampled: the SENSE adjoint of the k-space is the target
    np.testing.assert_allclose(s["image"][0].numpy(), np.abs(echoes[1]), atol=1e-5)
    assert s["sampling_mask"].sum() == 12 and s["meta"]["patient_id"] == "100"
    np.testing.assert_array_equal(s["mask"].numpy(), seg)
    assert len(create_dataset("skm_tea", root=tmp_path, split="test")) == 2
    combined = create_dataset("skm_tea", root=tmp_path, split="test", combine_tissues=True)
    assert combined.classes == ["background", "patellar_cartilage", "femoral_cartilage", "tibial_cartilage", "meniscus"]
    assert set(np.unique(combined[0]["mask"].numpy())) == {0, 2, 4}


def test_skm_tea_undersampled_and_seeded(tmp_path):
    make_skm_tea(tmp_path)
    ds = create_dataset("skm_tea", root=tmp_path, split="test", echoes=[1], accelerations=[4], center_fractions=[0.25])
    s = ds[0]
    expect, _ = undersampling_mask("random", 12, center_fractions=[0.25], accelerations=[4], seed=file_seed("MTR_003.h5"))
    np.testing.assert_array_equal(s["sampling_mask"].numpy() > 0, expect)
    assert (s["kspace"][..., ~torch.from_numpy(expect)] == 0).all()
    np.testing.assert_allclose(s["image"][0].numpy(), zero_filled(s["kspace"], s["maps"]).numpy())


def test_reconstruction_task_end_to_end(tmp_path):
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.metrics.reconstruction import nmse, psnr, ssim
    from medimg_bench.models.reconstruction import ZeroFilled

    make_skm_tea(tmp_path / "data")
    ds = create_dataset("skm_tea", root=tmp_path / "data", split=None, accelerations=[4], center_fractions=[0.25])
    res = evaluate(ZeroFilled(), ds, task="reconstruction", metrics={"psnr": {}, "ssim": {}, "nmse": {}},
                   batch_size=2, device="cpu", progress=False, n_resamples=50)
    assert not res.manifest.get("n_failed")
    s = ds[5]
    by_id = res.samples.set_index("id")
    x, t = s["image"][0][None], s["target"][None]
    assert by_id.loc[s["id"], "psnr"] == pytest.approx(psnr(x, t).item(), rel=1e-9)
    assert by_id.loc[s["id"], "ssim"] == pytest.approx(ssim(x, t).item(), rel=1e-9)
    assert by_id.loc[s["id"], "nmse"] == pytest.approx(nmse(x, t).item(), rel=1e-9)
    assert 0 < res.summary["metrics"]["ssim"]["per_class"]["0"]["mean"] < 1


def test_predictions_folder_with_downstream_dice(tmp_path):
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.registry import create_model

    truth = make_skm_tea(tmp_path / "data")
    ds = create_dataset("skm_tea", root=tmp_path / "data", split="test", combine_tissues=False)
    preds = tmp_path / "preds"
    preds.mkdir()
    for e in (1, 2):
        echoes, seg = truth["MTR_003"]
        bad = seg.copy()
        bad[:, 4:6, 3:6] = 0  # half of tissue 2 missed
        with h5py.File(preds / f"MTR_003_echo{e}.h5", "w") as f:
            f["reconstruction"] = np.abs(echoes[e - 1]) * 1.01
            f["segmentation"] = bad
    model = create_model("predictions", root=preds)
    res = evaluate(model, ds, task="reconstruction",
                   metrics={"psnr": {}, "nmse": {}, "dice": {"metric": "dice"}}, device="cpu", progress=False,
                   n_resamples=20)
    by_id = res.samples.set_index("id")
    assert by_id.loc["MTR_003_echo1", "nmse"] == pytest.approx(1e-4, rel=1e-4)
    dice = res.summary["metrics"]["dice"]["per_class"]
    assert dice["femoral_cartilage"]["mean"] == pytest.approx(2 * 18 / (36 + 18))
    assert dice["meniscus_medial"]["mean"] == pytest.approx(1.0)


def test_bad_files_name_the_file(tmp_path):
    make_skm_tea(tmp_path)
    with h5py.File(tmp_path / "files_recon_calib-24" / "MTR_003.h5", "w") as f:
        f["kspace"] = np.zeros((3, 16, 12, 2, 4), np.complex64)  # no target
    ds = create_dataset("skm_tea", root=tmp_path, split="test")
    with pytest.raises(SampleError, match=r"lacks \['target'\].*MTR_003.h5|MTR_003.h5.*lacks"):
        ds[0]
    (tmp_path / "files_recon_calib-24" / "MTR_003.h5").write_bytes(b"not hdf5")
    with pytest.raises(SampleError, match="MTR_003.h5"):
        ds[0]
    with pytest.raises(ValueError, match="mask kind"):
        create_dataset("skm_tea", root=tmp_path, mask_kind="poisson")
    with pytest.raises(FileNotFoundError, match="annotation"):
        create_dataset("skm_tea", root=tmp_path, version="v9")


def test_fastmri_layout(tmp_path):
    rng = np.random.default_rng(0)
    img = _phantom(rng, 2, 24, 20)
    k = fft2c(torch.from_numpy(img)).numpy()[:, None]  # single coil
    with h5py.File(tmp_path / "file1000.h5", "w") as f:
        f["kspace"] = k
        f["reconstruction_rss"] = np.abs(img[:, 2:22, :])[:, :, :]  # cropped plane: 20 x 20
        f.attrs["acquisition"] = "CORPD_FBK"
    ds = create_dataset("fastmri", root=tmp_path, accelerations=[1], center_fractions=[0.5])
    s = ds[0]
    assert s["id"] == "file1000" and s["image"].shape == (1, 2, 20, 20)
    np.testing.assert_allclose(s["image"][0].numpy(), s["target"].numpy(), atol=1e-5)


def test_float_segmentation_in_a_reconstruction_h5_is_refused_not_cast(tmp_path):
    """Issue 35: a soft (float) segmentation in a submission ``.h5`` was cast to int (Dice 0.0);
    the NIfTI path refused it. Both go through the one mask decoder now."""
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.registry import create_model

    truth = make_skm_tea(tmp_path / "data")
    ds = create_dataset("skm_tea", root=tmp_path / "data", split="test", combine_tissues=False)
    preds = tmp_path / "preds"
    preds.mkdir()
    echoes, seg = truth["MTR_003"]
    for e in (1, 2):
        with h5py.File(preds / f"MTR_003_echo{e}.h5", "w") as f:
            f["reconstruction"] = np.abs(echoes[e - 1])
            # echo 1: soft labels (0.9 where tissue); echo 2: the labels as whole floats (accepted)
            f["segmentation"] = (seg > 0) * 0.9 if e == 1 else seg.astype(np.float32)
    res = evaluate(create_model("predictions", root=preds), ds, task="reconstruction",
                   metrics={"dice": {"metric": "dice"}}, device="cpu", progress=False, n_resamples=10)
    failed = res.samples.set_index("id")
    assert res.summary["n_failed"] == 1
    err = str(failed.loc["MTR_003_echo1", "error"])
    assert "MTR_003_echo1.h5" in err and "not whole numbers" in err and "0.9" in err
    assert res.summary["metrics"]["dice"]["per_class"]["femoral_cartilage"]["mean"] == pytest.approx(1.0)
    # the NIfTI tissue mask with fractions is refused the same way, naming the file
    import nibabel as nib

    nii = next((tmp_path / "data" / "segmentation_masks" / "raw-data-track").glob("MTR_003*"))
    img = nib.load(nii)
    nib.save(nib.Nifti1Image(np.asarray(img.dataobj).astype(np.float32) * 0.5, img.affine), nii)
    with pytest.raises(SampleError, match=r"MTR_003\.nii\.gz.*not whole numbers"):
        ds[0]
