"""Manifest helpers shared by the volumetric loaders: root checks, split options, the final dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from medimg_bench.datasets.volumetric.volume import (
    SliceDataset,
    VolumeDataset,
)

_COMMON = ("spacing", "orientation", "transform", "segment_map")


def checked_root(root: str | Path, name: str) -> Path:
    r = Path(root).expanduser()
    if not r.is_dir():
        raise FileNotFoundError(
            f"{name}: dataset root {str(r)!r} does not exist or is not a directory"
        )
    return r


def finish(
    ds: VolumeDataset, split: str | None, slice_axis: int | None, only_labeled_slices: bool
) -> VolumeDataset | SliceDataset:
    if split is not None:
        present = sorted(set(ds.manifest["split"].dropna()))
        ds = ds.filter(split=split)  # type: ignore[assignment]
        if len(ds) == 0:
            raise ValueError(
                f"{ds.name}: split {split!r} is empty under {str(ds.root)!r} (splits present: {present})"
            )
    if slice_axis is not None:
        return ds.slices(axis=slice_axis, only_labeled=only_labeled_slices, transform=ds.transform)
    return ds


def split_options(options: dict[str, Any], name: str) -> tuple[dict[str, Any], int | None, bool]:
    unknown = set(options) - {*_COMMON, "slice_axis", "only_labeled_slices"}
    if unknown:
        raise TypeError(
            f"{name}: unknown options {sorted(unknown)} (common options: {sorted(_COMMON)}, "
            "slice_axis, only_labeled_slices)"
        )
    slice_axis = options.pop("slice_axis", None)
    only = bool(options.pop("only_labeled_slices", False))
    return options, slice_axis, only


def rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path
