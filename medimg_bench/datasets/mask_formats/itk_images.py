"""NRRD / MetaImage (``.nrrd``, ``.nhdr``, ``.mha``, ``.mhd``) through SimpleITK, returned like
the NIfTI reader: the array in index order (i, j, k) = ITK (x, y, z) and a RAS affine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from medimg_bench.sample import SampleError

__all__ = ["ITK_SUFFIXES", "itk_affine_ras", "read_itk"]

ITK_SUFFIXES = (".nrrd", ".nhdr", ".mha", ".mhd")


def itk_affine_ras(spacing: Any, direction: Any, origin: Any) -> np.ndarray:
    """4×4 index (x, y, z) → RAS mm matrix of an ITK image (ITK's world is LPS)."""
    n = len(spacing)
    d = np.asarray(direction, dtype=np.float64).reshape(n, n)
    aff = np.eye(4)
    aff[:n, :n] = d * np.asarray(spacing, dtype=np.float64)[None, :]
    aff[:n, 3] = np.asarray(origin, dtype=np.float64)
    aff[:2] *= -1  # LPS → RAS
    aff[3, 3] = 1.0
    return aff


def read_itk(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """``(array, {"affine", "spacing", "path"})`` of a 2D/3D NRRD or MetaImage file; a vector
    image keeps its components last."""
    import SimpleITK as sitk

    p = Path(path)
    try:
        img = sitk.ReadImage(str(p))
    except RuntimeError as exc:
        raise SampleError(f"SimpleITK cannot read it: {str(exc).strip().splitlines()[-1]}", path=str(p)) from exc
    arr = sitk.GetArrayFromImage(img)  # (z, y, x[, components])
    nd = img.GetDimension()
    arr = np.transpose(arr, (*range(nd - 1, -1, -1), *range(nd, arr.ndim)))
    affine = itk_affine_ras(img.GetSpacing(), img.GetDirection(), img.GetOrigin())
    return arr, {"affine": affine, "spacing": tuple(float(s) for s in img.GetSpacing()), "path": str(p)}
