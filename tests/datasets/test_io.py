"""Readers in medimg_bench.datasets.io: real files (shared CT, pydicom's and nibabel's test files),
tiny files written here, and bad input (each error names the file and the problem)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.datasets.io import (
    ImageReadError,
    read_dicom,
    read_dicom_series,
    read_hdf5,
    read_image,
    read_nifti,
    read_nifti_header,
    read_numpy,
    read_png,
    read_tiff,
    read_video,
    reorient,
    to_channel_first,
)

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "totalseg_ct"


def _shared(name: str) -> Path:
    p = SHARED / name
    if not p.exists():
        pytest.skip(f"real data {p} absent (needs ../shared/data from the project root)")
    return p


# -- real DICOM series vs its aligned NIfTI mask ------------------------------------------------
@pytest.fixture(scope="module")
def real_series():
    d = _shared("dicom")
    return read_dicom_series(d)


def test_real_series_geometry(real_series):
    array, meta = real_series
    assert array.shape == (512, 512, 20) and array.dtype == np.float32
    np.testing.assert_allclose(
        meta["spacing"], (0.9765625, 0.9765625, 2.0)
    )  # not SliceThickness (3)
    assert meta["orientation"] == ("L", "P", "S")
    assert meta["modality"] == "CT" and meta["n_slices"] == 20
    assert array.min() == -1024.0  # RescaleIntercept applied (stored values are unsigned)
    # first slice is the most inferior: z ascends along k
    assert meta["affine"][2, 3] == pytest.approx(-804.5) and meta["affine"][2, 2] == pytest.approx(
        2.0
    )


def test_real_series_matches_nifti_mask_known_answers(real_series):
    nib = pytest.importorskip("nibabel")
    seg_path = _shared("dicom_seg.nii.gz")
    ct, ras_affine = reorient(real_series[0], real_series[1]["affine"], "RAS")
    seg, smeta = read_nifti(seg_path, orientation="RAS")
    assert seg.shape == ct.shape
    np.testing.assert_allclose(smeta["affine"], ras_affine, atol=1e-4)
    assert nib.aff2axcodes(smeta["affine"]) == ("R", "A", "S")
    # the README's known answers: only right if slice order and flips are right
    assert ct[seg == 5].mean() == pytest.approx(89, abs=3)  # liver
    assert ct[seg == 52].mean() == pytest.approx(177, abs=5)  # contrast-filled aorta
    assert (ct[seg == 32] > 150).mean() == pytest.approx(0.71, abs=0.02)  # T12
    # the mask as stored has its y axis flipped against the series: misaligned means wrong values
    raw_seg = np.asanyarray(nib.load(str(seg_path)).dataobj)
    assert abs(real_series[0][raw_seg == 5].mean() - 89) > 20


def test_real_series_sitk_agrees(real_series):
    pytest.importorskip("SimpleITK")
    array, meta = read_dicom_series(SHARED / "dicom", backend="sitk")
    np.testing.assert_array_equal(array, real_series[0])
    np.testing.assert_allclose(meta["affine"], real_series[1]["affine"], atol=1e-5)


def test_real_ct_nifti_with_seg():
    ct, cmeta = read_nifti(_shared("ct.nii.gz"))
    seg, smeta = read_nifti(_shared("seg.nii.gz"))
    assert ct.shape == seg.shape == (122, 101, 30)
    np.testing.assert_allclose(cmeta["spacing"], (3.0, 3.0, 3.0))
    np.testing.assert_allclose(cmeta["affine"], smeta["affine"])
    assert cmeta["orientation"] == ("R", "A", "S")
    assert len(np.unique(seg)) - 1 == 41
    header = read_nifti_header(SHARED / "ct.nii.gz")
    assert header["shape"] == (122, 101, 30) and header["spacing"] == cmeta["spacing"]


# -- synthetic DICOM series ----------------------------------------------------------------------
def _write_series(
    directory: Path,
    volume: np.ndarray,
    *,
    iop,
    origin,
    step,
    pixel_spacing,
    slopes=None,
    series_uid="1.2.3.4.5",
    names=None,
) -> None:
    """Write ``volume`` (i, j, k) = (cols, rows, slices) as one DICOM file per slice."""
    pydicom = pytest.importorskip("pydicom")
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    directory.mkdir(parents=True, exist_ok=True)
    n = volume.shape[2]
    for k in range(n):
        slope, intercept = slopes[k] if slopes else (1.0, -1024.0)
        stored = np.rint((volume[:, :, k].T - intercept) / slope).astype(np.int16)
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.2"
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = pydicom.Dataset()
        ds.file_meta = meta
        ds.SOPClassUID = meta.MediaStorageSOPClassUID
        ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
        ds.Modality = "CT"
        ds.PatientID = "P1"
        ds.StudyInstanceUID = "1.2.3"
        ds.SeriesInstanceUID = series_uid
        ds.InstanceNumber = n - k  # deliberately not the geometric order
        ds.ImageOrientationPatient = [float(v) for v in iop]
        ds.ImagePositionPatient = [float(v) for v in np.asarray(origin) + k * np.asarray(step)]
        ds.PixelSpacing = [float(v) for v in pixel_spacing]
        ds.SliceThickness = 5.0  # wrong on purpose: spacing must come from positions
        ds.Rows, ds.Columns = stored.shape
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = "MONOCHROME2"
        ds.BitsAllocated = ds.BitsStored = 16
        ds.HighBit = 15
        ds.PixelRepresentation = 1
        ds.RescaleSlope = slope
        ds.RescaleIntercept = intercept
        ds.PixelData = stored.tobytes()
        name = names[k] if names else f"IM{(k * 7919) % 1000:04d}"
        ds.save_as(directory / name, enforce_file_format=True)


def _expected_ras_affine(iop, origin, step, pixel_spacing) -> np.ndarray:
    lps = np.eye(4)
    lps[:3, 0] = np.asarray(iop[:3]) * pixel_spacing[1]
    lps[:3, 1] = np.asarray(iop[3:]) * pixel_spacing[0]
    lps[:3, 2] = step
    lps[:3, 3] = origin
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps


@pytest.mark.parametrize(
    "iop, step",
    [
        ([1, 0, 0, 0, 1, 0], [0, 0, 2.5]),  # axial, feet to head
        ([1, 0, 0, 0, 1, 0], [0, 0, -2.5]),  # axial, written head to feet
        ([0, 1, 0, 0, 0, -1], [1.5, 0, 0]),  # sagittal
        ([0.8, 0.6, 0, -0.6, 0.8, 0], [0, 0, 3.0]),  # oblique in-plane rotation
    ],
)
def test_synthetic_series_order_spacing_affine(tmp_path, iop, step):
    rng = np.random.default_rng(0)
    volume = rng.integers(-1000, 1000, size=(6, 5, 4)).astype(np.float32)
    origin, ps = np.array([10.0, -20.0, 30.0]), (0.7, 0.9)  # (row spacing, column spacing)
    slopes = [(1.0, -1024.0), (2.0, -1000.0), (1.0, 0.0), (0.5, -10.0)]
    volume = np.stack(
        [np.rint((volume[..., k] - b) / a) * a + b for k, (a, b) in enumerate(slopes)], -1
    )
    _write_series(
        tmp_path / "s", volume, iop=iop, origin=origin, step=step, pixel_spacing=ps, slopes=slopes
    )
    array, meta = read_dicom_series(tmp_path / "s")
    expected_affine = _expected_ras_affine(iop, origin, step, ps)
    if np.dot(np.cross(iop[:3], iop[3:]), step) < 0:  # sorted along the normal: order reverses
        volume = volume[:, :, ::-1]
        expected_affine[:3, 3] = expected_affine[:3, 3] + 3 * expected_affine[:3, 2]
        expected_affine[:3, 2] *= -1
    np.testing.assert_array_equal(array, volume)
    np.testing.assert_allclose(meta["affine"], expected_affine, atol=1e-6)
    np.testing.assert_allclose(meta["spacing"], (0.9, 0.7, np.linalg.norm(step)))
    assert meta["patient_id"] == "P1" and meta["series_uid"] == "1.2.3.4.5"
    try:
        import SimpleITK  # noqa: F401
    except ImportError:
        return
    else:
        s_array, s_meta = read_dicom_series(tmp_path / "s", backend="sitk")
        np.testing.assert_allclose(s_array, array)
        np.testing.assert_allclose(s_meta["affine"], meta["affine"], atol=1e-4)


def test_series_bad_input(tmp_path):
    volume = np.zeros((4, 4, 4), np.float32)
    kw = dict(iop=[1, 0, 0, 0, 1, 0], origin=[0, 0, 0], step=[0, 0, 2.0], pixel_spacing=(1, 1))
    _write_series(tmp_path / "gap", volume, **kw)
    (tmp_path / "gap" / f"IM{7919 % 1000:04d}").unlink()  # slice k=1
    with pytest.raises(ImageReadError, match="not uniform.*missing slices"):
        read_dicom_series(tmp_path / "gap")
    _write_series(tmp_path / "two", volume, **kw)
    _write_series(
        tmp_path / "two", volume, **kw, series_uid="9.9", names=[f"B{k}" for k in range(4)]
    )
    with pytest.raises(ImageReadError, match="2 series"):
        read_dicom_series(tmp_path / "two")
    arr, meta = read_dicom_series(tmp_path / "two", series_uid="9.9")
    assert arr.shape == (4, 4, 4) and meta["series_uid"] == "9.9"
    _write_series(tmp_path / "garbage", volume, **kw)
    (tmp_path / "garbage" / "junk.dcm").write_bytes(b"\x00\x01garbage" * 50)
    with pytest.raises(ImageReadError, match=r"junk\.dcm.*(not a valid DICOM|corrupt)"):
        read_dicom_series(tmp_path / "garbage")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImageReadError, match="empty"):
        read_dicom_series(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_dicom_series(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="backend"):
        read_dicom_series(tmp_path / "gap", backend="gdcm")


# -- shipped test files of pydicom and nibabel ---------------------------------------------------
@pytest.mark.parametrize("name, modality", [("CT_small.dcm", "CT"), ("MR_small.dcm", "MR")])
def test_pydicom_test_files(name, modality):
    pydicom = pytest.importorskip("pydicom")
    from pydicom.data import get_testdata_file

    path = get_testdata_file(name)
    if path is None:
        pytest.skip(f"pydicom test file {name} not shipped")
    ds = pydicom.dcmread(path)
    array, meta = read_image(path)
    expected = ds.pixel_array * float(getattr(ds, "RescaleSlope", 1)) + float(
        getattr(ds, "RescaleIntercept", 0)
    )
    np.testing.assert_allclose(array, expected)
    assert meta["modality"] == modality
    assert meta["spacing"] == tuple(float(v) for v in ds.PixelSpacing)
    assert to_channel_first(array, meta).shape == (1, *array.shape)


@pytest.mark.parametrize("name", ["anatomical.nii", "example4d.nii.gz", "example_nifti2.nii.gz"])
def test_nibabel_test_files(name):
    nib = pytest.importorskip("nibabel")
    from nibabel.testing import data_path

    path = Path(data_path) / name
    if not path.exists():
        pytest.skip(f"nibabel test file {name} not shipped")
    img = nib.load(str(path))
    array, meta = read_nifti(path)
    assert array.shape == img.shape
    np.testing.assert_allclose(meta["spacing"], img.header.get_zooms()[:3], rtol=1e-5)
    np.testing.assert_allclose(meta["affine"], img.affine)
    ras, rmeta = read_nifti(path, orientation="RAS")
    assert rmeta["orientation"] == ("R", "A", "S") and ras.shape[3:] == array.shape[3:]


# -- reorientation keeps every voxel at its world position -------------------------------------
@settings(max_examples=25, deadline=None)
@given(
    perm=st.permutations([0, 1, 2]),
    flips=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    target=st.sampled_from(["RAS", "LPS", "PIR", "SAL"]),
)
def test_reorient_preserves_world_positions(perm, flips, target):
    shape = (3, 4, 5)
    array = np.arange(np.prod(shape)).reshape(shape)
    affine = np.eye(4)
    affine[:3, :3] = (
        np.eye(3)[:, list(perm)] * np.array([-1 if f else 1 for f in flips]) * [1.0, 2.0, 3.0]
    )
    affine[:3, 3] = [5.0, -7.0, 11.0]
    out, new_affine = reorient(array, affine, target)
    from nibabel import aff2axcodes

    assert "".join(aff2axcodes(new_affine)) == target
    for idx in [(0, 0, 0), (2, 3, 4), (1, 2, 3)]:
        world = affine @ [*idx, 1]
        new_idx = np.rint(np.linalg.inv(new_affine) @ world)[:3].astype(int)
        assert out[tuple(new_idx)] == array[idx]


# -- 2D images, TIFF, HDF5, NumPy ---------------------------------------------------------------
def test_png_jpeg_bit_depths(tmp_path):
    from PIL import Image

    grey16 = (np.arange(12 * 10, dtype=np.uint16).reshape(12, 10) * 500).astype(np.uint16)
    Image.fromarray(grey16).save(tmp_path / "a16.png")
    a, meta = read_image(tmp_path / "a16.png")
    assert a.dtype == np.uint16 and a.max() == grey16.max() > 255
    np.testing.assert_array_equal(a, grey16)
    grey8 = np.arange(120, dtype=np.uint8).reshape(12, 10)
    Image.fromarray(grey8).save(tmp_path / "a8.png")
    np.testing.assert_array_equal(read_png(tmp_path / "a8.png")[0], grey8)
    rgb = np.zeros((12, 10, 3), np.uint8)
    rgb[..., 0] = 200
    Image.fromarray(rgb).save(tmp_path / "c.jpg", quality=95)
    a, meta = read_image(tmp_path / "c.jpg")
    t = to_channel_first(a, meta)
    assert t.shape == (3, 12, 10) and abs(float(t[0].mean()) - 200) < 3 and float(t[2].mean()) < 5


def test_tiff(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    stack = np.arange(2 * 6 * 5, dtype=np.uint16).reshape(2, 6, 5) * 1000
    tifffile.imwrite(tmp_path / "s.tif", stack)
    a, meta = read_image(tmp_path / "s.tif")
    np.testing.assert_array_equal(a, stack)
    np.testing.assert_array_equal(read_tiff(tmp_path / "s.tif", page=1)[0], stack[1])
    with pytest.raises(ImageReadError, match="page 5 out of range"):
        read_tiff(tmp_path / "s.tif", page=5)
    rgb = np.full((6, 5, 3), 7, np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tiff", rgb, photometric="rgb")
    a, meta = read_tiff(tmp_path / "rgb.tiff")
    assert meta["mode"] == "RGB" and to_channel_first(a, meta).shape == (3, 6, 5)


def test_hdf5(tmp_path):
    h5py = pytest.importorskip("h5py")
    x = np.arange(4 * 3 * 3, dtype=np.uint8).reshape(4, 3, 3)
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["x"] = x
        f["grp/y"] = np.arange(4)
    a, meta = read_hdf5(tmp_path / "d.h5", key="x", index=2)
    np.testing.assert_array_equal(a, x[2])
    assert meta["shape"] == (4, 3, 3)
    np.testing.assert_array_equal(read_hdf5(tmp_path / "d.h5", key="grp/y")[0], np.arange(4))
    with pytest.raises(ImageReadError, match=r"d\.h5.*no dataset 'z'.*grp/y"):
        read_hdf5(tmp_path / "d.h5", key="z")
    with pytest.raises(ImageReadError, match="pass key="):
        read_image(tmp_path / "d.h5")


def test_numpy_mmap_and_no_pickle(tmp_path):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.save(tmp_path / "a.npy", x)
    a, _ = read_numpy(tmp_path / "a.npy")
    assert isinstance(a, np.memmap)
    np.testing.assert_array_equal(a, x)
    np.savez(tmp_path / "b.npz", train_images=x, train_labels=np.arange(2))
    np.testing.assert_array_equal(
        read_numpy(tmp_path / "b.npz", key="train_labels")[0], np.arange(2)
    )
    with pytest.raises(ImageReadError, match="no key 'val_images'"):
        read_numpy(tmp_path / "b.npz", key="val_images")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ImageReadError, match=r"obj\.npy"):
        read_numpy(tmp_path / "obj.npy")


# -- video ---------------------------------------------------------------------------------------
def _write_video(path: Path, n: int, rate: int) -> None:
    av = pytest.importorskip("av")
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
        for i in range(n):
            frame = np.full((24, 32, 3), (i * 8) % 256, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def test_video_fps_subsampling(tmp_path):
    _write_video(tmp_path / "v.mp4", 30, 25)
    frames, meta = read_video(tmp_path / "v.mp4")
    assert frames.shape == (30, 24, 32, 3) and frames.dtype == np.uint8
    assert meta["source_fps"] == pytest.approx(25) and meta["fps"] == pytest.approx(25)
    brightness = frames.reshape(30, -1).mean(1)
    np.testing.assert_allclose(brightness, np.arange(30) * 8, atol=6)  # frames in order
    sub, smeta = read_video(tmp_path / "v.mp4", fps=5)
    assert sub.shape[0] == 6 and smeta["fps"] == 5
    np.testing.assert_allclose(np.diff(smeta["frame_times"]), 0.2, atol=1e-6)
    np.testing.assert_allclose(sub.reshape(6, -1).mean(1), np.arange(0, 30, 5) * 8, atol=6)
    assert read_video(tmp_path / "v.mp4", max_frames=4)[0].shape[0] == 4
    with pytest.raises(ValueError, match="fps must be positive"):
        read_video(tmp_path / "v.mp4", fps=0)


# -- bad input: each error names the file and the problem ----------------------------------------
def test_errors_name_file_and_problem(tmp_path):
    nib = pytest.importorskip("nibabel")
    with pytest.raises(FileNotFoundError, match=r"missing\.nii\.gz.*does not exist"):
        read_image(tmp_path / "missing.nii.gz")
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageReadError, match=r"empty\.png.*empty"):
        read_image(tmp_path / "empty.png")
    (tmp_path / "bad.dcm").write_bytes(np.random.default_rng(0).bytes(600))
    with pytest.raises(ImageReadError, match=r"bad\.dcm.*(not a valid DICOM|corrupt)"):
        read_dicom(tmp_path / "bad.dcm")
    img = nib.Nifti1Image(
        np.random.default_rng(0).normal(size=(20, 20, 20)).astype(np.float32), np.eye(4)
    )
    nib.save(img, tmp_path / "full.nii.gz")
    data = (tmp_path / "full.nii.gz").read_bytes()
    (tmp_path / "cut.nii.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageReadError, match=r"cut\.nii\.gz.*truncated or corrupt"):
        read_nifti(tmp_path / "cut.nii.gz")
    (tmp_path / "junk.nii.gz").write_bytes(gzip.compress(b"not a nifti header" * 30))
    with pytest.raises(ImageReadError, match=r"junk\.nii\.gz.*not a readable NIfTI"):
        read_image(tmp_path / "junk.nii.gz")
    (tmp_path / "x.json").write_text(json.dumps({}))
    with pytest.raises(ImageReadError, match=r"x\.json.*unsupported file type"):
        read_image(tmp_path / "x.json")
    (tmp_path / "bad.png").write_bytes(b"\x89PNG garbage" * 10)
    with pytest.raises(ImageReadError, match=r"bad\.png.*not a readable image"):
        read_png(tmp_path / "bad.png")
    (tmp_path / "bad.h5").write_bytes(b"garbage" * 100)
    with pytest.raises(ImageReadError, match=r"bad\.h5.*not a readable HDF5"):
        read_hdf5(tmp_path / "bad.h5")
    (tmp_path / "bad.mp4").write_bytes(b"garbage" * 100)
    pytest.importorskip("av")
    with pytest.raises(ImageReadError, match=r"bad\.mp4.*not a decodable video"):
        read_video(tmp_path / "bad.mp4")
