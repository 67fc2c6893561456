"""Mask formats hospitals export: DICOM SEG (highdicom), NRRD and MHA (SimpleITK), through the
one grid rule, from ``nifti_pairs`` folders and ``model=predictions`` folders."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.datasets.mask_formats import label_stem, place_on_grid, read_label_file
from medimg_bench.registry import create_dataset
from medimg_bench.sample import SampleError

nib = pytest.importorskip("nibabel")
sitk = pytest.importorskip("SimpleITK")
CLASSES = ["background", "spleen", "liver"]


def _ct_series(folder: Path, n: int = 4, size: int = 32) -> list:
    """A small axial CT series from pydicom's CT_small.dcm; slice i has a bright square (the
    marker the masks below label) at rows 4..9+i, cols 10..19."""
    import pydicom
    from pydicom.data import get_testdata_file
    from pydicom.uid import generate_uid

    base = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    series, study, frame = generate_uid(), base.StudyInstanceUID, generate_uid()
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        ds = copy.deepcopy(base)
        px = np.full((size, size), 100, dtype=np.int16)
        px[4:10 + i, 10:20] = 1000
        ds.Rows = ds.Columns = size
        ds.PixelData = px.tobytes()
        ds.SOPInstanceUID = generate_uid()
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.SeriesInstanceUID, ds.StudyInstanceUID, ds.FrameOfReferenceUID = series, study, frame
        ds.InstanceNumber = i + 1
        ds.ImagePositionPatient = [-20.0, -30.0, 10.0 + 2.5 * i]
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.PixelSpacing = [0.8, 0.7]
        ds.SliceThickness = ds.SpacingBetweenSlices = 2.5  # CT_small says 5.0 for both
        ds.save_as(folder / f"{i:03d}.dcm")
        out.append(ds)
    return out


def _nifti_from_series(series_dir: Path, path: Path) -> tuple[np.ndarray, np.ndarray]:
    from medimg_bench.datasets.io import read_dicom_series

    arr, meta = read_dicom_series(series_dir)
    nib.save(nib.Nifti1Image(np.asarray(arr, dtype=np.float32), meta["affine"]), str(path))
    return np.asarray(arr), meta["affine"]


def _write_seg(source: list, path: Path, segments: dict[str, np.ndarray]) -> None:
    import highdicom as hd
    from pydicom.sr.codedict import codes
    from pydicom.uid import generate_uid

    descs = [hd.seg.SegmentDescription(
        segment_number=i + 1, segment_label=name, segmented_property_category=codes.SCT.Organ,
        segmented_property_type=codes.SCT.Organ, algorithm_type=hd.seg.SegmentAlgorithmTypeValues.MANUAL)
        for i, name in enumerate(segments)]
    seg = hd.seg.Segmentation(
        source_images=source, pixel_array=np.stack(list(segments.values()), -1).astype(bool),
        segmentation_type=hd.seg.SegmentationTypeValues.BINARY, segment_descriptions=descs,
        series_instance_uid=generate_uid(), series_number=100, sop_instance_uid=generate_uid(),
        instance_number=1, manufacturer="test", manufacturer_model_name="test", software_versions="0",
        device_serial_number="1")
    seg.save_as(path)


@pytest.fixture
def seg_case(tmp_path):
    pytest.importorskip("highdicom", reason="DICOM SEG is read with highdicom (the [dicom] extra)")
    source = _ct_series(tmp_path / "series")
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    image, affine = _nifti_from_series(tmp_path / "series", tmp_path / "images" / "case1.nii.gz")
    marker = np.zeros((4, 32, 32), bool)
    for i in range(4):
        marker[i, 4:10 + i, 10:20] = True
    liver = marker.copy()
    liver[0] = False  # an empty first frame: highdicom omits it, the reader must put the rest back
    spleen = np.zeros_like(marker)
    spleen[2:, 20:24, 2:6] = True
    _write_seg(source, tmp_path / "labels" / "case1.dcm", {"Liver": liver, "Spleen": spleen})
    return tmp_path, image, liver, spleen


def test_dicom_seg_in_a_labels_folder(seg_case):
    root, image, liver, spleen = seg_case
    ds = create_dataset("nifti_pairs", root=root, classes=CLASSES)
    s = ds[0]
    mask, img = s["mask"].numpy(), s["image"][0].numpy()
    # the liver segment sits exactly on the marker voxels of the frames it covers
    hot = img == img.max()  # the marker (1000 stored, rescaled to HU)
    assert (mask == 2).sum() == liver.sum() and np.all(hot[mask == 2])
    assert (mask == 1).sum() == spleen.sum()
    assert (hot & (mask != 2)).sum() == 6 * 10  # frame 0's marker: not in the SEG


def test_dicom_seg_segment_map_by_number(seg_case):
    root, _, liver, spleen = seg_case
    ds = create_dataset("nifti_pairs", root=root, classes=CLASSES, segment_map={1: "spleen", 2: 2})
    mask = ds[0]["mask"].numpy()
    assert (mask == 1).sum() == liver.sum() and (mask == 2).sum() == spleen.sum()


def test_dicom_seg_unmatched_segment_names_the_file(seg_case):
    root, *_ = seg_case
    ds = create_dataset("nifti_pairs", root=root, classes=["background", "kidney", "liver"])
    with pytest.raises(SampleError, match=r"case1\.dcm") as err:
        ds[0]
    assert "Spleen" in str(err.value) and "segment_map" in str(err.value)


def test_dicom_seg_as_predictions(seg_case):
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.registry import create_model

    root, *_ = seg_case
    ds = create_dataset("nifti_pairs", root=root, classes=CLASSES)
    model = create_model("predictions", root=root / "labels")
    model.bind_dataset(ds)
    res = evaluate(model, ds, task="segmentation", metrics={"dice": {}}, device="cpu", progress=False, n_resamples=10)
    dice = res.summary["metrics"]["dice"]["per_class"]
    assert dice["liver"]["mean"] == pytest.approx(1.0) and dice["spleen"]["mean"] == pytest.approx(1.0)


def _sitk_label(arr_xyz: np.ndarray, path: Path, *, spacing, origin, direction) -> None:
    img = sitk.GetImageFromArray(np.ascontiguousarray(np.transpose(arr_xyz, (2, 1, 0))))
    img.SetSpacing(spacing)
    img.SetOrigin(origin)
    img.SetDirection(direction)
    sitk.WriteImage(img, str(path))


@pytest.mark.parametrize("suffix", [".nrrd", ".mha"])
def test_nrrd_and_mha_labels_and_images(tmp_path, suffix):
    rng = np.random.default_rng(0)
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    lab = rng.integers(0, 3, (6, 5, 4)).astype(np.uint8)
    img = rng.normal(size=(6, 5, 4)).astype(np.float32)
    # LPS direction with a flipped first axis; the NIfTI image says the same in RAS
    spacing, origin, direction = (0.8, 0.9, 2.5), (10.0, -5.0, 3.0), (-1, 0, 0, 0, 1, 0, 0, 0, 1)
    affine = np.array([[0.8, 0, 0, -10.0], [0, -0.9, 0, 5.0], [0, 0, 2.5, 3.0], [0, 0, 0, 1]])
    nib.save(nib.Nifti1Image(img, affine), str(tmp_path / "images" / "a.nii.gz"))
    _sitk_label(lab, tmp_path / "labels" / f"a{suffix}", spacing=spacing, origin=origin, direction=direction)
    # a second case whose image is itself NRRD/MHA, and whose label is stored with the z axis flipped
    _sitk_label(img, tmp_path / "images" / f"b{suffix}", spacing=spacing, origin=origin, direction=direction)
    flipped_origin = (origin[0], origin[1], origin[2] + 2.5 * 3)
    _sitk_label(lab[:, :, ::-1], tmp_path / "labels" / f"b{suffix}", spacing=spacing, origin=flipped_origin,
                direction=(-1, 0, 0, 0, 1, 0, 0, 0, -1))
    arr, meta = read_label_file(tmp_path / "labels" / f"a{suffix}")
    np.testing.assert_allclose(meta["affine"], affine)
    ds = create_dataset("nifti_pairs", root=tmp_path, classes=["bg", "x", "y"])
    assert ds.ids == ["a", "b"]
    for i in range(2):
        s = ds[i]
        np.testing.assert_array_equal(s["mask"].numpy(), lab)
        np.testing.assert_allclose(s["image"][0].numpy(), img)


def test_off_grid_nrrd_is_a_target_error_naming_both(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    nib.save(nib.Nifti1Image(np.zeros((6, 5, 4), np.float32), np.eye(4)), str(tmp_path / "images" / "a.nii.gz"))
    _sitk_label(np.zeros((6, 5, 4), np.uint8), tmp_path / "labels" / "a.nrrd", spacing=(1.0, 1.0, 1.0),
                origin=(0.5, 0.0, 0.0), direction=(-1, 0, 0, 0, -1, 0, 0, 0, 1))
    ds = create_dataset("nifti_pairs", root=tmp_path)
    with pytest.raises(SampleError, match=r"a\.nrrd"):
        ds[0]


def test_place_on_grid_and_stems():
    lab = np.arange(24).reshape(2, 3, 4)
    img_aff = np.diag([1.0, 2.0, 3.0, 1.0])
    aff = img_aff.copy()
    aff[:3, 3] = [1.0, 2.0, 6.0]  # offset (1, 1, 2) voxels
    out, a = place_on_grid(lab, aff, (5, 5, 7), img_aff)
    np.testing.assert_array_equal(out[1:3, 1:4, 2:6], lab)
    assert out.sum() == lab.sum() and np.array_equal(a, img_aff)
    rotated = aff.copy()
    rotated[:3, :3] = [[0, 2.0, 0], [1.0, 0, 0], [0, 0, 3.0]]  # not a lattice map of the image
    assert place_on_grid(lab, rotated, (5, 5, 7), img_aff)[0] is lab
    assert label_stem("x.nii.gz") == "x" and label_stem("y.nrrd") == "y" and label_stem("z.dcm") == "z"


def _write_rtstruct(path: Path, rois: dict[str, list[list[tuple[float, float, float]]]]) -> None:
    """A minimal RT Structure Set: one ROI per name, closed planar contours in LPS mm."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.sequence import Sequence as Seq
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.481.3"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID, ds.Modality = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID, "RTSTRUCT"
    ds.StructureSetROISequence, ds.ROIContourSequence = Seq(), Seq()
    for n, (name, contours) in enumerate(rois.items(), start=1):
        roi = Dataset()
        roi.ROINumber, roi.ROIName = n, name
        ds.StructureSetROISequence.append(roi)
        item = Dataset()
        item.ReferencedROINumber = n
        item.ContourSequence = Seq()
        for pts in contours:
            c = Dataset()
            c.ContourGeometricType, c.NumberOfContourPoints = "CLOSED_PLANAR", len(pts)
            c.ContourData = [float(v) for p in pts for v in p]
            item.ContourSequence.append(c)
        ds.ROIContourSequence.append(item)
    ds.save_as(path, enforce_file_format=True)


def _rect(i: int, r0: float, r1: float, c0: float, c1: float) -> list[tuple[float, float, float]]:
    """A rectangle on slice i of _ct_series in LPS mm (pixel (r, c) at IPP + c·0.7 x + r·0.8 y)."""
    z = 10.0 + 2.5 * i
    return [(-20 + c * 0.7, -30 + r * 0.8, z) for r, c in ((r0, c0), (r0, c1), (r1, c1), (r1, c0))]


def test_rtstruct_rasterised_onto_the_image_grid(tmp_path):
    _ct_series(tmp_path / "series")
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    _nifti_from_series(tmp_path / "series", tmp_path / "images" / "case1.nii.gz")
    liver = [_rect(i, 3.5, 9.5 + i, 9.5, 19.5) for i in range(4)] + [_rect(2, 5.5, 6.5, 12.5, 14.5)]  # + a hole
    spleen = [_rect(3, 20.5, 23.5, 1.5, 5.5)]
    _write_rtstruct(tmp_path / "labels" / "case1.dcm", {"Liver": liver, "Spleen": spleen})
    s = create_dataset("nifti_pairs", root=tmp_path, classes=CLASSES)[0]
    mask, img = s["mask"].numpy(), s["image"][0].numpy()
    hot = img == img.max()
    assert (mask == 2).sum() == hot.sum() - 2 and np.all(hot[mask == 2])  # the hole: 2 voxels
    assert (mask == 1).sum() == 3 * 4
    bad = {"Liver": [[(-20.0, -30.0, 10.0), (0.0, -30.0, 20.0), (0.0, 0.0, 10.0)]]}  # not in one slice
    _write_rtstruct(tmp_path / "labels" / "case1.dcm", bad)
    with pytest.raises(SampleError, match=r"case1\.dcm.*not in one slice|not in one slice.*case1\.dcm"):
        create_dataset("nifti_pairs", root=tmp_path, classes=CLASSES)[0]


def test_dicom_seg_geometry_equals_highdicom_get_volume(seg_case):
    import highdicom as hd

    from medimg_bench.datasets.mask_formats.dicom_seg import read_dicom_seg

    root, *_ = seg_case
    path = root / "labels" / "case1.dcm"
    labels, meta = read_dicom_seg(path, classes=CLASSES)
    vol = hd.seg.segread(str(path)).get_volume(combine_segments=False)
    ref = np.asarray(vol.array)
    expect = np.zeros(ref.shape[:3], np.int64)
    expect[ref[..., 1] > 0] = 1  # segment 2 "Spleen" -> class 1
    expect[ref[..., 0] > 0] = 2  # segment 1 "Liver" -> class 2 (higher class wins)
    hd_ras = np.asarray(vol.affine, dtype=np.float64).copy()
    hd_ras[:2] *= -1
    # highdicom may order the slices the other way: compare on one grid, through the affines
    on_ours, aff = place_on_grid(expect, hd_ras, labels.shape, meta["affine"])
    assert aff is meta["affine"] or np.allclose(aff, meta["affine"])
    np.testing.assert_array_equal(on_ours, labels)
    assert (labels == 2).sum() == (ref[..., 0] > 0).sum() > 0
