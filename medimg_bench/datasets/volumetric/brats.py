"""The ``brats`` dataset. BraTS 2021 (``BraTS2021_XXXXX/BraTS2021_XXXXX_{t1,t1ce,t2,flair,seg}.nii.gz``) or 2023+
(``BraTS-GLI-XXXXX-XXX/BraTS-GLI-XXXXX-XXX-{t1n,t1c,t2w,t2f,seg}.nii.gz``, any sub-challenge
prefix) case folders anywhere up to two levels below ``root``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.volumetric.manifest import checked_root, finish, split_options
from medimg_bench.datasets.volumetric.volume import (
    VolumeDataset,
)
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["BraTSDataset", "brats"]


# -- BraTS -------------------------------------------------------------------------------------
_BRATS_2021 = re.compile(r"^BraTS2021_\d{5}$")
_BRATS_2023 = re.compile(r"^BraTS-[A-Z]+-\d{5}-\d{3}$")
# channel order (same MR sequences in both namings): T1 native, T1 contrast, T2, T2-FLAIR
BRATS_CHANNELS_2021 = ("t1", "t1ce", "t2", "flair")
BRATS_CHANNELS_2023 = ("t1n", "t1c", "t2w", "t2f")
BRATS_CLASSES = ("background", "NCR", "ED", "ET")
BRATS_REGIONS = ("WT", "TC", "ET")


class BraTSDataset(VolumeDataset):
    """BraTS cases; labels harmonised to 0 background, 1 necrotic/non-enhancing core (NCR),
    2 edema / SNFH (ED), 3 enhancing tumour (ET) — BraTS 2021's ET label 4 becomes 3. With
    ``regions`` the mask is ``3×X×Y×Z`` binary: WT = {1,2,3}, TC = {1,3}, ET = {3}."""

    def __init__(self, manifest: pd.DataFrame, *, regions: bool = False, **kwargs: Any) -> None:
        classes = list(BRATS_REGIONS) if regions else list(BRATS_CLASSES)
        super().__init__(
            manifest, classes=classes, channel_names=list(BRATS_CHANNELS_2023), **kwargs
        )
        self.regions = regions

    def convert_mask(self, mask: np.ndarray, row: Mapping[str, Any]) -> np.ndarray:
        allowed = {0, 1, 2, 4} if row.get("version") == "2021" else {0, 1, 2, 3}
        values = set(np.unique(mask).tolist())
        if not values <= allowed:
            raise SampleError(
                f"BraTS {row.get('version')} mask has labels {sorted(values - allowed)} outside "
                f"{sorted(allowed)}",
                sample_id=str(row["id"]),
                path=str(self.resolve(row["mask"])),
            )
        if row.get("version") == "2021":
            mask = np.where(mask == 4, 3, mask)
        if not self.regions:
            return mask
        return np.stack([mask > 0, (mask == 1) | (mask == 3), mask == 3]).astype(np.int64)


@register_dataset("brats", tags=("mri", "segmentation", "3d", "brain"))
def brats(root: str | Path, split: str | None = "train", *, regions: bool = False, **options: Any):
    """BraTS 2021 (``BraTS2021_XXXXX/BraTS2021_XXXXX_{t1,t1ce,t2,flair,seg}.nii.gz``) or 2023+
    (``BraTS-GLI-XXXXX-XXX/BraTS-GLI-XXXXX-XXX-{t1n,t1c,t2w,t2f,seg}.nii.gz``, any sub-challenge
    prefix) case folders anywhere up to two levels below ``root``.

    Channels: (T1, T1ce, T2, FLAIR) = (t1n, t1c, t2w, t2f). Split ``train``: cases with a ``seg``
    file; ``validation``: cases without. ``patient_id`` of a 2023 case drops the timepoint suffix.
    """
    options, slice_axis, only = split_options(options, "brats")
    r = checked_root(root, "brats")
    cases = [
        p
        for p in [r, *r.iterdir(), *(q for p in r.iterdir() if p.is_dir() for q in p.iterdir())]
        if p.is_dir() and (_BRATS_2021.match(p.name) or _BRATS_2023.match(p.name))
    ]
    if not cases:
        raise FileNotFoundError(
            f"brats: no BraTS2021_XXXXX or BraTS-XXX-XXXXX-XXX case folder under {str(r)!r}"
        )
    rows = []
    for case in sorted(cases, key=lambda p: p.name):
        if _BRATS_2021.match(case.name):
            version, sep, mods, patient = "2021", "_", BRATS_CHANNELS_2021, case.name
        else:
            version, sep, mods, patient = (
                "2023",
                "-",
                BRATS_CHANNELS_2023,
                case.name.rsplit("-", 1)[0],
            )
        seg = case / f"{case.name}{sep}seg.nii.gz"
        rows.append(
            {
                "id": case.name,
                "patient_id": patient,
                "image": [str((case / f"{case.name}{sep}{m}.nii.gz").relative_to(r)) for m in mods],
                "mask": str(seg.relative_to(r)) if seg.exists() else None,
                "split": "train" if seg.exists() else "validation",
                "version": version,
                "modality": "MR",
            }
        )
    ds = BraTSDataset(pd.DataFrame(rows), root=r, regions=regions, name="brats", **options)
    return finish(ds, split, slice_axis, only)
