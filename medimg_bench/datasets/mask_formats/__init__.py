"""Mask formats hospitals export, read into label maps on a RAS voxel grid so the one grid rule
(:mod:`medimg_bench.datasets.grid`) applies to them as to NIfTI: DICOM SEG (``dicom_seg``,
highdicom), NRRD / MetaImage (``itk_images``, SimpleITK). :func:`read_label_file` picks the
reader; :func:`place_on_grid` pastes a mask that covers part of the image (a SEG keeps only its
non-empty frames) into the image's grid when both share the voxel lattice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LABEL_SUFFIXES", "is_label_file", "label_stem", "place_on_grid", "read_label_file"]

_NIFTI = (".nii.gz", ".nii")
_ITK = (".nrrd", ".nhdr", ".mha", ".mhd")
LABEL_SUFFIXES = (*_NIFTI, *_ITK, ".dcm")


def is_label_file(name: str) -> bool:
    """True for a file name with a label-map suffix (NIfTI, NRRD, MetaImage, DICOM SEG)."""
    return not name.startswith(".") and name.lower().endswith(LABEL_SUFFIXES)


def label_stem(name: str) -> str:
    """File name without its label-map suffix."""
    low = name.lower()
    for suffix in LABEL_SUFFIXES:
        if low.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_label_file(
    path: str | Path, *, classes: Sequence[str] | None = None, segment_map: Mapping[Any, Any] | None = None,
    image_affine: np.ndarray | None = None, image_shape: Sequence[int] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """``(array, meta with "affine")`` of a label file of any supported format; an RTSTRUCT is
    rasterised onto the image grid (``image_affine``, ``image_shape``), which it needs."""
    p = Path(path)
    low = p.name.lower()
    if low.endswith(_ITK):
        from medimg_bench.datasets.mask_formats.itk_images import read_itk

        return read_itk(p)
    if low.endswith(".dcm"):
        from medimg_bench.datasets.mask_formats.dicom_seg import is_dicom_seg, read_dicom_seg

        if is_dicom_seg(p):
            return read_dicom_seg(p, classes=classes, segment_map=segment_map)
        from medimg_bench.datasets.mask_formats.rtstruct import is_rtstruct, read_rtstruct

        if is_rtstruct(p):
            if image_affine is None or image_shape is None:
                from medimg_bench.sample import SampleError

                raise SampleError("an RTSTRUCT needs the image grid (affine and shape) to be rasterised onto",
                                  path=str(p))
            return read_rtstruct(p, affine=image_affine, shape=image_shape, classes=classes, segment_map=segment_map)
    from medimg_bench.datasets.io import read_image

    return read_image(p)


def place_on_grid(
    labels: np.ndarray, affine: np.ndarray | None, image_shape: Sequence[int], image_affine: np.ndarray | None,
    *, atol: float = 1e-3,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``labels`` pasted into a zero array of ``image_shape`` on ``image_affine`` when every
    voxel of it is a voxel of the image grid (signed axis permutation + integer offset) and it
    lies inside; otherwise ``(labels, affine)`` unchanged, for the grid rule to judge."""
    if affine is None or image_affine is None or labels.ndim != 3 or len(image_shape) != 3:
        return labels, affine
    m = np.linalg.inv(np.asarray(image_affine, dtype=np.float64)) @ np.asarray(affine, dtype=np.float64)
    rot, off = m[:3, :3], m[:3, 3]
    perm = np.abs(rot).argmax(0)  # mask axis a runs along image axis perm[a]
    signs = np.sign(rot[perm, range(3)])
    ideal = np.zeros((3, 3))
    ideal[perm, range(3)] = signs
    if sorted(perm) != [0, 1, 2] or not np.allclose(rot, ideal, atol=atol) or not np.allclose(off, np.round(off), atol=atol):
        return labels, affine
    off = np.round(off).astype(int)
    axis_of = np.argsort(perm)  # image axis i ← mask axis axis_of[i]
    moved = np.transpose(labels, axis_of)
    lo = []
    for i in range(3):
        if signs[axis_of[i]] < 0:  # u_i = off_i - v: the mask's last voxel lands first
            moved = np.flip(moved, i)
            lo.append(int(off[i]) - (moved.shape[i] - 1))
        else:
            lo.append(int(off[i]))
    hi = [lo[i] + moved.shape[i] for i in range(3)]
    if any(lo[i] < 0 or hi[i] > image_shape[i] for i in range(3)):
        return labels, affine
    out = np.zeros(tuple(int(s) for s in image_shape), dtype=labels.dtype)
    out[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = moved
    return out, np.asarray(image_affine, dtype=np.float64)
