"""The ``builtin_real`` dataset. pydicom's ``CT_small.dcm`` / ``MR_small.dcm`` and nibabel's ``anatomical.nii`` /
``example4d.nii.gz`` (whichever are installed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.registry import register_dataset

__all__ = ["BuiltinRealFiles"]


class BuiltinRealFiles(ManifestDataset):
    """Real DICOM and NIfTI files shipped inside pydicom and nibabel, read with our readers."""

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.io import read_image

        array, meta = read_image(row["image"])
        array = np.asarray(array, dtype=np.float32)
        if array.ndim == 4:  # 4D fMRI: first volume
            array = array[..., 0]
        spacing = tuple(meta.get("spacing", ()))[: array.ndim]
        return {
            "id": row["id"],
            "image": torch.from_numpy(np.ascontiguousarray(array))[None],
            "meta": {**self.meta_for(row), "path": meta["path"], "spacing": spacing},
        }


@register_dataset("builtin_real", tags=("real", "dicom", "nifti"))
def builtin_real(root: str | Path | None = None, split: str | None = None) -> BuiltinRealFiles:
    """pydicom's ``CT_small.dcm`` / ``MR_small.dcm`` and nibabel's ``anatomical.nii`` /
    ``example4d.nii.gz`` (whichever are installed)."""
    rows = []
    try:
        from pydicom.data import get_testdata_file

        for name, modality in (("CT_small.dcm", "CT"), ("MR_small.dcm", "MR")):
            path = get_testdata_file(name)
            if path:
                rows.append({"id": name, "image": str(path), "modality": modality})
    except ImportError:  # pragma: no cover - pydicom is a dependency
        pass
    try:
        from nibabel.testing import data_path

        for name in ("anatomical.nii", "example4d.nii.gz"):
            if (Path(data_path) / name).exists():
                rows.append({"id": name, "image": str(Path(data_path) / name), "modality": "MR"})
    except ImportError:  # pragma: no cover
        pass
    if not rows:
        raise FileNotFoundError("builtin_real: neither pydicom nor nibabel ships its test files here")
    return BuiltinRealFiles(pd.DataFrame(rows), path_columns=("image",), name="builtin_real")
