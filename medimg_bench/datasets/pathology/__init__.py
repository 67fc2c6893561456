"""Pathology datasets: PatchCamelyon (HDF5), class-per-folder tiles (NCT-CRC-HE, BACH), MHIST,
and tiles cut from whole-slide images (tiffslide or openslide) for tile- and slide-level (MIL)
evaluation.

Images are RGB ``3×H×W`` float32 in [0, 1] (8-bit / 255, 16-bit / 65535); ``label`` is an int
index into ``classes``. h5py, PIL, tiffslide and openslide are imported when first used.
"""

from __future__ import annotations

from medimg_bench.datasets.pathology.image_folder import PathologyImageDataset, image_folder
from medimg_bench.datasets.pathology.mhist import mhist
from medimg_bench.datasets.pathology.pcam import PCamDataset, pcam
from medimg_bench.datasets.pathology.pixels import IMAGE_SUFFIXES
from medimg_bench.datasets.pathology.wsi import (
    SLIDE_SUFFIXES,
    WSITileDataset,
    open_slide,
    otsu_threshold,
    select_level,
    tissue_mask,
    wsi_tiles,
)

__all__ = [
    "IMAGE_SUFFIXES",
    "PCamDataset",
    "PathologyImageDataset",
    "SLIDE_SUFFIXES",
    "WSITileDataset",
    "image_folder",
    "mhist",
    "open_slide",
    "otsu_threshold",
    "pcam",
    "select_level",
    "tissue_mask",
    "wsi_tiles",
]
