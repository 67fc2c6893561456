"""One grid rule for every loader that pairs an image with a voxel mask: the same mask stored
flipped is re-oriented onto the image grid exactly; a shifted mask is a per-sample error naming
both files and both affines. Parametrised over the loaders, so a new one is one entry here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medimg_bench.datasets import create
from medimg_bench.datasets.base import TableDataset
from medimg_bench.datasets.grid import align_to_image_grid, grid_problem
from medimg_bench.sample import SampleError

nib = pytest.importorskip("nibabel")

SHAPE = (6, 5, 4)


def _affine(origin=(-10.0, 20.0, 5.0)) -> np.ndarray:
    a = np.diag([0.8, 0.9, 2.5, 1.0])
    a[:3, 3] = origin
    return a


def _labels() -> np.ndarray:
    return np.random.default_rng(1).choice([0, 1, 2], size=SHAPE).astype(np.uint8)


def _save(path: Path, array: np.ndarray, affine: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, affine), str(path))


def _pair(root: Path, image: str, mask: str) -> None:
    _save(root / image, np.random.default_rng(0).normal(size=SHAPE).astype(np.float32), _affine())
    _save(root / mask, _labels(), _affine())


def _nifti_pairs(root: Path) -> tuple[object, Path]:
    _pair(root, "images/a.nii.gz", "labels/a.nii.gz")
    return create("nifti_pairs", root), root / "labels/a.nii.gz"


def _msd(root: Path) -> tuple[object, Path]:
    task = root / "Task09_Spleen"
    _pair(task, "imagesTr/spleen_1.nii.gz", "labelsTr/spleen_1.nii.gz")
    (task / "dataset.json").write_text(json.dumps({
        "name": "Spleen", "modality": {"0": "CT"}, "labels": {"0": "background", "1": "a", "2": "b"},
        "training": [{"image": "./imagesTr/spleen_1.nii.gz", "label": "./labelsTr/spleen_1.nii.gz"}],
        "test": [],
    }))
    return create("msd", task, split="train"), task / "labelsTr/spleen_1.nii.gz"


def _table(root: Path) -> tuple[object, Path]:
    _pair(root, "img/a.nii.gz", "seg/a.nii.gz")
    manifest = pd.DataFrame({"id": ["a"], "image": ["img/a.nii.gz"], "mask": ["seg/a.nii.gz"]})
    return TableDataset(manifest, root=root, image_column="image", mask_column="mask"), root / "seg/a.nii.gz"


def _synthetic_ct(root: Path) -> tuple[object, Path]:
    ds = create("synthetic_ct", cache_dir=root / "ct", n=2, shape=(16, 12, 8), split=None)
    return ds, ds.resolve(ds.manifest["mask"].iloc[0])


def _brats(root: Path) -> tuple[object, Path]:
    case = root / "BraTS2021_00000"
    for i, mod in enumerate(("t1", "t1ce", "t2", "flair")):
        _save(case / f"BraTS2021_00000_{mod}.nii.gz",
              np.random.default_rng(i).normal(size=SHAPE).astype(np.float32), _affine())
    _save(case / "BraTS2021_00000_seg.nii.gz", _labels(), _affine())
    return create("brats", root), case / "BraTS2021_00000_seg.nii.gz"


def _kits23(root: Path) -> tuple[object, Path]:
    case = root / "dataset" / "case_00000"
    _pair(case, "imaging.nii.gz", "segmentation.nii.gz")
    (root / "dataset" / "kits.json").write_text(json.dumps([{"case_id": "case_00000"}]))
    return create("kits23", root), case / "segmentation.nii.gz"


def _totalsegmentator(root: Path) -> tuple[object, Path]:
    _pair(root / "s0001", "ct.nii.gz", "segmentations/liver.nii.gz")  # one structure: 0/1/2 → >0
    (root / "meta.csv").write_text("image_id;split\ns0001;test\n")
    return create("totalsegmentator", root), root / "s0001/segmentations/liver.nii.gz"


def _abdomenatlas(root: Path) -> tuple[object, Path]:
    _pair(root / "BDMAP_00000001", "ct.nii.gz", "segmentations/liver.nii.gz")
    return create("abdomenatlas", root), root / "BDMAP_00000001/segmentations/liver.nii.gz"


LOADERS: dict[str, Callable[[Path], tuple[object, Path]]] = {
    "abdomenatlas": _abdomenatlas,
    "nifti_pairs": _nifti_pairs,
    "msd": _msd,
    "csv/TableDataset(mask_column=...)": _table,
    "synthetic_ct": _synthetic_ct,
    "brats": _brats,
    "kits23": _kits23,
    "totalsegmentator": _totalsegmentator,
}


def _rewrite(mask_path: Path, how: str) -> np.ndarray:
    """Rewrite the mask file flipped (same voxels, y axis stored reversed) or shifted by 7.5 mm;
    returns the mask as it is on the image grid."""
    img = nib.load(str(mask_path))
    data, affine = np.asarray(img.dataobj), img.affine.copy()
    if how == "flipped":
        flip = np.eye(4)
        flip[1, 1], flip[1, 3] = -1, data.shape[1] - 1
        _save(mask_path, np.ascontiguousarray(data[:, ::-1]), affine @ flip)
    else:
        affine[0, 3] += 7.5
        _save(mask_path, data, affine)
    return data


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_flipped_mask_is_reoriented_and_shifted_mask_fails_naming_both_files(tmp_path, loader):
    ds, mask_path = LOADERS[loader](tmp_path)
    before = ds[0]["mask"].numpy().copy()
    truth = _rewrite(mask_path, "flipped")
    after = ds[0]["mask"].numpy()
    np.testing.assert_array_equal(after, before)
    assert before.shape[-3:] == truth.shape
    _rewrite(mask_path, "shifted")
    with pytest.raises(SampleError) as err:
        ds[0]
    msg = str(err.value)
    # TotalSegmentator's mask is its folder of structure files (one affine, checked): named so
    named = mask_path.parent if loader in ("totalsegmentator", "abdomenatlas") else mask_path
    assert "not on the image grid" in msg and str(named) in msg
    image_path = str(ds.resolve(ds.manifest["image"].iloc[0])) if isinstance(
        ds.manifest["image"].iloc[0], str) else ""
    assert image_path in msg and "affine" in msg


def test_permuted_axes_and_shape_rules():
    m = np.random.default_rng(0).integers(0, 3, SHAPE)
    a = _affine()
    perm = np.zeros((4, 4))
    perm[0, 1] = perm[1, 0] = perm[2, 2] = perm[3, 3] = 1
    out = align_to_image_grid(m.transpose(1, 0, 2), a @ perm, a, image_shape=SHAPE,
                              sample_id="s", image_path="i.nii", mask_path="m.nii")
    np.testing.assert_array_equal(out, m)
    assert grid_problem(SHAPE, a, SHAPE, a) is None
    assert "shape mismatch" in grid_problem(SHAPE, a, (6, 5, 3), a)
    assert grid_problem((4, 4), None, (4, 4), None) is None
    assert "shape mismatch" in grid_problem((4, 4), None, (4, 5), None)
    spacing = a.copy()
    spacing[2, 2] = 3.0
    assert "not on the image grid" in grid_problem(SHAPE, a, SHAPE, spacing)


def test_datasets_check_lists_off_grid_pairs_from_headers(tmp_path):
    from medimg_bench.datasets.check import check_dataset

    ds, mask_path = _nifti_pairs(tmp_path)
    assert check_dataset(ds, read_pixels=False).ok
    _rewrite(mask_path, "flipped")  # re-orientable: not a problem
    assert check_dataset(ds, read_pixels=False).ok
    _rewrite(mask_path, "shifted")
    report = check_dataset(ds, read_pixels=False)
    split = next(iter(report.splits.values()))
    assert not report.ok and report.exit_code == 1 and len(split.off_grid) == 1
    assert str(mask_path) in report.format() and "off-grid" in report.format()


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_mask_errors_are_tagged_as_target_failures(tmp_path, loader):
    from medimg_bench.engine.loader import SafeDataset

    ds, mask_path = LOADERS[loader](tmp_path)
    Path(mask_path).write_bytes(b"")  # unreadable label file
    failure = SafeDataset(ds, fail_fast=False)[0]
    assert failure["stage"] == "target" and Path(mask_path).name in failure["error"]
    ds, mask_path = LOADERS[loader](tmp_path / "again")
    _rewrite(mask_path, "shifted")
    assert SafeDataset(ds, fail_fast=False)[0]["stage"] == "target"


# loaders that yield masks through the same code as a covered one (checked below, not assumed)
SAME_MASK_PATH = {"verse": "VerSeDataset"}
# masks with no geometry of their own to disagree with the image's
NO_MASK_GEOMETRY = {
    "siim_pneumothorax": "RLE strings decoded onto the DICOM's own pixel grid",
    "synthetic_cxr": "2D PNG masks: no affine; the shape is checked against the image",
    "busi": "2D image/mask files: no affine; the shape is checked against the image",
    "covid_semiseg": "2D image/mask files: no affine; the shape is checked against the image",
    "isic2018_task1": "2D image/mask files: no affine; the shape is checked against the image",
    "kvasir_seg": "2D image/mask files: no affine; the shape is checked against the image",
    "pranet_polyp": "2D image/mask files: no affine; the shape is checked against the image",
    "seg2d_folder": "2D image/mask files: no affine; the shape is checked against the image",
    "skm_tea": "tissue masks paired with HDF5 k-space / targets, which carry no affine: the shape is "
               "checked against the target (tests/datasets/test_mri_recon.py)",
    "ubench": "2D image/mask files, and Synapse/ACDC as U-Bench stores them (h5/npz arrays, no affine): "
              "the shape is checked against the image",
}
# a case list over another loader: the same class reads the same files, so its cases are that loader's
SUBSET_OF = {"touchstone": "totalsegmentator"}


def test_every_dataset_that_yields_masks_is_covered():
    from medimg_bench.datasets import volumetric
    from medimg_bench.datasets.volumetric import volume as _volumetric_utils
    from medimg_bench.registry import DATASETS

    with_masks = set(DATASETS.list(tag="segmentation")) | set(NO_MASK_GEOMETRY)
    covered = ({name.split("/")[0] for name in LOADERS} | set(SAME_MASK_PATH) | set(NO_MASK_GEOMETRY)
               | set(SUBSET_OF))
    missing = sorted(with_masks - covered)
    assert not missing, f"add a layout to LOADERS for {missing} (flipped + shifted mask cases)"
    for name, cls_name in SAME_MASK_PATH.items():
        cls = getattr(volumetric, cls_name)
        assert issubclass(cls, _volumetric_utils.VolumeDataset), name
        for method in ("load_arrays", "read_mask"):  # the grid rule is applied in these
            assert getattr(cls, method) is getattr(_volumetric_utils.VolumeDataset, method), (
                f"{name} overrides {method}: give it its own entry in LOADERS")


def test_touchstone_reads_its_cases_with_the_totalsegmentator_loader(tmp_path):
    """Touchstone lists TotalSegmentator cases: its dataset is the TotalSegmentator loader's class,
    so the flipped / shifted mask cases above cover it."""
    from medimg_bench.datasets.volumetric.touchstone import TOUCHSTONE_ORGANS

    whole, _ = _totalsegmentator(tmp_path)
    for organ in TOUCHSTONE_ORGANS.values():
        _pair(tmp_path / "s0001", "ct.nii.gz", f"segmentations/{organ}.nii.gz")
    (tmp_path / "cases.txt").write_text("s0001\n")
    sub = create("touchstone", tmp_path, cases=tmp_path / "cases.txt")
    assert type(sub) is type(whole) and list(sub.ids) == ["s0001"]
    assert sub[0]["mask"].shape[-3:] == whole[0]["image"].shape[-3:]


def test_read_target_decodes_picture_masks_through_the_one_decoder(tmp_path):
    """A PNG mask read by ``read_target`` (``csv``'s ``mask_column``) is decoded, not cast: 0/255
    is a 0/1 mask (was labels 0/255), labels stay labels, fractions and ambiguity are refused."""
    from PIL import Image

    from medimg_bench.datasets.grid import read_target
    from medimg_bench.datasets.masks import MaskDecodeError

    m = np.zeros((5, 6), np.uint8)
    m[1:3, 1:4] = 1
    Image.fromarray(m * 255).save(tmp_path / "b.png")
    Image.fromarray(np.where(m, 3, 0).astype(np.uint8) + (np.arange(30).reshape(5, 6) == 0)).save(tmp_path / "l.png")
    labels, meta = read_target(tmp_path / "b.png")
    assert labels.dtype == np.int64 and np.array_equal(labels, m) and meta["path"] == str(tmp_path / "b.png")
    assert set(np.unique(read_target(tmp_path / "l.png")[0])) == {0, 1, 3}
    with pytest.raises(MaskDecodeError, match=r"l\.png.*ambiguous") as info:
        read_target(tmp_path / "l.png", num_classes=2)
    assert info.value.stage == "target"
    np.save(tmp_path / "soft.npy", m * 0.5)
    with pytest.raises(MaskDecodeError, match=r"soft\.npy.*not whole numbers"):
        read_target(tmp_path / "soft.npy")
