"""The ``kits23`` dataset. KiTS23: ``dataset/case_XXXXX/{imaging,segmentation}.nii.gz`` (``root`` is the kits23 clone
or its ``dataset`` folder); ``dataset/kits.json`` clinical data, when present, fills ``age``
(age_at_nephrectomy) and ``sex`` (gender). Only the training set is public: split ``train``."""

from __future__ import annotations

import json
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

__all__ = ["KiTS23Dataset", "kits23"]


# -- KiTS23 ------------------------------------------------------------------------------------
KITS_CLASSES = ("background", "kidney", "tumor", "cyst")
KITS_REGIONS = ("kidney_and_masses", "masses", "tumor")


class KiTS23Dataset(VolumeDataset):
    """KiTS23 cases: labels 0 background, 1 kidney, 2 tumour, 3 cyst. With ``regions`` the mask is
    the challenge's hierarchical evaluation regions, ``3×X×Y×Z`` binary: kidney+masses {1,2,3},
    masses {2,3}, tumour {2}."""

    def __init__(self, manifest: pd.DataFrame, *, regions: bool = False, **kwargs: Any) -> None:
        super().__init__(
            manifest, classes=list(KITS_REGIONS if regions else KITS_CLASSES), **kwargs
        )
        self.regions = regions

    def convert_mask(self, mask: np.ndarray, row: Mapping[str, Any]) -> np.ndarray:
        if mask.min() < 0 or mask.max() > 3:
            raise SampleError(
                f"KiTS23 mask has labels outside 0..3 (min {mask.min()}, max {mask.max()})",
                sample_id=str(row["id"]),
                path=str(self.resolve(row["mask"])),
            )
        if not self.regions:
            return mask
        return np.stack([mask > 0, (mask == 2) | (mask == 3), mask == 2]).astype(np.int64)


@register_dataset("kits23", tags=("ct", "segmentation", "3d", "kidney"))
def kits23(root: str | Path, split: str | None = "train", *, regions: bool = False, **options: Any):
    """KiTS23: ``dataset/case_XXXXX/{imaging,segmentation}.nii.gz`` (``root`` is the kits23 clone
    or its ``dataset`` folder); ``dataset/kits.json`` clinical data, when present, fills ``age``
    (age_at_nephrectomy) and ``sex`` (gender). Only the training set is public: split ``train``."""
    options, slice_axis, only = split_options(options, "kits23")
    r = checked_root(root, "kits23")
    base = r / "dataset" if (r / "dataset").is_dir() else r
    cases = sorted(p for p in base.iterdir() if p.is_dir() and re.match(r"^case_\d{5}$", p.name))
    if not cases:
        raise FileNotFoundError(f"kits23: no case_XXXXX folder under {str(base)!r}")
    clinical: dict[str, Mapping[str, Any]] = {}
    kits_json = base / "kits.json"
    if kits_json.is_file():
        try:
            clinical = {str(c["case_id"]): c for c in json.loads(kits_json.read_text())}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"kits23: cannot parse {str(kits_json)!r}: {exc}") from exc
    rows = []
    for case in cases:
        seg = case / "segmentation.nii.gz"
        info = clinical.get(case.name, {})
        rows.append(
            {
                "id": case.name,
                "patient_id": case.name,
                "image": f"{case.name}/imaging.nii.gz",
                "mask": f"{case.name}/segmentation.nii.gz" if seg.exists() else None,
                "split": "train",
                "modality": "CT",
                "age": info.get("age_at_nephrectomy"),
                "sex": info.get("gender"),
            }
        )
    ds = KiTS23Dataset(pd.DataFrame(rows), root=base, regions=regions, name="kits23", **options)
    return finish(ds, split, slice_axis, only)
