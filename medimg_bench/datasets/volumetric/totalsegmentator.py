"""The ``totalsegmentator`` dataset. TotalSegmentator dataset: ``meta.csv`` (``;``- or ``,``-separated: ``image_id``, ``split``
train/val/test, ``age``, ``gender``, ``institute``...) and ``sXXXX/ct.nii.gz`` +
``sXXXX/segmentations/<structure>.nii.gz``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.volumetric.manifest import checked_root, finish, split_options
from medimg_bench.datasets.volumetric.volume import (
    VolumeDataset,
    nifti_stem,
    read_volume,
)
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["TotalSegmentatorDataset", "totalsegmentator"]


# -- TotalSegmentator --------------------------------------------------------------------------
class TotalSegmentatorDataset(VolumeDataset):
    """TotalSegmentator subjects: the per-structure binary masks in ``segmentations/`` merged into
    one label map with ids from ``class_map``. Where structures overlap, the higher id wins; the
    count of such voxels is ``meta["overlap_voxels"]``."""

    def __init__(
        self, manifest: pd.DataFrame, *, class_map: Mapping[int, str], **kwargs: Any
    ) -> None:
        n = max(class_map) + 1
        classes = [class_map.get(i, "background" if i == 0 else f"unused_{i}") for i in range(n)]
        super().__init__(manifest, classes=classes, **kwargs)
        self.class_map = dict(sorted(class_map.items()))
        self._overlap: dict[str, int] = {}

    def read_mask(
        self, row: Mapping[str, Any], image_meta: Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray | None] | None:
        seg_dir = self.resolve(row["mask"])
        if not seg_dir.is_dir():
            raise SampleError(
                "segmentations folder is missing", sample_id=str(row["id"]), path=str(seg_dir)
            )
        shape = tuple(image_meta["shape"])
        labels = np.zeros(shape, dtype=np.int64)
        overlap = 0
        mask_affine = None
        for cid, structure in self.class_map.items():
            if cid == 0:
                continue
            path = seg_dir / f"{structure}.nii.gz"
            if not path.exists():
                raise SampleError(
                    f"structure mask {structure!r} is missing",
                    sample_id=str(row["id"]),
                    path=str(path),
                )
            m, mmeta = read_volume(path)
            if mask_affine is None:
                mask_affine = mmeta.get("affine")
            elif not np.allclose(mmeta["affine"], mask_affine, atol=1e-3):
                raise SampleError(
                    "structure mask affine differs from the other structures",
                    sample_id=str(row["id"]),
                    path=str(path),
                )
            if m.shape != shape:
                raise SampleError(
                    f"image/mask shape mismatch: image {shape}, structure mask {m.shape}",
                    sample_id=str(row["id"]),
                    path=str(path),
                )
            on = np.asarray(m) > 0
            overlap += int(np.count_nonzero(on & (labels > 0)))
            labels[on] = cid
        self._overlap[str(row["id"])] = overlap
        return labels, mask_affine

    def extra_meta(self, row: Mapping[str, Any], affine: np.ndarray) -> dict[str, Any]:
        return {"overlap_voxels": self._overlap.pop(str(row["id"]), 0)}


def resolve_class_map(
    value: Mapping[Any, str] | str | Path | None,
    first_case: Path | None,
    structures: Sequence[str] | None,
) -> dict[int, str]:
    if value is not None:
        if not isinstance(value, Mapping):
            path = Path(value)
            try:
                value = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                raise ValueError(
                    f"totalsegmentator: cannot read class_map {str(path)!r}: {exc}"
                ) from exc
        cmap = {int(k): str(v) for k, v in value.items() if int(k) != 0}  # type: ignore[union-attr]
        if structures is not None:
            unknown = set(structures) - set(cmap.values())
            if unknown:
                raise ValueError(f"totalsegmentator: structures {sorted(unknown)} not in class_map")
            cmap = {k: v for k, v in cmap.items() if v in set(structures)}
        return cmap
    if structures is None:
        if first_case is None or not (first_case / "segmentations").is_dir():
            raise FileNotFoundError(
                "totalsegmentator: no segmentations folder to list structures from; "
                "pass structures= or class_map="
            )
        structures = sorted(
            nifti_stem(p.name) for p in (first_case / "segmentations").glob("*.nii*")
        )
    return {i + 1: s for i, s in enumerate(structures)}


@register_dataset("totalsegmentator", tags=("ct", "segmentation", "3d", "whole-body"))
def totalsegmentator(
    root: str | Path,
    split: str | None = "test",
    *,
    class_map: Mapping[Any, str] | str | Path | None = None,
    structures: Sequence[str] | None = None,
    **options: Any,
):
    """TotalSegmentator dataset: ``meta.csv`` (``;``- or ``,``-separated: ``image_id``, ``split``
    train/val/test, ``age``, ``gender``, ``institute``...) and ``sXXXX/ct.nii.gz`` +
    ``sXXXX/segmentations/<structure>.nii.gz``.

    Label ids: ``class_map`` (dict id → structure, or a JSON file of it, e.g. the official v2
    "total" map) or, without it, ``structures`` (default: every mask of the first subject, sorted
    by name) numbered 1..K in order.
    """
    options, slice_axis, only = split_options(options, "totalsegmentator")
    r = checked_root(root, "totalsegmentator")
    meta_csv = r / "meta.csv"
    if not meta_csv.is_file():
        raise FileNotFoundError(f"totalsegmentator: {str(meta_csv)!r} does not exist")
    try:
        table = pd.read_csv(meta_csv, sep=None, engine="python", dtype={"image_id": str})
    except (ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"totalsegmentator: cannot parse {str(meta_csv)!r}: {exc}") from exc
    for col in ("image_id", "split"):
        if col not in table.columns:
            raise ValueError(f"totalsegmentator: {str(meta_csv)!r} has no {col!r} column")
    rename = {"gender": "sex", "institute": "site"}
    table = table.rename(columns=rename)
    table["id"] = table["image_id"].astype(str)
    table["patient_id"] = table["id"]
    table["image"] = table["id"] + "/ct.nii.gz"
    table["mask"] = table["id"] + "/segmentations"
    table["modality"] = "CT"
    first = r / table["id"].iloc[0] if len(table) else None
    cmap = resolve_class_map(class_map, first, structures)
    ds = TotalSegmentatorDataset(table, root=r, class_map=cmap, name="totalsegmentator", **options)
    return finish(ds, split, slice_axis, only)
