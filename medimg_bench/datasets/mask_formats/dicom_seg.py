"""DICOM Segmentation objects (SEG) read with ``highdicom``, as a label map of the dataset's classes.

Segments become class indices by their ``SegmentLabel`` matched to the class names (case,
spaces, ``-`` and ``_`` ignored), or by number with ``segment_map`` (segment number → class name
or index). A segment matching no class, or a class matched twice, is an error naming the file.
Where segments overlap, the higher class index wins (as the ``totalsegmentator`` loader does).
The geometry is highdicom's ``Volume`` affine (frame of reference, LPS) turned to RAS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medimg_bench.sample import SampleError

__all__ = ["is_dicom_seg", "read_dicom_seg", "segment_classes"]

SEG_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


def is_dicom_seg(path: str | Path) -> bool:
    """True when ``path`` is a DICOM file of the Segmentation Storage class (header only)."""
    import pydicom

    try:
        ds = pydicom.dcmread(str(path), stop_before_pixels=True, specific_tags=["SOPClassUID", "Modality"])
    except Exception:
        return False
    return str(getattr(ds, "SOPClassUID", "")) == SEG_SOP_CLASS or getattr(ds, "Modality", "") == "SEG"


def segment_classes(
    labels: Mapping[int, str], classes: Sequence[str] | None, segment_map: Mapping[Any, Any] | None, path: Path
) -> dict[int, int]:
    """Segment number → class index."""
    out: dict[int, int] = {}
    if segment_map:
        for num, cls in segment_map.items():
            n = int(num)
            if n not in labels:
                raise SampleError(f"segment_map names segment {n}, the file has {sorted(labels)}", path=str(path))
            if isinstance(cls, str):
                if not classes or cls not in classes:
                    raise SampleError(f"segment_map maps segment {n} to {cls!r}, not a class {list(classes or [])}",
                                      path=str(path))
                out[n] = list(classes).index(cls)
            else:
                out[n] = int(cls)
        return out
    if not classes:
        return {n: n for n in labels}  # no class list: segment numbers are the labels
    by_name = {_norm(c): i for i, c in enumerate(classes)}
    unmatched = {n: lab for n, lab in labels.items() if _norm(lab) not in by_name}
    if unmatched:
        raise SampleError(f"segments {unmatched} match no class of {list(classes)}; give segment_map "
                          "(segment number → class)", path=str(path))
    out = {n: by_name[_norm(lab)] for n, lab in labels.items()}
    seen: dict[int, int] = {}
    for n, c in out.items():
        if c in seen:
            raise SampleError(f"segments {seen[c]} and {n} both match class {classes[c]!r}", path=str(path))
        seen[c] = n
    return out


def _frames(seg: Any, path: Path) -> tuple[np.ndarray, np.ndarray, list[int], np.ndarray]:
    """Per-frame foreground ``(F, rows, cols)`` bool, positions ``(F, 3)`` (LPS mm), segment
    numbers, and the 3×3 ``[col_dir·Δc, row_dir·Δr, normal]`` directions of the frames."""
    shared = seg.SharedFunctionalGroupsSequence[0]
    frames = seg.PerFrameFunctionalGroupsSequence

    def item(f: Any, name: str) -> Any:
        return getattr(f, name, None) or getattr(shared, name)

    iop = np.asarray(item(frames[0], "PlaneOrientationSequence")[0].ImageOrientationPatient, dtype=np.float64)
    spacing = [float(v) for v in item(frames[0], "PixelMeasuresSequence")[0].PixelSpacing]
    positions = np.array([[float(v) for v in item(f, "PlanePositionSequence")[0].ImagePositionPatient]
                          for f in frames])
    numbers = [int(f.SegmentIdentificationSequence[0].ReferencedSegmentNumber) for f in frames]
    px = np.asarray(seg.pixel_array)
    if px.ndim == 2:
        px = px[None]
    if len(px) != len(frames):
        raise SampleError(f"{len(px)} frames of pixels for {len(frames)} frame descriptions", path=str(path))
    if str(getattr(seg, "SegmentationType", "BINARY")) == "FRACTIONAL":
        fg = px >= 0.5 * float(getattr(seg, "MaximumFractionalValue", 255))
    else:
        fg = px > 0
    row_dir, col_dir = iop[:3], iop[3:]
    axes = np.stack([np.cross(row_dir, col_dir), col_dir * spacing[0], row_dir * spacing[1]], 1)
    return fg, positions, numbers, axes


def _stack(fg: np.ndarray, positions: np.ndarray, axes: np.ndarray, seg: Any, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The frames on a regular slice lattice: ``(slice index per frame, affine LPS, shape)``."""
    normal = axes[:, 0]
    d = positions @ normal
    levels = np.unique(np.round(d, 4))
    if len(levels) > 1:
        step = float(np.diff(levels).min())
    else:
        pm = seg.SharedFunctionalGroupsSequence[0].PixelMeasuresSequence[0]
        step = float(getattr(pm, "SpacingBetweenSlices", None) or getattr(pm, "SliceThickness", None) or 1.0)
    k = (d - levels[0]) / step
    origin = positions[np.argmin(d)]
    in_plane = positions - origin - np.outer(d - levels[0], normal)
    if not np.allclose(k, np.round(k), atol=1e-3) or not np.allclose(in_plane, 0, atol=1e-3):
        raise SampleError("frames do not lie on one regular grid of slices (in-plane shifts or uneven "
                          "slice gaps)", path=str(path))
    affine = np.eye(4)
    affine[:3, :3] = axes * np.array([step, 1.0, 1.0])
    affine[:3, 3] = origin
    k = np.round(k).astype(int)
    return k, affine, np.array([k.max() + 1, *fg.shape[1:]])


def read_dicom_seg(
    path: str | Path, *, classes: Sequence[str] | None = None, segment_map: Mapping[Any, Any] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """``(labels (slices, rows, cols) int64, {"affine" (RAS), "path", "segments"})``: frames
    stacked along the slice normal from their own positions (frames omitted for being empty
    leave zeros), so partial SEGs keep their place on the frame of reference."""
    try:
        import highdicom as hd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading DICOM SEG needs highdicom: pip install 'medimg-bench[dicom]'") from exc
    p = Path(path)
    try:
        seg = hd.seg.segread(str(p))
        names = {int(n): str(seg.get_segment_description(n).segment_label) for n in seg.segment_numbers}
        mapping = segment_classes(names, classes, segment_map, p)
        fg, positions, numbers, axes = _frames(seg, p)
        k, affine, shape = _stack(fg, positions, axes, seg, p)
    except SampleError:
        raise
    except Exception as exc:
        raise SampleError(f"cannot read DICOM SEG: {type(exc).__name__}: {exc}", path=str(p)) from exc
    labels = np.zeros(tuple(int(v) for v in shape), dtype=np.int64)
    for f in sorted(range(len(numbers)), key=lambda f: mapping[numbers[f]]):  # higher class wins
        labels[k[f]][fg[f]] = mapping[numbers[f]]
    affine[:2] *= -1  # LPS → RAS
    return labels, {"affine": affine, "path": str(p), "segments": names}
