"""DICOM RTSTRUCT contours rasterised onto the image's own voxel grid.

Our own rasteriser (pydicom + ``skimage.draw.polygon``), chosen over rt-utils because it
rasterises onto any image grid given by an affine — the NIfTI or DICOM series the loader has
already read — rather than only onto a DICOM series folder rt-utils opens itself, and needs no
OpenCV. Each closed planar contour (``ContourData``, LPS mm) is mapped to voxel coordinates of the
image, must lie in one slice (within 0.1 voxel) of the image's slice axis, and is filled with
the even-odd rule per ROI and slice (a contour inside another is a hole, as treatment-planning
systems export them). A voxel is inside when its centre is inside the polygon
(``skimage.draw.polygon``). ROIs become classes by ``ROIName`` matched to the class names, or
by ROI number with ``segment_map`` (as DICOM SEG segments).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medimg_bench.datasets.mask_formats.dicom_seg import segment_classes
from medimg_bench.sample import SampleError

__all__ = ["is_rtstruct", "read_rtstruct"]

RTSTRUCT_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.481.3"


def is_rtstruct(path: str | Path) -> bool:
    """True when ``path`` is an RT Structure Set (header only)."""
    import pydicom

    try:
        ds = pydicom.dcmread(str(path), stop_before_pixels=True, specific_tags=["SOPClassUID", "Modality"])
    except Exception:
        return False
    return str(getattr(ds, "SOPClassUID", "")) == RTSTRUCT_SOP_CLASS or getattr(ds, "Modality", "") == "RTSTRUCT"


def _fill(contours: list[np.ndarray], shape: tuple[int, ...], path: Path, roi: str) -> np.ndarray:
    from skimage.draw import polygon

    out = np.zeros(shape, dtype=bool)
    for vox in contours:
        spread = vox.max(0) - vox.min(0)
        axis = int(np.argmin(spread))
        if spread[axis] > 0.1:
            raise SampleError(f"ROI {roi!r}: a contour is not in one slice of the image grid "
                              f"(spread {np.round(spread, 2).tolist()} voxels)", path=str(path))
        k = int(round(float(vox[:, axis].mean())))
        if not 0 <= k < shape[axis]:
            raise SampleError(f"ROI {roi!r}: a contour lies outside the image (slice {k} of axis {axis})",
                              path=str(path))
        a, b = [i for i in range(3) if i != axis]
        rr, cc = polygon(vox[:, a], vox[:, b], shape=(shape[a], shape[b]))
        plane = np.zeros((shape[a], shape[b]), dtype=bool)
        plane[rr, cc] = True
        index: list[Any] = [slice(None)] * 3
        index[axis] = k
        out[tuple(index)] ^= plane  # even-odd: nested contours are holes
    return out


def read_rtstruct(
    path: str | Path, *, affine: np.ndarray, shape: Sequence[int], classes: Sequence[str] | None = None,
    segment_map: Mapping[Any, Any] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """``(labels of ``shape`` int64, {"affine": affine, "path", "segments"})`` for an image of
    RAS ``affine`` and spatial ``shape``; overlapping ROIs: the higher class index wins."""
    import pydicom

    p = Path(path)
    try:
        ds = pydicom.dcmread(str(p))
        names = {int(r.ROINumber): str(r.ROIName) for r in ds.StructureSetROISequence}
        contours: dict[int, list[np.ndarray]] = {}
        for item in getattr(ds, "ROIContourSequence", []):
            pts = [np.asarray(c.ContourData, dtype=np.float64).reshape(-1, 3)
                   for c in getattr(item, "ContourSequence", [])
                   if str(getattr(c, "ContourGeometricType", "CLOSED_PLANAR")) == "CLOSED_PLANAR"]
            contours[int(item.ReferencedROINumber)] = pts
    except (AttributeError, ValueError, TypeError, OSError) as exc:
        raise SampleError(f"cannot read RTSTRUCT: {type(exc).__name__}: {exc}", path=str(p)) from exc
    mapping = segment_classes(names, classes, segment_map, p)
    inv = np.linalg.inv(np.asarray(affine, dtype=np.float64))
    shape = tuple(int(s) for s in shape)
    labels = np.zeros(shape, dtype=np.int64)
    for number in sorted(mapping, key=lambda n: mapping[n]):  # higher class wins
        vox = []
        for pts in contours.get(number, []):
            ras = pts * np.array([-1.0, -1.0, 1.0])  # LPS → RAS
            vox.append(ras @ inv[:3, :3].T + inv[:3, 3])
        labels[_fill(vox, shape, p, names[number])] = mapping[number]
    return labels, {"affine": np.asarray(affine, dtype=np.float64), "path": str(p), "segments": names}
