"""Bad input for every registered dataset that reads files: each corruption of one sample's file
gives a per-sample failure naming that file, and the other samples still load.

A dataset is covered by adding a layout writer to ``LAYOUTS`` (a tiny copy of its official
layout with at least two samples, returning the dataset and the file of sample 0 to corrupt);
``test_every_registered_dataset_is_covered_or_excused`` fails for a new dataset until it is
added there or to ``EXCUSED`` with the reason.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medimg_bench.datasets import create, list_datasets
from medimg_bench.engine.loader import Failure, SafeDataset

nib = pytest.importorskip("nibabel")
PIL = pytest.importorskip("PIL.Image")

SHAPE = (6, 5, 4)


def _nii(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, np.diag([0.8, 0.9, 2.5, 1.0])), str(path))


def _png(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    PIL.fromarray(np.random.default_rng(seed).integers(0, 255, (8, 8)).astype(np.uint8)).save(path)


def _vol(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=SHAPE).astype(np.float32)


def _lab(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 3, SHAPE).astype(np.uint8)


def _csv(root: Path):
    for i in range(3):
        _png(root / f"img/{i}.png", i)
    (root / "labels.csv").write_text("path,label\nimg/0.png,a\nimg/1.png,b\nimg/2.png,a\n")
    return create("csv", root), root / "img/0.png"


def _nih(root: Path):
    names = ["00000001_000.png", "00000002_000.png", "00000003_000.png"]
    pd.DataFrame({"Image Index": names, "Finding Labels": ["No Finding"] * 3,
                  "Follow-up #": [0] * 3, "Patient ID": [1, 2, 3], "Patient Age": [50] * 3,
                  "Patient Gender": ["M"] * 3, "View Position": ["PA"] * 3}
                 ).to_csv(root / "Data_Entry_2017.csv", index=False)
    (root / "train_val_list.txt").write_text("")
    (root / "test_list.txt").write_text("\n".join(names) + "\n")
    for i, n in enumerate(names):
        _png(root / "images" / n, i)
    return create("nih_cxr14", root, split="test"), root / "images" / names[0]


def _image_folder(root: Path):
    for c in ("ADI", "TUM"):
        for j in range(2):
            _png(root / "CRC-VAL-HE-7K" / c / f"{c}-{j}.png", j)
    ds = create("image_folder", root, split="test", split_dirs={"test": "CRC-VAL-HE-7K"})
    return ds, ds.resolve(ds.manifest["path"].iloc[0]) if "path" in ds.manifest else None


def _nifti_pairs(root: Path):
    for i in range(3):
        _nii(root / f"images/c{i}.nii.gz", _vol(i))
        _nii(root / f"labels/c{i}.nii.gz", _lab(i))
    return create("nifti_pairs", root), root / "images/c0.nii.gz"


def _msd(root: Path):
    task = root / "Task09_Spleen"
    cases = ["spleen_1", "spleen_2"]
    for i, c in enumerate(cases):
        _nii(task / f"imagesTr/{c}.nii.gz", _vol(i))
        _nii(task / f"labelsTr/{c}.nii.gz", _lab(i))
    (task / "dataset.json").write_text(json.dumps({
        "name": "Spleen", "modality": {"0": "CT"}, "labels": {"0": "background", "1": "a", "2": "b"},
        "training": [{"image": f"./imagesTr/{c}.nii.gz", "label": f"./labelsTr/{c}.nii.gz"} for c in cases],
        "test": []}))
    return create("msd", task, split="train"), task / "imagesTr/spleen_1.nii.gz"


def _brats(root: Path):
    for k, case in enumerate(("BraTS2021_00000", "BraTS2021_00002")):
        for c, m in enumerate(("flair", "t1", "t1ce", "t2")):
            _nii(root / case / f"{case}_{m}.nii.gz", _vol(10 * c + k))
        _nii(root / case / f"{case}_seg.nii.gz",
             np.random.default_rng(k).choice([0, 1, 2, 4], SHAPE).astype(np.uint8))
    ds = create("brats", root)
    return ds, root / "BraTS2021_00000" / "BraTS2021_00000_flair.nii.gz"


def _synthetic_ct(root: Path):
    ds = create("synthetic_ct", cache_dir=root / "ct", n=2, shape=(16, 12, 8), split=None)
    return ds, ds.resolve(ds.manifest["image"].iloc[0])


def _synthetic_cxr(root: Path):
    ds = create("synthetic_cxr", cache_dir=root / "cxr", n=4, size=16, split=None)
    return ds, ds.resolve(ds.manifest["image"].iloc[0])


def _seg2d(root: Path):
    for d in ("images", "masks"):
        (root / d).mkdir(parents=True)
    for k in range(2):
        PIL.fromarray((np.arange(30).reshape(5, 6) * (k + 1) % 255).astype(np.uint8)).save(root / "images" / f"s{k}.png")
        PIL.fromarray(np.where(np.arange(30).reshape(5, 6) % 3, 255, 0).astype(np.uint8)).save(root / "masks" / f"s{k}.png")
    return create("seg2d_folder", root), root / "images" / "s0.png"


def _ubench(root: Path):
    # U-Bench's README layout; its masks go through the loader's own grey reader: corrupt one
    for k in range(2):
        for d in ("images", "masks/0"):
            (root / d).mkdir(parents=True, exist_ok=True)
        PIL.fromarray((np.arange(30).reshape(5, 6) * (k + 1) % 255).astype(np.uint8)).save(root / "images" / f"s{k}.png")
        PIL.fromarray(np.where(np.arange(30).reshape(5, 6) % 3, 255, 0).astype(np.uint8)).save(root / "masks" / "0" / f"s{k}.png")
    (root / "val.txt").write_text("s0\ns1\n")
    return create("ubench", root, name="busi"), root / "masks" / "0" / "s0.png"


def _skm_tea(root: Path):
    pytest.importorskip("h5py")
    from tests.datasets.test_mri_recon import make_skm_tea

    make_skm_tea(root)
    ds = create("skm_tea", root, split=None, echoes=[1])  # one sample per file
    return ds, root / "files_recon_calib-24" / "MTR_001.h5"


def _reasonknee(root: Path):
    # 3dreasonknee's zero-shot layout: one question, two volumes (one sample each)
    (root / "data" / "split_files").mkdir(parents=True)
    (root / "data" / "question_files").mkdir(parents=True)
    rows = ["patient_id,time,study_folder,series_folder,knee_side,image_filepath,label_filepath"]
    for i in range(2):
        _nii(root / f"v{i}.nii.gz", _vol(i))
        rows.append(f"p{i},00m,s,r,LEFT,v{i}.nii.gz,")
    (root / "data" / "split_files" / "test_split.csv").write_text("\n".join(rows) + "\n")
    (root / "data" / "question_files" / "questions_nobbox_guided.json").write_text('{"1": "Assess the ACL."}')
    return create("3dreasonknee", root), root / "v0.nii.gz"


LAYOUTS: dict[str, Callable[[Path], tuple[object, Path]]] = {
    "3dreasonknee": _reasonknee,
    "skm_tea": _skm_tea,
    "seg2d_folder": _seg2d,
    "ubench": _ubench,
    "csv": _csv,
    "nih_cxr14": _nih,
    "image_folder": _image_folder,
    "nifti_pairs": _nifti_pairs,
    "msd": _msd,
    "brats": _brats,
    "synthetic_ct": _synthetic_ct,
    "synthetic_cxr": _synthetic_cxr,
}

# Datasets not in the parametrised suite yet, with why. Their per-file errors are tested in
# their own modules (tests/datasets/test_*.py) on the same readers (datasets/io.py).
EXCUSED = {
    "builtin_real": "reads files shipped inside pydicom/nibabel, which a test must not corrupt",
    "medmnist": "one memory-mapped .npz per flag, no per-sample files; a corrupt archive fails at construction (test_medmnist)",
    "pcam": "HDF5 arrays, no per-sample files; corrupt files fail at construction (test_pathology)",
    "wsi_tiles": "tiles read from one slide per case through tiffslide (test_pathology)",
    "camelyon16": "the wsi_tiles tiler on the challenge layout; a corrupt slide fails at construction naming it "
                  "(test_pathology_camelyon16)",
    "hest1k": "HDF5 patch arrays and .h5ad per ST sample, read when the dataset is built; a corrupt file fails "
              "then naming it (test_pathology_hest1k)",
    "phase_eval_files": "labels only, no per-sample image files; the text files are read when the dataset is "
                        "built and a bad line fails then naming file and line (test_phase_eval_files)",
}
# same readers as a covered loader of the family (PNG/JPEG/DICOM through io.read_image, NIfTI
# through read_volume, frames/videos through the video readers): listed so the check below is
# explicit about what the parametrised cases reach.
SAME_READERS = {
    "chexpert": "csv", "mimic_cxr": "csv", "rsna_pneumonia": "csv", "siim_pneumothorax": "csv",
    "vindr_cxr": "csv", "mhist": "image_folder", "kits23": "nifti_pairs",
    "totalsegmentator": "nifti_pairs", "abdomenatlas": "nifti_pairs", "touchstone": "nifti_pairs", "verse": "nifti_pairs", "cholec80": "video (test_video)",
    "pitvis": "video (test_video)", "video_frames": "video (test_video)",
    "vqa_rad": "csv", "slake": "csv", "pathvqa": "csv", "pmc_vqa": "csv", "omnimedvqa": "csv",
    "gmai_mmbench": "csv", "medxpertqa_mm": "csv", "medframeqa": "csv", "iu_xray": "csv",
    "mimic_cxr_reports": "csv", "synthetic_vqa": "synthetic_cxr", "omnibrainbench": "csv",
    "cxreasonbench": "csv", "rexgradient": "csv", "spinebench": "csv",
    "fastmri": "skm_tea (the shared HDF5 k-space loader, datasets/mri_recon/base.py; test_mri_recon)",
    # datasets/seg2d layouts: the seg2d_folder loader and readers with other folder names
    "covid_semiseg": "seg2d_folder", "pranet_polyp": "seg2d_folder", "kvasir_seg": "seg2d_folder",
    "isic2018_task1": "seg2d_folder", "busi": "seg2d_folder",
}


def _zero_bytes(p: Path) -> None:
    p.write_bytes(b"")


def _truncated(p: Path) -> None:
    data = p.read_bytes()
    if p.name.endswith(".gz"):  # keep a valid gzip stream of a truncated NIfTI
        raw = gzip.decompress(data)
        p.write_bytes(gzip.compress(raw[: len(raw) // 3]))
    else:
        p.write_bytes(data[: len(data) // 3])


def _wrong_dtype(p: Path) -> None:
    if p.name.endswith((".nii", ".nii.gz")):  # a complex-valued volume is not an image
        nib.save(nib.Nifti1Image(np.zeros(SHAPE, np.complex64), np.eye(4)), str(p))
    else:
        p.write_text("this is text, not an image\n")


def _non_finite(p: Path) -> None:
    if p.name.endswith((".nii", ".nii.gz")):
        img = nib.load(str(p))
        a = np.asarray(img.dataobj, dtype=np.float32).copy()
        a.flat[0], a.flat[1] = np.nan, np.inf
        nib.save(nib.Nifti1Image(a, img.affine), str(p))
    else:  # PNG holds no NaN: a float TIFF does
        pytest.skip("PNG cannot hold NaN/Inf; the NIfTI loaders cover this case")


def _two_d(p: Path) -> None:
    if p.name.endswith((".nii", ".nii.gz")):
        nib.save(nib.Nifti1Image(np.zeros((6, 5), np.float32), np.eye(4)), str(p))
    else:
        pytest.skip("a 2D file is what the 2D loaders expect")


def _directory(p: Path) -> None:
    p.unlink()
    p.mkdir()
    (p / "not_an_image.txt").write_text("x")


def _unreadable(p: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: file permissions do not stop reads")
    p.chmod(0)


CORRUPTIONS = {
    "zero_byte": _zero_bytes, "truncated": _truncated, "wrong_dtype": _wrong_dtype,
    "nan_inf": _non_finite, "2d_for_3d": _two_d, "directory": _directory,
    "no_permission": _unreadable,
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_corrupt_file_fails_its_sample_naming_the_file(tmp_path, name, kind):
    ds, path = LAYOUTS[name](tmp_path)
    assert len(ds) >= 2
    if name.startswith("synthetic"):  # do not corrupt the shared cache: work on a private copy
        assert str(tmp_path) in str(path)
    CORRUPTIONS[kind](Path(path))
    safe = SafeDataset(ds, fail_fast=False)
    first = safe[0]
    assert isinstance(first, Failure), f"{name}/{kind}: the corrupt sample loaded without error"
    assert Path(path).name in first["error"], first["error"]
    assert first["stage"] in ("load", "target")
    for i in range(1, len(ds)):
        assert not isinstance(safe[i], Failure), f"{name}/{kind}: sample {i} failed too"


def test_every_registered_dataset_is_covered_or_excused():
    known = set(LAYOUTS) | set(EXCUSED) | set(SAME_READERS)
    missing = sorted(set(list_datasets()) - known)
    assert not missing, f"add a layout to LAYOUTS (or a reason to EXCUSED) for {missing}"
