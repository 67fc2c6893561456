"""The one rule for pairing an image with a voxel mask (used by every loader that does it).

* same grid (shape and affine equal within a tolerance) → the mask is used as is;
* the mask is the same grid stored with other axis flips or axis order → it is re-oriented onto
  the image grid exactly (no interpolation);
* anything else (shifted, rotated, other spacing or shape) → :class:`SampleError` naming both
  files and both affines. The engine records the sample as failed and the run goes on.

:func:`header_grid` reads only a file's header (NIfTI) so ``datasets check`` can list every
off-grid pair without reading pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from medimg_bench.sample import SampleError

__all__ = ["align_to_image_grid", "grid_problem", "header_grid", "read_target"]


def read_target(path: str | Path, *, num_classes: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """A label file (mask) as ``int64`` labels and its meta, through the one mask decoder
    (:mod:`medimg_bench.datasets.masks`): a picture (PNG, JPEG, ...) under ``auto`` (0/255 and 0/1
    are binary), any other file as a label map (fractions, negatives, labels ``>= num_classes``
    refused). An error is tagged ``stage = "target"`` so the run reports it as a target failure,
    not a load failure."""
    from medimg_bench.datasets.io import read_image
    from medimg_bench.datasets.masks import PICTURE_SUFFIXES, decode_mask, read_stored

    try:
        if str(path).lower().endswith(PICTURE_SUFFIXES):
            stored = read_stored(path)
            # classes unknown: one nonzero value is a binary mask (0/255 -> 0/1), more are labels
            one = stored.colour or np.unique(stored.array[stored.array != 0]).size <= 1
            encoding = "auto" if num_classes is not None or one else "label_map"
            return decode_mask(stored, encoding=encoding, num_classes=num_classes), {"path": str(path), **stored.meta}
        array, meta = read_image(path)
        from medimg_bench.datasets.masks import check_label_map

        return check_label_map(array, path, num_classes=num_classes), meta
    except Exception as exc:
        exc.stage = "target"  # type: ignore[attr-defined]
        raise


def _tolerance(affine: np.ndarray) -> float:
    return max(1e-3, 1e-3 * float(np.abs(np.asarray(affine)[:3, :3]).max()))


def _fmt(affine: np.ndarray) -> str:
    return str(np.round(np.asarray(affine, dtype=float), 3).tolist())


def grid_problem(
    image_shape: tuple[int, ...],
    image_affine: np.ndarray | None,
    mask_shape: tuple[int, ...],
    mask_affine: np.ndarray | None,
) -> str | None:
    """Why a mask of ``mask_shape``/``mask_affine`` cannot be put on the image grid, or ``None``
    if it can (as is, or by axis flips/permutation). Affines may be ``None`` (2D formats without
    geometry): then only the shapes are compared."""
    image_shape, mask_shape = tuple(image_shape), tuple(mask_shape)
    if image_affine is None or mask_affine is None:
        if image_shape != mask_shape:
            return f"image/mask shape mismatch: image {image_shape}, mask {mask_shape}"
        return None
    if sorted(image_shape) != sorted(mask_shape):  # no flip or axis order can fix this
        return f"image/mask shape mismatch: image {image_shape}, mask {mask_shape}"
    image_affine = np.asarray(image_affine, dtype=float)
    mask_affine = np.asarray(mask_affine, dtype=float)
    tol = _tolerance(image_affine)
    if image_shape == mask_shape and np.allclose(mask_affine, image_affine, atol=tol):
        return None
    _, moved_affine, moved_shape = _reoriented_geometry(mask_shape, mask_affine, image_affine)
    if moved_shape == image_shape and np.allclose(moved_affine, image_affine, atol=max(tol, 1e-2)):
        return None
    return (
        "mask is not on the image grid (not the same grid up to axis flips/permutation): "
        f"image shape {image_shape} affine {_fmt(image_affine)}, "
        f"mask shape {mask_shape} affine {_fmt(mask_affine)}"
    )


def _reoriented_geometry(
    mask_shape: tuple[int, ...], mask_affine: np.ndarray, image_affine: np.ndarray
) -> tuple[Any, np.ndarray, tuple[int, ...]]:
    """The nibabel orientation transform taking the mask to the image's axis codes, the mask's
    affine after it and its spatial shape after it."""
    from nibabel import orientations as nio

    src = nio.io_orientation(mask_affine)
    dst = nio.io_orientation(image_affine)
    ornt = nio.ornt_transform(src, dst)
    spatial = tuple(mask_shape[:3])
    new_affine = mask_affine @ nio.inv_ornt_aff(ornt, spatial)
    new_shape = tuple(int(spatial[int(a)]) for a in np.argsort(ornt[:, 0]))
    return ornt, new_affine, new_shape + tuple(mask_shape[3:])


def align_to_image_grid(
    mask: np.ndarray,
    mask_affine: np.ndarray | None,
    image_affine: np.ndarray | None,
    *,
    image_shape: tuple[int, ...],
    sample_id: str,
    image_path: str | Path,
    mask_path: str | Path,
) -> np.ndarray:
    """``mask`` on the image grid (see the module rule); raises :class:`SampleError` naming both
    files and affines when it is on another grid. ``image_shape`` is the image's spatial shape."""
    mask = np.asarray(mask)
    problem = grid_problem(tuple(image_shape), image_affine, tuple(mask.shape), mask_affine)
    if problem is not None:
        err = SampleError(
            f"{problem}; image file {str(image_path)!r}", sample_id=sample_id, path=str(mask_path)
        )
        err.stage = "target"  # the label is what is wrong: the engine tags the failure [target]
        raise err
    if image_affine is None or mask_affine is None:
        return mask
    if tuple(mask.shape) == tuple(image_shape) and np.allclose(
        np.asarray(mask_affine, dtype=float), np.asarray(image_affine, dtype=float),
        atol=_tolerance(np.asarray(image_affine, dtype=float)),
    ):
        return mask
    from nibabel import orientations as nio

    ornt, _, _ = _reoriented_geometry(tuple(mask.shape), np.asarray(mask_affine, float),
                                      np.asarray(image_affine, float))
    return np.ascontiguousarray(nio.apply_orientation(mask, ornt))


def header_grid(path: str | Path) -> tuple[tuple[int, ...], np.ndarray | None]:
    """Spatial shape and affine of an image file from its header alone (NIfTI/MGH/Analyze via
    nibabel); other formats give their array shape and ``None`` (read fully)."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".nii", ".nii.gz", ".mgz", ".mgh", ".img", ".hdr")):
        import nibabel as nib

        img = nib.load(str(path))
        return tuple(int(s) for s in img.shape[:3]), np.asarray(img.affine, dtype=float)
    from medimg_bench.datasets.io import read_image

    array, meta = read_image(path)
    affine = meta.get("affine")
    return tuple(np.asarray(array).shape), (np.asarray(affine, float) if affine is not None else None)
