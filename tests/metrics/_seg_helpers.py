"""Shared inputs for the segmentation-metric tests: spheres, real organ masks, peer-library calls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
SEG = DATA / "totalseg_ct" / "seg.nii.gz"


def sphere(radius: float, centre, shape=(99, 99, 99), spacing=(1.0, 1.0, 1.0)) -> np.ndarray:
    """Voxels whose physical position ``index * spacing`` lies within ``radius`` of ``centre``."""
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    d2 = sum((g * s - c) ** 2 for g, c, s in zip(grid, centre, spacing))
    return (d2 <= radius**2).astype(np.int64)


def ellipsoid(rng: np.random.Generator, shape) -> np.ndarray:
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    centre = [rng.uniform(0, s) for s in shape]
    radii = [rng.uniform(1.5, max(2.0, s / 2)) for s in shape]
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1


def totalseg() -> tuple[np.ndarray, tuple[float, ...], np.ndarray]:
    """The 41-organ TotalSegmentator mask relabelled to 0..41, its spacing and original labels."""
    if not SEG.exists():
        pytest.skip(f"real CT segmentation not available at {SEG} (needs ../shared/data)")
    nib = pytest.importorskip("nibabel")
    img = nib.load(str(SEG))
    raw = np.asarray(img.dataobj).astype(np.int64)
    labels = np.unique(raw)
    lut = np.zeros(raw.max() + 1, dtype=np.int64)
    lut[labels] = np.arange(len(labels))
    return lut[raw], tuple(float(v) for v in img.header.get_zooms()[:3]), labels


def perturbations(seg: np.ndarray) -> dict[str, np.ndarray]:
    """Eroded, dilated and shifted copies of a label map (per-label, label-preserving)."""
    from scipy import ndimage

    out = {}
    eroded = np.zeros_like(seg)
    dilated = seg.copy()
    for lab in range(1, int(seg.max()) + 1):
        m = seg == lab
        eroded[ndimage.binary_erosion(m)] = lab
        grown = ndimage.binary_dilation(m) & (dilated == 0)
        dilated[grown] = lab
    out["eroded"] = eroded
    out["dilated"] = dilated
    out["shifted"] = np.roll(seg, shift=(2, -1, 1), axis=(0, 1, 2))
    return out
