"""Image readers: each returns ``(array, meta)`` and names the file in every error.

Axis order and orientation
--------------------------
Volumes come back in **index order (i, j, k)**, the NIfTI / ITK convention: for NIfTI the array
as stored; for a DICOM series ``i`` runs along a row (column index), ``j`` down a column (row
index) and ``k`` across slices, sorted by ImagePositionPatient projected on the slice normal
(ascending). ``meta["spacing"]`` is in mm, one value per spatial axis **in that array order**,
and ``meta["affine"]`` is the 4×4 voxel → world matrix in **RAS+** millimetres (the NIfTI
convention; DICOM's LPS is converted), so ``affine @ [i, j, k, 1]`` is the world position of a
voxel. ``meta["orientation"]`` gives the axis codes (e.g. ``('L', 'P', 'S')`` for a typical
axial DICOM series as stored). Pass ``orientation="RAS"`` to reorient the array (flips and axis
permutations only, no interpolation) so that axes point to those codes; spacing and affine are
updated to match.

Errors: a missing file raises :class:`FileNotFoundError`; an empty, corrupt or unsupported file
raises :class:`ImageReadError` (a :class:`ValueError`) whose message names the file and the
problem. Heavy readers (pydicom, nibabel, SimpleITK, PIL, tifffile, h5py, PyAV) are imported
inside the functions that use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "ImageReadError",
    "check_pixels",
    "read_image",
    "read_dicom",
    "read_dicom_series",
    "read_nifti",
    "read_nifti_header",
    "read_png",
    "read_tiff",
    "read_hdf5",
    "read_numpy",
    "read_video",
    "reorient",
    "affine_spacing",
    "to_channel_first",
]

# DICOM patient coordinates are LPS+, NIfTI world coordinates RAS+: flip x and y.
_LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


class ImageReadError(ValueError):
    """A file could not be read as an image; the message names the file and the reason."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"cannot read {str(path)!r}: {problem}")
        self.path = str(path)
        self.problem = problem


def _missing_extra(package: str, extra: str) -> ImportError:
    return ImportError(
        f"{package} is required for this reader: pip install 'medimg-bench[{extra}]'"
    )


def _require_file(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"file {str(p)!r} does not exist")
    if p.is_dir():
        raise ImageReadError(p, "is a directory, expected a file")
    if p.stat().st_size == 0:
        raise ImageReadError(p, "file is empty")
    return p


# -- geometry helpers ------------------------------------------------------------------------
def affine_spacing(affine: np.ndarray, ndim: int = 3) -> tuple[float, ...]:
    """Voxel size in mm of the first ``ndim`` array axes: the norms of the affine's columns."""
    a = np.asarray(affine, dtype=np.float64)
    return tuple(float(v) for v in np.linalg.norm(a[:3, :ndim], axis=0))


def _axcodes(affine: np.ndarray) -> tuple[str, ...]:
    import nibabel as nib

    return tuple(str(c) for c in nib.aff2axcodes(affine))


def reorient(
    array: np.ndarray, affine: np.ndarray, orientation: str | Sequence[str] = "RAS"
) -> tuple[np.ndarray, np.ndarray]:
    """Flip/permute the first three axes of ``array`` so they point to ``orientation`` codes
    (e.g. ``"RAS"``, ``"LPS"``). Returns the reoriented array (a view where possible) and its new
    RAS affine. Trailing axes (channels, time) are kept. No interpolation."""
    from nibabel import orientations as nio

    codes = tuple(orientation)
    if len(codes) != 3:
        raise ValueError(f"orientation must have 3 axis codes, got {orientation!r}")
    affine = np.asarray(affine, dtype=np.float64)
    current = nio.io_orientation(affine)
    target = nio.axcodes2ornt(codes)
    transform = nio.ornt_transform(current, target)
    if np.array_equal(transform, nio.axcodes2ornt(("R", "A", "S"))):  # already there
        return array, affine
    out = nio.apply_orientation(array, transform)
    new_affine = affine @ nio.inv_ornt_aff(transform, array.shape[:3])
    return out, new_affine


# -- DICOM -----------------------------------------------------------------------------------
def _dcmread(p: Path, *, stop_before_pixels: bool = False) -> Any:
    import pydicom
    from pydicom.errors import InvalidDicomError

    try:
        return pydicom.dcmread(p, stop_before_pixels=stop_before_pixels)
    except InvalidDicomError as exc:
        raise ImageReadError(p, f"not a valid DICOM file ({exc})") from exc
    except Exception as exc:  # pydicom raises many types on truncated files
        raise ImageReadError(p, f"corrupt DICOM ({type(exc).__name__}: {exc})") from exc


def _rescaled_pixels(ds: Any, p: Path) -> np.ndarray:
    if "PixelData" not in ds:
        raise ImageReadError(p, "DICOM has no pixel data")
    try:
        pixels = ds.pixel_array
    except Exception as exc:
        raise ImageReadError(
            p, f"pixel data cannot be decoded ({type(exc).__name__}: {exc})"
        ) from exc
    slope = float(getattr(ds, "RescaleSlope", 1.0) or 1.0)
    intercept = float(getattr(ds, "RescaleIntercept", 0.0) or 0.0)
    return pixels.astype(np.float32) * np.float32(slope) + np.float32(intercept)


def read_dicom(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read one DICOM file. Returns pixel values with RescaleSlope/Intercept applied (float32;
    HU for CT) shaped ``(rows, cols)`` (or ``(frames, rows, cols)``) and meta with ``spacing``
    (mm, row spacing then column spacing), modality, photometric interpretation and ids."""
    p = _require_file(path)
    ds = _dcmread(p)
    array = _rescaled_pixels(ds, p)
    row_col = [float(v) for v in getattr(ds, "PixelSpacing", [1.0, 1.0])]
    spacing: tuple[float, ...] = tuple(row_col)
    if array.ndim == 3 and str(getattr(ds, "PhotometricInterpretation", "")).startswith("MONO"):
        spacing = (float(getattr(ds, "SliceThickness", 1.0) or 1.0), *row_col)
    meta: dict[str, Any] = {
        "path": str(p),
        "spacing": spacing,
        "modality": str(getattr(ds, "Modality", "")),
        "photometric_interpretation": str(getattr(ds, "PhotometricInterpretation", "")),
        "patient_id": str(getattr(ds, "PatientID", "")),
        "study_id": str(getattr(ds, "StudyInstanceUID", "")),
    }
    if str(getattr(ds, "PhotometricInterpretation", "")).startswith("RGB"):
        meta["mode"] = "RGB"
    return array, meta


def _series_files(d: Path) -> list[Path]:
    if not d.exists():
        raise FileNotFoundError(f"DICOM series directory {str(d)!r} does not exist")
    if not d.is_dir():
        raise ImageReadError(d, "expected a DICOM series directory, got a file")
    files = sorted(
        f
        for f in d.iterdir()
        if f.is_file() and not f.name.startswith(".") and f.name.upper() != "DICOMDIR"
    )
    if not files:
        raise ImageReadError(d, "DICOM series directory is empty")
    return files


def _series_geometry(
    d: Path,
    positions: np.ndarray,
    row_cos: np.ndarray,
    col_cos: np.ndarray,
    pixel_spacing: Sequence[float],
    fallback_dz: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Sort order of slices and the RAS affine of the (i, j, k) array."""
    normal = np.cross(row_cos, col_cos)
    dist = positions @ normal
    order = np.argsort(dist, kind="stable")
    dist = dist[order]
    gaps = np.diff(dist)
    if len(gaps) and np.min(gaps) < 1e-4:
        raise ImageReadError(
            d, "two slices share one ImagePositionPatient (duplicate slices or several series)"
        )
    if len(gaps) and np.max(np.abs(gaps - np.median(gaps))) > 0.01 * np.median(gaps) + 1e-3:
        raise ImageReadError(
            d,
            f"slice spacing is not uniform (gaps {np.min(gaps):.3f}-{np.max(gaps):.3f} mm: missing slices?)",
        )
    lps = np.eye(4)
    lps[:3, 0] = row_cos * float(pixel_spacing[1])  # i: along a row, step = column spacing
    lps[:3, 1] = col_cos * float(pixel_spacing[0])  # j: down a column, step = row spacing
    if len(positions) > 1:
        # the true step between slice origins (also right for gantry tilt)
        lps[:3, 2] = (positions[order[-1]] - positions[order[0]]) / (len(positions) - 1)
    else:
        lps[:3, 2] = normal * fallback_dz
    lps[:3, 3] = positions[order[0]]
    return order, _LPS_TO_RAS @ lps


def _read_series_pydicom(d: Path, series_uid: str | None) -> tuple[np.ndarray, np.ndarray, Any]:
    datasets = []
    for f in _series_files(d):
        ds = _dcmread(f)
        if "PixelData" not in ds:
            continue  # e.g. a structured report or presentation state beside the images
        datasets.append((f, ds))
    if not datasets:
        raise ImageReadError(d, "no DICOM file with pixel data in the directory")
    uids = sorted({str(getattr(ds, "SeriesInstanceUID", "")) for _, ds in datasets})
    if series_uid is not None:
        datasets = [
            (f, ds) for f, ds in datasets if str(getattr(ds, "SeriesInstanceUID", "")) == series_uid
        ]
        if not datasets:
            raise ImageReadError(d, f"no slice of series {series_uid!r} (series present: {uids})")
    elif len(uids) > 1:
        raise ImageReadError(d, f"directory holds {len(uids)} series {uids}; pass series_uid=")
    f0, ds0 = datasets[0]
    for f, ds in datasets:
        if "ImagePositionPatient" not in ds or "ImageOrientationPatient" not in ds:
            raise ImageReadError(f, "slice has no ImagePositionPatient/ImageOrientationPatient")
        if int(getattr(ds, "NumberOfFrames", 1) or 1) > 1:
            raise ImageReadError(
                f, "multi-frame DICOM in a series directory is not supported; use read_dicom"
            )
        if (ds.Rows, ds.Columns) != (ds0.Rows, ds0.Columns):
            raise ImageReadError(
                f, f"slice is {ds.Rows}×{ds.Columns}, first slice {ds0.Rows}×{ds0.Columns}"
            )
        if not np.allclose(
            [float(v) for v in ds.ImageOrientationPatient],
            [float(v) for v in ds0.ImageOrientationPatient],
            atol=1e-4,
        ):
            raise ImageReadError(f, "ImageOrientationPatient differs from the other slices")
    iop = np.array([float(v) for v in ds0.ImageOrientationPatient])
    positions = np.array([[float(v) for v in ds.ImagePositionPatient] for _, ds in datasets])
    pixel_spacing = [float(v) for v in getattr(ds0, "PixelSpacing", [1.0, 1.0])]
    fallback = float(
        getattr(ds0, "SpacingBetweenSlices", 0) or getattr(ds0, "SliceThickness", 1.0) or 1.0
    )
    order, affine = _series_geometry(d, positions, iop[:3], iop[3:], pixel_spacing, fallback)
    first = datasets[order[0]][1]
    volume = np.empty((int(ds0.Columns), int(ds0.Rows), len(datasets)), dtype=np.float32)
    for k, idx in enumerate(order):
        f, ds = datasets[idx]
        volume[:, :, k] = _rescaled_pixels(ds, f).T  # (rows, cols) -> (i=col, j=row)
    return volume, affine, first


def _read_series_sitk(d: Path, series_uid: str | None) -> tuple[np.ndarray, np.ndarray, Any]:
    try:
        import SimpleITK as sitk
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise _missing_extra("SimpleITK", "medical") from exc

    _series_files(d)
    reader = sitk.ImageSeriesReader()
    uids = list(reader.GetGDCMSeriesIDs(str(d)))
    if series_uid is None and len(uids) > 1:
        raise ImageReadError(d, f"directory holds {len(uids)} series {uids}; pass series_uid=")
    names = (
        reader.GetGDCMSeriesFileNames(str(d), series_uid)
        if series_uid
        else reader.GetGDCMSeriesFileNames(str(d))
    )
    if not names:
        raise ImageReadError(d, "SimpleITK found no DICOM series in the directory")
    reader.SetFileNames(names)
    try:
        image = reader.Execute()
    except RuntimeError as exc:
        raise ImageReadError(
            d, f"SimpleITK cannot read the series ({str(exc).strip().splitlines()[-1]})"
        ) from exc
    volume = sitk.GetArrayFromImage(image).astype(np.float32, copy=False).transpose(2, 1, 0)
    lps = np.eye(4)
    direction = np.array(image.GetDirection()).reshape(3, 3)
    lps[:3, :3] = direction * np.array(image.GetSpacing())[None, :]
    lps[:3, 3] = image.GetOrigin()
    return (
        np.ascontiguousarray(volume),
        _LPS_TO_RAS @ lps,
        _dcmread(Path(names[0]), stop_before_pixels=True),
    )


def read_dicom_series(
    directory: str | Path,
    *,
    backend: str = "pydicom",
    orientation: str | None = None,
    series_uid: str | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a directory of single-frame DICOM slices as one volume.

    Slices are sorted by ImagePositionPatient projected on the slice normal (row × column
    direction cosines), RescaleSlope/Intercept are applied per slice (float32; HU for CT) and the
    slice spacing is the distance between slice positions, not SliceThickness.

    Args:
        directory: folder holding one series (other series: pass ``series_uid``).
        backend: ``"pydicom"`` (default: as fast as SimpleITK here and with per-file errors) or
            ``"sitk"`` (SimpleITK/GDCM); both give the same array and affine.
        orientation: axis codes to reorient to (e.g. ``"RAS"``); ``None`` keeps (i, j, k).
        series_uid: SeriesInstanceUID to read when the folder holds several.

    Returns:
        ``(array, meta)``: array ``(i, j, k)`` = (columns, rows, slices) before reorientation;
        meta ``spacing`` (mm, array order), ``affine`` (RAS), ``orientation``, ``modality``,
        ``patient_id``, ``study_id``, ``series_uid``, ``n_slices``, ``backend``, ``path``.
    """
    d = Path(directory)
    if backend == "pydicom":
        volume, affine, ds = _read_series_pydicom(d, series_uid)
    elif backend in ("sitk", "simpleitk"):
        volume, affine, ds = _read_series_sitk(d, series_uid)
    else:
        raise ValueError(f"unknown DICOM backend {backend!r}; use 'pydicom' or 'sitk'")
    n_slices = int(volume.shape[2])
    if orientation is not None:
        volume, affine = reorient(volume, affine, orientation)
    meta: dict[str, Any] = {
        "path": str(d),
        "spacing": affine_spacing(affine, 3),
        "affine": affine,
        "orientation": _axcodes(affine),
        "modality": str(getattr(ds, "Modality", "")),
        "patient_id": str(getattr(ds, "PatientID", "")),
        "study_id": str(getattr(ds, "StudyInstanceUID", "")),
        "series_uid": str(getattr(ds, "SeriesInstanceUID", "")),
        "n_slices": n_slices,
        "backend": "sitk" if backend == "simpleitk" else backend,
    }
    return volume, meta


# -- NIfTI -----------------------------------------------------------------------------------
def read_nifti_header(path: str | Path) -> dict[str, Any]:
    """Shape, spacing, affine and orientation of a NIfTI file without reading its voxels."""
    import nibabel as nib

    p = _require_file(path)
    try:
        img = nib.load(str(p))
    except Exception as exc:
        raise ImageReadError(
            p, f"not a readable NIfTI header ({type(exc).__name__}: {exc})"
        ) from exc
    affine = np.asarray(img.affine, dtype=np.float64)
    shape = tuple(int(s) for s in img.shape)
    return {
        "path": str(p),
        "shape": shape,
        "spacing": affine_spacing(affine, min(len(shape), 3)),
        "affine": affine,
        "orientation": _axcodes(affine),
    }


def read_nifti(
    path: str | Path, *, orientation: str | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a NIfTI file (axes x, y, z as stored, trailing axes kept; dtype as stored, with the
    header's scl_slope/inter applied by nibabel when set). ``orientation`` (e.g. ``"RAS"``)
    reorients without interpolation. Meta: ``spacing`` (mm, from the affine's column norms, array
    order), ``affine`` (4×4 RAS), ``orientation`` axis codes such as ``('R', 'A', 'S')``."""
    import nibabel as nib

    p = _require_file(path)
    name = p.name.lower()
    if not (
        name.endswith(".nii")
        or name.endswith(".nii.gz")
        or name.endswith(".img")
        or name.endswith(".hdr")
    ):
        raise ImageReadError(p, "unsupported file type for NIfTI (expected .nii or .nii.gz)")
    try:
        img = nib.load(str(p))
    except Exception as exc:
        raise ImageReadError(p, f"not a readable NIfTI ({type(exc).__name__}: {exc})") from exc
    try:
        array = np.asanyarray(img.dataobj)
    except Exception as exc:  # truncated gzip stream, short file
        raise ImageReadError(
            p, f"NIfTI voxel data is truncated or corrupt ({type(exc).__name__}: {exc})"
        ) from exc
    affine = np.asarray(img.affine, dtype=np.float64)
    if orientation is not None and array.ndim >= 3:
        array, affine = reorient(array, affine, orientation)
    meta = {
        "path": str(p),
        "spacing": affine_spacing(affine, min(array.ndim, 3)),
        "affine": affine,
        "orientation": _axcodes(affine),
    }
    return array, meta


# -- 2D images -------------------------------------------------------------------------------
def read_png(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a PNG/JPEG/BMP 2D image (8- or 16-bit grey, or RGB) as stored, no rescaling: 16-bit
    PNGs come back as uint16 with their full value range. Meta ``mode`` is PIL's mode."""
    from PIL import Image, UnidentifiedImageError

    p = _require_file(path)
    try:
        with Image.open(p) as im:
            mode = im.mode
            array = np.array(im)
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ImageReadError(p, f"not a readable image ({exc})") from exc
    if mode in ("I;16B", "I;16L"):
        array = array.astype(np.uint16)
    return array, {"path": str(p), "mode": mode, "dtype": str(array.dtype)}


def read_tiff(path: str | Path, *, page: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a TIFF with tifffile (all pages stacked, or one ``page``), dtype as stored (8/16-bit,
    float). RGB pages come back ``H×W×3`` with meta ``mode="RGB"``."""
    try:
        import tifffile
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise _missing_extra("tifffile", "data") from exc

    p = _require_file(path)
    try:
        with tifffile.TiffFile(p) as tf:
            if page is not None and not 0 <= page < len(tf.pages):
                raise ImageReadError(
                    p, f"page {page} out of range (file has {len(tf.pages)} pages)"
                )
            array = tf.asarray(key=page)
            photometric = tf.pages[0 if page is None else page].photometric.name
    except ImageReadError:
        raise
    except Exception as exc:
        raise ImageReadError(p, f"not a readable TIFF ({type(exc).__name__}: {exc})") from exc
    meta: dict[str, Any] = {"path": str(p), "dtype": str(array.dtype), "photometric": photometric}
    if photometric == "RGB":
        meta["mode"] = "RGB"
    return array, meta


# -- arrays ----------------------------------------------------------------------------------
def read_hdf5(
    path: str | Path, *, key: str | None = None, index: int | slice | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read dataset ``key`` of an HDF5 file (the only dataset when ``key`` is None), or just
    ``[index]`` of it (lazily: only that part is read). Meta holds ``key`` and the full ``shape``."""
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise _missing_extra("h5py", "data") from exc

    p = _require_file(path)
    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise ImageReadError(p, f"not a readable HDF5 file ({exc})") from exc
    with f:
        names: list[str] = []
        f.visititems(lambda n, obj: names.append(n) if isinstance(obj, h5py.Dataset) else None)
        if key is None:
            if len(names) != 1:
                raise ImageReadError(p, f"HDF5 file has datasets {names}; pass key=")
            key = names[0]
        if key not in f or not isinstance(f[key], h5py.Dataset):
            raise ImageReadError(p, f"HDF5 file has no dataset {key!r} (datasets: {names})")
        ds = f[key]
        shape = tuple(ds.shape)
        try:
            array = np.asarray(ds[()] if index is None else ds[index])
        except (OSError, ValueError, IndexError) as exc:
            raise ImageReadError(
                p, f"HDF5 dataset {key!r} cannot be read at {index!r} ({exc})"
            ) from exc
    return array, {"path": str(p), "key": key, "shape": shape, "dtype": str(array.dtype)}


def read_numpy(
    path: str | Path, *, key: str | None = None, mmap: bool = True
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read ``.npy`` (memory-mapped by default) or one ``key`` of an ``.npz`` (npz members cannot
    be memory-mapped: the key is read whole); never unpickles object arrays."""
    p = _require_file(path)
    try:
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                if key is None:
                    if len(z.files) != 1:
                        raise ImageReadError(p, f"npz has keys {z.files}; pass key=")
                    key = z.files[0]
                if key not in z.files:
                    raise ImageReadError(p, f"npz has no key {key!r} (keys: {z.files})")
                array = z[key]
        else:
            array = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ImageReadError:
        raise
    except (ValueError, OSError, KeyError, EOFError) as exc:
        raise ImageReadError(p, f"not a readable NumPy file ({exc})") from exc
    return array, {"path": str(p)}


# -- video -----------------------------------------------------------------------------------
def read_video(
    path: str | Path, *, fps: float | None = None, max_frames: int | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Decode a video with PyAV into ``T×H×W×3`` uint8 RGB frames.

    ``fps`` subsamples to that rate by keeping, for each target time ``n / fps``, the decoded
    frame nearest to it (frames are never duplicated: a target above the source rate keeps every
    frame). Meta: ``fps`` (rate of the returned frames), ``source_fps``, ``frame_times`` (s, per
    returned frame), ``n_frames``.
    """
    try:
        import av
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise _missing_extra("av (PyAV)", "video") from exc

    if fps is not None and not fps > 0:
        raise ValueError(f"fps must be positive, got {fps!r}")
    p = _require_file(path)
    frames: list[np.ndarray] = []
    times: list[float] = []
    try:
        with av.open(str(p)) as container:
            if not container.streams.video:
                raise ImageReadError(p, "file has no video stream")
            stream = container.streams.video[0]
            source_fps = float(stream.average_rate) if stream.average_rate else None
            half = 0.5 / source_fps if source_fps else 0.0
            next_t: float | None = None
            for n, frame in enumerate(container.decode(stream)):
                t = float(frame.time) if frame.time is not None else n / (source_fps or 1.0)
                if fps is not None:
                    if next_t is None:
                        next_t = t
                    if t + half < next_t:
                        continue
                    while next_t <= t + half:
                        next_t += 1.0 / fps
                frames.append(frame.to_ndarray(format="rgb24"))
                times.append(t)
                if max_frames is not None and len(frames) >= max_frames:
                    break
    except ImageReadError:
        raise
    except Exception as exc:  # av.error.InvalidDataError and friends
        raise ImageReadError(p, f"not a decodable video ({type(exc).__name__}: {exc})") from exc
    if not frames:
        raise ImageReadError(p, "video has no decodable frames")
    out_fps = fps if fps is not None and source_fps and fps < source_fps else source_fps
    meta = {
        "path": str(p),
        "fps": out_fps,
        "source_fps": source_fps,
        "frame_times": times,
        "n_frames": len(frames),
    }
    return np.stack(frames), meta


def read_itk_image(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """NRRD / MetaImage through SimpleITK (``mask_formats.itk_images.read_itk``)."""
    from medimg_bench.datasets.mask_formats.itk_images import read_itk

    return read_itk(path)


# -- dispatch --------------------------------------------------------------------------------
_SUFFIX_READERS = {
    ".nrrd": read_itk_image,
    ".nhdr": read_itk_image,
    ".mha": read_itk_image,
    ".mhd": read_itk_image,
    ".dcm": read_dicom,
    ".dicom": read_dicom,
    ".nii": read_nifti,
    ".gz": read_nifti,
    ".png": read_png,
    ".jpg": read_png,
    ".jpeg": read_png,
    ".bmp": read_png,
    ".tif": read_tiff,
    ".tiff": read_tiff,
    ".h5": read_hdf5,
    ".hdf5": read_hdf5,
    ".npy": read_numpy,
    ".npz": read_numpy,
}


def read_image(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read any supported image by its suffix: a directory is read as a DICOM series, files with
    no suffix are tried as DICOM. Returns ``(array, meta)`` as the specific reader does."""
    p = Path(path)
    array, meta = _read_any(p)
    check_pixels(array, p)
    return array, meta


def check_pixels(array: Any, path: str | Path) -> None:
    """Raise :class:`ImageReadError` naming ``path`` if the pixels are complex or hold NaN/Inf
    (either would silently poison every metric downstream); return None otherwise."""
    a = np.asarray(array)
    if a.dtype.kind == "c":
        raise ImageReadError(path, f"complex-valued pixels ({a.dtype}); expected a real image")
    if a.dtype.kind == "f":
        finite = np.isfinite(a)
        if not finite.all():
            raise ImageReadError(path, f"{int(a.size - finite.sum())} of {a.size} values are NaN or Inf")


def _read_any(p: Path) -> tuple[np.ndarray, dict[str, Any]]:
    if p.is_dir():
        return read_dicom_series(p)
    suffix = p.suffix.lower()
    if suffix == ".gz" and not p.name.lower().endswith(".nii.gz"):
        raise ImageReadError(p, "unsupported compressed file (expected .nii.gz)")
    reader = _SUFFIX_READERS.get(suffix, read_dicom if suffix == "" else None)
    if reader is None:
        if not p.exists():
            raise FileNotFoundError(f"file {str(p)!r} does not exist")
        raise ImageReadError(p, f"unsupported file type {suffix!r}")
    return reader(p)


def to_channel_first(array: np.ndarray, meta: dict[str, Any] | None = None) -> torch.Tensor:
    """A float32 ``C×spatial`` tensor: grey images get a channel axis, RGB(A) ``H×W×3`` is moved
    channel-first (alpha dropped)."""
    a = np.asarray(array)
    if a.ndim == 3 and a.shape[-1] in (3, 4) and (meta or {}).get("mode", "").startswith("RGB"):
        a = np.moveaxis(a[..., :3], -1, 0)
    else:
        a = a[None]
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
