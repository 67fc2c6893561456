"""CT/MRI loaders on tiny copies of each official layout written here, plus the real CT files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.datasets import create, list_datasets
from medimg_bench.datasets.volumetric import VERSE_LABELS, VolumeDataset
from medimg_bench.sample import SampleError, validate_sample

nib = pytest.importorskip("nibabel")

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared" / "data" / "totalseg_ct"
SPACING = (0.8, 0.9, 2.5)


def _affine(spacing=SPACING, flip_y: bool = False, origin=(-10.0, 20.0, 5.0)) -> np.ndarray:
    a = np.diag([*spacing, 1.0])
    a[:3, 3] = origin
    if flip_y:
        a[1, 1] *= -1
    return a


def _save(path: Path, array: np.ndarray, affine: np.ndarray | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, _affine() if affine is None else affine), str(path))


def _vol(seed: int, shape=(6, 5, 4)) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _labels(seed: int, shape=(6, 5, 4), values=(0, 1, 2)) -> np.ndarray:
    return np.random.default_rng(seed).choice(values, size=shape).astype(np.uint8)


def _check(sample: dict, shape: tuple[int, ...], channels: int = 1) -> None:
    validate_sample(sample, task="segmentation")
    assert sample["image"].dtype == torch.float32 and sample["image"].shape == (channels, *shape)
    assert sample["mask"].dtype == torch.int64 and sample["mask"].shape[-3:] == shape


# -- Medical Segmentation Decathlon --------------------------------------------------------------
def _msd_task(
    root: Path,
    name: str,
    modality: dict,
    labels: dict,
    train: list[str],
    test: list[str],
    channels: int = 1,
) -> Path:
    task = root / name
    shape = (6, 5, 4, channels) if channels > 1 else (6, 5, 4)
    for i, case in enumerate(train):
        _save(task / "imagesTr" / f"{case}.nii.gz", _vol(i, shape))
        _save(
            task / "labelsTr" / f"{case}.nii.gz", _labels(i, values=tuple(int(k) for k in labels))
        )
        (task / "imagesTr" / f"._{case}.nii.gz").write_bytes(b"\x00\x05\x16\x07 mac resource fork")
    for i, case in enumerate(test):
        _save(task / "imagesTs" / f"{case}.nii.gz", _vol(100 + i, shape))
    info = {
        "name": name.split("_", 1)[1],
        "description": "tiny copy",
        "tensorImageSize": "4D" if channels > 1 else "3D",
        "modality": modality,
        "labels": labels,
        "numTraining": len(train),
        "numTest": len(test),
        "training": [
            {"image": f"./imagesTr/{c}.nii.gz", "label": f"./labelsTr/{c}.nii.gz"} for c in train
        ],
        "test": [f"./imagesTs/{c}.nii.gz" for c in test],
    }
    (task / "dataset.json").write_text(json.dumps(info, indent=4))
    return task


def test_msd_single_and_multimodal(tmp_path):
    task = _msd_task(
        tmp_path,
        "Task04_Hippocampus",
        {"0": "MRI"},
        {"0": "background", "1": "Anterior", "2": "Posterior"},
        ["hippocampus_367", "hippocampus_304"],
        ["hippocampus_267"],
    )
    ds = create("msd", task, split="train")
    assert ds.ids == ["hippocampus_367", "hippocampus_304"] and ds.classes == [
        "background",
        "Anterior",
        "Posterior",
    ]
    s = ds[0]
    _check(s, (6, 5, 4))
    np.testing.assert_allclose(s["image"][0].numpy(), _vol(0))
    np.testing.assert_array_equal(s["mask"].numpy(), _labels(0))
    assert (
        s["meta"]["spacing"] == pytest.approx(SPACING)
        and s["meta"]["patient_id"] == "hippocampus_367"
    )
    assert s["meta"]["modality"] == "MR" and s["meta"]["split"] == "train"
    test = create("msd", task, split="test")
    assert test.ids == ["hippocampus_267"] and "mask" not in test[0]
    _msd_task(
        tmp_path,
        "Task01_BrainTumour",
        {"0": "FLAIR", "1": "T1w", "2": "t1gd", "3": "T2w"},
        {"0": "background", "1": "edema", "2": "non-enhancing tumor", "3": "enhancing tumour"},
        ["BRATS_001"],
        ["BRATS_485"],
        channels=4,
    )
    with pytest.raises(ValueError, match="several tasks"):
        create("msd", tmp_path)
    brain = create("msd", tmp_path, task="Task01")
    s = brain[0]
    _check(s, (6, 5, 4), channels=4)
    np.testing.assert_allclose(
        s["image"][2].numpy(), _vol(0, (6, 5, 4, 4))[..., 2]
    )  # modality 2 = t1gd
    assert s["meta"]["channels"] == ["FLAIR", "T1w", "t1gd", "T2w"]
    assert create("msd", tmp_path, task="Hippocampus", split=None).manifest["split"].tolist() == [
        "train",
        "train",
        "test",
    ]


# -- BraTS ----------------------------------------------------------------------------------------
def _brats_case(root: Path, case: str, mods: tuple[str, ...], sep: str, seg_values, with_seg=True):
    for c, m in enumerate(mods):
        _save(root / case / f"{case}{sep}{m}.nii.gz", _vol(10 * c + len(case)))
    if with_seg:
        _save(root / case / f"{case}{sep}seg.nii.gz", _labels(3, values=seg_values))


def test_brats_2021_and_2023_naming(tmp_path):
    _brats_case(
        tmp_path / "BraTS2021_Training_Data",
        "BraTS2021_00000",
        ("flair", "t1", "t1ce", "t2"),
        "_",
        (0, 1, 2, 4),
    )
    _brats_case(
        tmp_path / "GLI", "BraTS-GLI-00005-000", ("t1c", "t1n", "t2f", "t2w"), "-", (0, 1, 2, 3)
    )
    _brats_case(
        tmp_path / "GLI", "BraTS-GLI-00005-001", ("t1c", "t1n", "t2f", "t2w"), "-", (0, 1, 2, 3)
    )
    _brats_case(
        tmp_path / "GLI",
        "BraTS-GLI-00099-000",
        ("t1c", "t1n", "t2f", "t2w"),
        "-",
        (),
        with_seg=False,
    )
    ds = create("brats", tmp_path)
    assert ds.ids == ["BraTS-GLI-00005-000", "BraTS-GLI-00005-001", "BraTS2021_00000"]
    assert ds.manifest["patient_id"].tolist() == [
        "BraTS-GLI-00005",
        "BraTS-GLI-00005",
        "BraTS2021_00000",
    ]
    assert create("brats", tmp_path, split="validation").ids == ["BraTS-GLI-00099-000"]
    raw = _labels(3, values=(0, 1, 2, 4)).astype(np.int64)
    s21 = ds[2]
    _check(s21, (6, 5, 4), channels=4)
    # channel order (t1, t1ce, t2, flair): channel 3 is the FLAIR file
    flair = nib.load(
        str(tmp_path / "BraTS2021_Training_Data/BraTS2021_00000/BraTS2021_00000_flair.nii.gz")
    )
    np.testing.assert_allclose(s21["image"][3].numpy(), np.asanyarray(flair.dataobj))
    np.testing.assert_array_equal(s21["mask"].numpy(), np.where(raw == 4, 3, raw))  # ET 4 -> 3
    s23 = ds[0]
    t1c = nib.load(str(tmp_path / "GLI/BraTS-GLI-00005-000/BraTS-GLI-00005-000-t1c.nii.gz"))
    np.testing.assert_allclose(
        s23["image"][1].numpy(), np.asanyarray(t1c.dataobj)
    )  # t1c is channel 1
    assert ds.classes == ["background", "NCR", "ED", "ET"]
    reg = create("brats", tmp_path, regions=True)
    r = reg[2]["mask"].numpy()
    assert r.shape == (3, 6, 5, 4) and reg.classes == ["WT", "TC", "ET"]
    np.testing.assert_array_equal(r[0], raw > 0)
    np.testing.assert_array_equal(r[1], (raw == 1) | (raw == 4))
    np.testing.assert_array_equal(r[2], raw == 4)
    validate_sample(reg[2], task="segmentation")


def test_brats_label_outside_set(tmp_path):
    _brats_case(
        tmp_path, "BraTS2021_00001", ("flair", "t1", "t1ce", "t2"), "_", (0, 3)
    )  # 3 is not a 2021 label
    with pytest.raises(SampleError, match=r"BraTS2021_00001_seg\.nii\.gz.*labels \[3\]"):
        create("brats", tmp_path)[0]


# -- KiTS23 ---------------------------------------------------------------------------------------
def test_kits23(tmp_path):
    base = tmp_path / "kits23" / "dataset"
    for i in (0, 3):
        _save(base / f"case_{i:05d}" / "imaging.nii.gz", _vol(i))
        _save(base / f"case_{i:05d}" / "segmentation.nii.gz", _labels(i, values=(0, 1, 2, 3)))
    (base / "kits.json").write_text(
        json.dumps(
            [
                {
                    "case_id": "case_00000",
                    "age_at_nephrectomy": 54,
                    "gender": "male",
                    "tumor_histologic_subtype": "clear_cell_rcc",
                },
                {"case_id": "case_00003", "age_at_nephrectomy": 71, "gender": "female"},
            ]
        )
    )
    ds = create("kits23", tmp_path / "kits23")
    assert ds.ids == ["case_00000", "case_00003"] and ds.classes == [
        "background",
        "kidney",
        "tumor",
        "cyst",
    ]
    s = ds[1]
    _check(s, (6, 5, 4))
    assert s["meta"]["age"] == 71 and s["meta"]["sex"] == "female" and s["meta"]["modality"] == "CT"
    raw = _labels(3, values=(0, 1, 2, 3))
    np.testing.assert_array_equal(s["mask"].numpy(), raw)
    reg = create("kits23", base, regions=True)[1]["mask"].numpy()
    np.testing.assert_array_equal(reg, np.stack([raw > 0, raw >= 2, raw == 2]))


# -- TotalSegmentator -----------------------------------------------------------------------------
def _totalseg(root: Path) -> None:
    (root / "meta.csv").write_text(
        "image_id;age;gender;institute;study_type;split;manufacturer;scanner_model;kvp;pathology;pathology_location\n"
        "s0011;63;m;I;ct abdomen;train;siemens;Somatom;120;no_pathology;\n"
        "s0024;48;f;J;ct thorax;test;ge;Revolution;100;tumor;liver\n"
    )
    for sid in ("s0011", "s0024"):
        _save(root / sid / "ct.nii.gz", _vol(int(sid[1:])))
        for k, name in enumerate(("aorta", "liver", "spleen")):
            m = np.zeros((6, 5, 4), np.uint8)
            m[k * 2 : k * 2 + 2] = 1
            if name == "spleen":
                m[1, 0, 0] = 1  # overlaps the aorta voxel (1, 0, 0)
            _save(root / sid / "segmentations" / f"{name}.nii.gz", m)


def test_totalsegmentator(tmp_path):
    _totalseg(tmp_path)
    ds = create("totalsegmentator", tmp_path)  # default split: test
    assert ds.ids == ["s0024"] and ds.classes == ["background", "aorta", "liver", "spleen"]
    s = ds[0]
    _check(s, (6, 5, 4))
    expected = np.repeat(np.array([1, 1, 2, 2, 3, 3])[:, None, None], 5, 1).repeat(4, 2)
    expected[1, 0, 0] = 3  # higher id wins where masks overlap
    np.testing.assert_array_equal(s["mask"].numpy(), expected)
    assert s["meta"]["overlap_voxels"] == 1
    assert s["meta"]["sex"] == "f" and s["meta"]["site"] == "J" and s["meta"]["age"] == 48
    assert create("totalsegmentator", tmp_path, split="train").ids == ["s0011"]
    # official class ids from a class map (id -> name), here a 3-entry excerpt of the v2 "total" map
    (tmp_path / "labels.json").write_text(
        json.dumps({"0": "background", "2": "liver", "52": "aorta"})
    )
    mapped = create("totalsegmentator", tmp_path, class_map=tmp_path / "labels.json")
    m = mapped[0]["mask"].numpy()
    assert (
        set(np.unique(m)) == {0, 2, 52}
        and mapped.classes[52] == "aorta"
        and len(mapped.classes) == 53
    )
    (tmp_path / "s0024" / "segmentations" / "spleen.nii.gz").unlink()
    with pytest.raises(SampleError, match=r"spleen\.nii\.gz.*'spleen' is missing"):
        ds[0]


# -- VerSe ----------------------------------------------------------------------------------------
def test_verse_layout_and_centroids(tmp_path):
    shape = (6, 7, 8)
    for set_name, sub, stem in [
        ("dataset-01training", "sub-gl003", "sub-gl003_dir-ax"),
        ("dataset-01training", "sub-gl003", "sub-gl003_dir-sag"),
        ("dataset-03test", "sub-verse500", "sub-verse500"),
    ]:
        base = tmp_path / set_name
        _save(
            base / "rawdata" / sub / f"{stem}_ct.nii.gz", _vol(1, shape), _affine((1.0, 1.0, 1.0))
        )
        mask = np.zeros(shape, np.uint8)
        mask[1:4, 2:5, 3:6] = 20  # L1, centre of mass (2, 3, 4)
        mask[4, 5, 6] = 21
        _save(
            base / "derivatives" / sub / f"{stem}_seg-vert_msk.nii.gz",
            mask,
            _affine((1.0, 1.0, 1.0)),
        )
        # VerSe centroids: voxel coordinates of the image reoriented to P, I, R. For a RAS image
        # of shape (X, Y, Z): P = Y-1-y, I = Z-1-z, R = x (derived by hand).
        ctd = [
            {"direction": ["P", "I", "R"]},
            {"label": 20, "X": 7 - 1 - 3.0, "Y": 8 - 1 - 4.0, "Z": 2.0},
            {"label": 21, "X": 7 - 1 - 5.0, "Y": 8 - 1 - 6.0, "Z": 4.0},
        ]
        (base / "derivatives" / sub / f"{stem}_seg-subreg_ctd.json").write_text(json.dumps(ctd))
    ds = create("verse", tmp_path, split="train")
    assert ds.ids == ["sub-gl003_dir-ax", "sub-gl003_dir-sag"]
    assert set(ds.manifest["patient_id"]) == {"sub-gl003"}
    assert create("verse", tmp_path / "dataset-03test").ids == ["sub-verse500"]
    s = ds[0]
    _check(s, shape)
    assert s["meta"]["centroids"][20] == pytest.approx((2.0, 3.0, 4.0))
    assert s["meta"]["centroids"][21] == pytest.approx((4.0, 5.0, 6.0))
    assert s["meta"]["centroids_world"][20] == pytest.approx((2.0 - 10, 3.0 + 20, 4.0 + 5))
    assert ds.classes[20] == "L1" and ds.classes[19] == "T12" and VERSE_LABELS[28] == "T13"
    # after reorientation the centroids follow the voxels
    lps = create("verse", tmp_path, split="train", orientation="LPS")[0]
    c = np.rint(lps["meta"]["centroids"][21]).astype(int)
    assert lps["mask"][tuple(c)] == 21


# -- generic folder pairs, slices, options, bad input --------------------------------------------
def test_nifti_pairs_and_nnunet_channels(tmp_path):
    for case in ("liver_1", "liver_7"):
        _save(tmp_path / "images" / f"{case}.nii.gz", _vol(len(case)))
        _save(tmp_path / "labels" / f"{case}.nii.gz", _labels(1))
    ds = create("nifti_pairs", tmp_path, split="test", classes=["background", "liver", "tumour"])
    assert ds.ids == ["liver_1", "liver_7"] and ds.manifest["split"].tolist() == ["test", "test"]
    _check(ds[1], (6, 5, 4))
    for c in range(2):
        _save(tmp_path / "imagesTr" / f"prostate_00_{c:04d}.nii.gz", _vol(c))
    _save(tmp_path / "labelsTr" / "prostate_00.nii.gz", _labels(2))
    nn = create(
        "nifti_pairs", tmp_path, image_dir="imagesTr", label_dir="labelsTr", channel_suffix=True
    )
    s = nn[0]
    _check(s, (6, 5, 4), channels=2)
    np.testing.assert_allclose(s["image"][1].numpy(), _vol(1))
    _save(tmp_path / "labels" / "liver_9.nii.gz", _labels(1))
    with pytest.raises(ValueError, match=r"liver_9\.nii\.gz.*has no image"):
        create("nifti_pairs", tmp_path)
    (tmp_path / "labels" / "liver_9.nii.gz").unlink()
    (tmp_path / "labels" / "liver_7.nii.gz").unlink()
    with pytest.raises(ValueError, match=r"liver_7\.nii\.gz.*has no label"):
        create("nifti_pairs", tmp_path)
    assert create("nifti_pairs", tmp_path, require_labels=False).manifest[
        "mask"
    ].isna().tolist() == [False, True]


def test_shape_mismatch_and_misaligned_mask(tmp_path):
    _save(tmp_path / "images" / "a.nii.gz", _vol(0))
    _save(tmp_path / "labels" / "a.nii.gz", _labels(0, shape=(6, 5, 3)))
    ds = create("nifti_pairs", tmp_path)
    with pytest.raises(SampleError, match=r"labels/a\.nii\.gz.*shape mismatch"):
        ds[0]
    _save(tmp_path / "labels" / "a.nii.gz", _labels(0), _affine(origin=(50.0, 0.0, 0.0)))
    with pytest.raises(SampleError, match=r"labels/a\.nii\.gz.*not on the image grid"):
        ds[0]
    # the same mask stored with its y axis flipped is brought onto the image grid exactly
    flipped_affine = _affine(flip_y=True, origin=(-10.0, 20.0 + 4 * 0.9, 5.0))
    _save(tmp_path / "labels" / "a.nii.gz", _labels(0)[:, ::-1].copy(), flipped_affine)
    np.testing.assert_array_equal(ds[0]["mask"].numpy(), _labels(0))


def test_slices_orientation_and_check(tmp_path):
    for i, case in enumerate(("a", "b")):
        _save(tmp_path / "images" / f"{case}.nii.gz", _vol(i), _affine(flip_y=True))
        lab = np.zeros((6, 5, 4), np.uint8)
        lab[:, :, 1 + i] = 1
        _save(tmp_path / "labels" / f"{case}.nii.gz", lab, _affine(flip_y=True))
    sl = create("nifti_pairs", tmp_path, slice_axis=2)
    assert len(sl) == 8 and sl.ids[:2] == ["a_slice0000", "a_slice0001"]
    s = sl[5]
    validate_sample(s, task="segmentation")
    assert s["image"].shape == (1, 6, 5) and s["meta"]["spacing"] == pytest.approx(SPACING[:2])
    assert (
        s["meta"]["volume_id"] == "b"
        and s["meta"]["slice_index"] == 1
        and s["meta"]["patient_id"] == "b"
    )
    np.testing.assert_allclose(s["image"][0].numpy(), _vol(1)[:, :, 1])
    assert create("nifti_pairs", tmp_path, slice_axis=2, only_labeled_slices=True).ids == [
        "a_slice0001",
        "b_slice0002",
    ]
    sag = create("nifti_pairs", tmp_path, slice_axis=0, orientation="RAS")
    assert len(sag) == 12 and sag[0]["image"].shape == (1, 5, 4)
    ras = create("nifti_pairs", tmp_path, orientation="RAS")[0]
    np.testing.assert_allclose(ras["image"][0].numpy(), _vol(0)[:, ::-1])
    assert ras["meta"]["affine"][1, 1] > 0
    (tmp_path / "images" / "b.nii.gz").unlink()
    problems = create("nifti_pairs", tmp_path, require_labels=False, label_dir=None).check()
    assert problems == []
    ds = VolumeDataset(
        pd.DataFrame({"id": ["a", "b"], "image": ["images/a.nii.gz", "images/b.nii.gz"]}),
        root=tmp_path,
    )
    assert [p["id"] for p in ds.check()] == ["b"]


@pytest.mark.filterwarnings("ignore:.*default value of argument `labels:FutureWarning")
def test_resample_to_spacing_with_monai(tmp_path):
    pytest.importorskip("monai")
    img = np.zeros((8, 8, 4), np.float32)
    img[2:6, 2:6, 1:3] = 100.0
    lab = (img > 0).astype(np.uint8) * 2
    _save(tmp_path / "images" / "a.nii.gz", img, _affine((1.0, 1.0, 2.0)))
    _save(tmp_path / "labels" / "a.nii.gz", lab, _affine((1.0, 1.0, 2.0)))
    s = create("nifti_pairs", tmp_path, spacing=(2.0, 2.0, 2.0))[0]
    validate_sample(s, task="segmentation")
    assert tuple(s["image"].shape) == (1, 4, 4, 4) and s["meta"]["spacing"] == pytest.approx(
        (2.0, 2.0, 2.0)
    )
    assert set(torch.unique(s["mask"]).tolist()) == {0, 2}  # nearest: no new labels
    # the physical volume of the object is preserved: 4x4x2 voxels of 2 mm^3 = 2x2x2 of 8 mm^3
    assert int((s["mask"] == 2).sum()) == 8
    assert float(s["image"][0][s["mask"] == 2].mean()) == pytest.approx(100.0, abs=30)
    # our exact reorientation (nibabel orientation math) equals MONAI's Orientation transform
    from monai.data import MetaTensor
    from monai.transforms import Orientation

    from medimg_bench.datasets.io import reorient

    vol = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    aff = np.array([[0, 0, -2.0, 5], [-1.0, 0, 0, 3], [0, 3.0, 0, -1], [0, 0, 0, 1]])
    ours, ours_aff = reorient(vol, aff, "RAS")
    theirs = Orientation(axcodes="RAS")(
        MetaTensor(torch.from_numpy(vol)[None], affine=torch.tensor(aff))
    )
    np.testing.assert_array_equal(ours, theirs.array[0])
    np.testing.assert_allclose(ours_aff, np.asarray(theirs.affine), atol=1e-6)
    with pytest.raises(ValueError, match="spacing must be 3 positive"):
        create("nifti_pairs", tmp_path, spacing=(1.0, 0.0, 1.0))


def test_real_dicom_series_with_its_mask():
    if not (SHARED / "dicom").exists():
        pytest.skip(f"real data {SHARED} absent (needs ../shared/data from the project root)")
    manifest = pd.DataFrame(
        [
            {"id": "dcm", "image": "dicom", "mask": "dicom_seg.nii.gz"},
            {"id": "ct", "image": "ct.nii.gz", "mask": "seg.nii.gz"},
        ]
    )
    ds = VolumeDataset(manifest, root=SHARED, modality="CT")
    s = ds[0]  # the mask is stored with y flipped against the series: aligned on load
    _check(s, (512, 512, 20))
    assert float(s["image"][0][s["mask"] == 5].mean()) == pytest.approx(89, abs=3)
    assert float(s["image"][0][s["mask"] == 52].mean()) == pytest.approx(177, abs=5)
    s = ds[1]
    _check(s, (122, 101, 30))
    assert s["meta"]["spacing"] == pytest.approx((3.0, 3.0, 3.0)) and s["meta"]["modality"] == "CT"


def test_unknown_option_named(tmp_path):
    _save(tmp_path / "images" / "a.nii.gz", _vol(0))
    with pytest.raises(TypeError, match="nifti_pairs: unknown options.*'spcing'"):
        create("nifti_pairs", tmp_path, label_dir=None, spcing=(1, 1, 1))


def test_registry_and_configs():
    yaml = pytest.importorskip("yaml")
    names = ["msd", "brats", "kits23", "totalsegmentator", "verse", "nifti_pairs"]
    assert set(names) <= set(list_datasets())
    for name in names:
        cfg = yaml.safe_load((REPO / "configs" / "dataset" / f"{name}.yaml").read_text())
        assert cfg["name"] == name and cfg["root"] == "???"
        assert set(cfg) >= {"name", "root", "split", "train_split", "options"}
