"""Image readers: each returns ``(array, meta)`` and names the file in every error.

``meta`` holds at least ``path``; volumetric readers add ``spacing`` (mm, one value per array
axis, in array order) and ``affine``. Heavy readers (pydicom, nibabel, SimpleITK, PIL) are
imported inside the functions that use them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "ImageReadError",
    "read_image",
    "read_dicom",
    "read_nifti",
    "read_png",
    "read_numpy",
    "to_channel_first",
]


class ImageReadError(ValueError):
    """A file could not be read as an image; the message names the file and the reason."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"cannot read {str(path)!r}: {problem}")
        self.path = str(path)
        self.problem = problem


def _require_file(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"file {str(p)!r} does not exist")
    if p.is_dir():
        raise ImageReadError(p, "is a directory, expected a file")
    if p.stat().st_size == 0:
        raise ImageReadError(p, "file is empty")
    return p


def read_dicom(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read one DICOM file. Returns pixel values with RescaleSlope/Intercept applied (float32;
    HU for CT) shaped ``(rows, cols)`` (or ``(frames, rows, cols)``) and meta with ``spacing``."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    p = _require_file(path)
    try:
        ds = pydicom.dcmread(p)
    except InvalidDicomError as exc:
        raise ImageReadError(p, f"not a valid DICOM file ({exc})") from exc
    except Exception as exc:  # pydicom raises many types on truncated files
        raise ImageReadError(p, f"corrupt DICOM ({type(exc).__name__}: {exc})") from exc
    if "PixelData" not in ds:
        raise ImageReadError(p, "DICOM has no pixel data")
    try:
        pixels = ds.pixel_array
    except Exception as exc:
        raise ImageReadError(p, f"pixel data cannot be decoded ({type(exc).__name__}: {exc})") from exc
    slope = float(getattr(ds, "RescaleSlope", 1.0) or 1.0)
    intercept = float(getattr(ds, "RescaleIntercept", 0.0) or 0.0)
    array = pixels.astype(np.float32) * np.float32(slope) + np.float32(intercept)
    row_col = [float(v) for v in getattr(ds, "PixelSpacing", [1.0, 1.0])]
    spacing: tuple[float, ...] = tuple(row_col)
    if array.ndim == 3:
        spacing = (float(getattr(ds, "SliceThickness", 1.0) or 1.0), *row_col)
    meta: dict[str, Any] = {
        "path": str(p),
        "spacing": spacing,
        "modality": str(getattr(ds, "Modality", "")),
        "photometric_interpretation": str(getattr(ds, "PhotometricInterpretation", "")),
        "patient_id": str(getattr(ds, "PatientID", "")),
        "study_id": str(getattr(ds, "StudyInstanceUID", "")),
    }
    return array, meta


def read_nifti(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a NIfTI file as stored (axes x, y, z). Meta: ``spacing`` from the affine's column
    norms (mm), ``affine`` (4×4), ``orientation`` axis codes such as ``('R','A','S')``."""
    import nibabel as nib

    p = _require_file(path)
    try:
        img = nib.load(str(p))
        array = np.asanyarray(img.dataobj)
    except Exception as exc:
        raise ImageReadError(p, f"not a readable NIfTI ({type(exc).__name__}: {exc})") from exc
    affine = np.asarray(img.affine, dtype=np.float64)
    nd = min(array.ndim, 3)
    spacing = tuple(float(v) for v in np.linalg.norm(affine[:3, :nd], axis=0))
    meta = {
        "path": str(p),
        "spacing": spacing,
        "affine": affine,
        "orientation": tuple(nib.aff2axcodes(affine)),
    }
    return array, meta


def read_png(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a PNG/JPEG/TIFF 2D image (8- or 16-bit grey, or RGB) as stored, no rescaling."""
    from PIL import Image, UnidentifiedImageError

    p = _require_file(path)
    try:
        with Image.open(p) as im:
            mode = im.mode
            array = np.array(im)
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageReadError(p, f"not a readable image ({exc})") from exc
    return array, {"path": str(p), "mode": mode, "dtype": str(array.dtype)}


def read_numpy(path: str | Path, *, key: str | None = None, mmap: bool = True) -> tuple[np.ndarray, dict[str, Any]]:
    """Read ``.npy`` (memory-mapped by default) or one ``key`` of an ``.npz``; never unpickles."""
    p = _require_file(path)
    try:
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                if key is None:
                    if len(z.files) != 1:
                        raise ImageReadError(p, f"npz has keys {z.files}; pass key=")
                    key = z.files[0]
                array = z[key]
        else:
            array = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ImageReadError:
        raise
    except (ValueError, OSError, KeyError) as exc:
        raise ImageReadError(p, f"not a readable NumPy file ({exc})") from exc
    return array, {"path": str(p)}


_SUFFIX_READERS = {
    ".dcm": read_dicom,
    ".dicom": read_dicom,
    ".nii": read_nifti,
    ".gz": read_nifti,
    ".png": read_png,
    ".jpg": read_png,
    ".jpeg": read_png,
    ".tif": read_png,
    ".tiff": read_png,
    ".bmp": read_png,
    ".npy": read_numpy,
    ".npz": read_numpy,
}


def read_image(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read any supported image by its suffix; files with no suffix are tried as DICOM."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".gz" and not p.name.lower().endswith(".nii.gz"):
        raise ImageReadError(p, "unsupported compressed file (expected .nii.gz)")
    reader = _SUFFIX_READERS.get(suffix, read_dicom if suffix == "" else None)
    if reader is None:
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
