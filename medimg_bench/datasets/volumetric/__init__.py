"""CT / MRI segmentation datasets in their official on-disk layouts.

Every loader builds a manifest (``id``, ``patient_id``, ``image``, ``mask``, ``split`` + meta)
without reading voxels and yields samples with ``image`` float32 ``C×X×Y×Z`` (X, Y, Z = NIfTI
array axes i, j, k as stored), ``mask`` int64 ``X×Y×Z`` and meta ``spacing`` (mm, same order),
``affine`` (RAS), ``patient_id``. Intensities are left as stored (HU for CT, scanner units for
MR); normalise with a transform.

Shared options of every factory:
    spacing: resample to this spacing in mm (image trilinear, mask nearest; MONAI ``Spacing``).
    orientation: reorient to axis codes such as ``"RAS"`` before resampling (no interpolation).
    slice_axis: return 2D slices along this spatial axis (0, 1, 2) instead of volumes.
    only_labeled_slices: with ``slice_axis``, keep only slices with foreground (reads masks).
    transform: callable applied to each sample.

Modules: ``volume`` (the volume and slice datasets, reading and resampling), ``manifest``
(helpers shared by the loaders), one module per dataset, ``builtin_real`` (files shipped in pydicom/nibabel).
"""

from __future__ import annotations

from medimg_bench.datasets.volumetric.brats import (
    BRATS_CHANNELS_2021,
    BRATS_CHANNELS_2023,
    BRATS_CLASSES,
    BRATS_REGIONS,
    BraTSDataset,
    brats,
)
from medimg_bench.datasets.volumetric.builtin_real import BuiltinRealFiles, builtin_real
from medimg_bench.datasets.volumetric.kits23 import (
    KITS_CLASSES,
    KITS_REGIONS,
    KiTS23Dataset,
    kits23,
)
from medimg_bench.datasets.volumetric.msd import msd
from medimg_bench.datasets.volumetric.nifti_pairs import nifti_pairs
from medimg_bench.datasets.volumetric.totalsegmentator import (
    TotalSegmentatorDataset,
    totalsegmentator,
)
from medimg_bench.datasets.volumetric.verse import VERSE_LABELS, VerSeDataset, verse
from medimg_bench.datasets.volumetric.volume import (
    SliceDataset,
    VolumeDataset,
    nifti_stem,
    read_volume,
    resample_volume,
)

__all__ = [
    "BRATS_CHANNELS_2021",
    "BRATS_CHANNELS_2023",
    "BRATS_CLASSES",
    "BRATS_REGIONS",
    "BraTSDataset",
    "BuiltinRealFiles",
    "KITS_CLASSES",
    "KITS_REGIONS",
    "KiTS23Dataset",
    "SliceDataset",
    "TotalSegmentatorDataset",
    "VERSE_LABELS",
    "VerSeDataset",
    "VolumeDataset",
    "brats",
    "builtin_real",
    "kits23",
    "msd",
    "nifti_pairs",
    "nifti_stem",
    "read_volume",
    "resample_volume",
    "totalsegmentator",
    "verse",
]
