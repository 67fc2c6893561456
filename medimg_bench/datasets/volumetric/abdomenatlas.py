"""The ``abdomenatlas`` dataset: AbdomenAtlas 1.0 / 1.1 (Mini), the Touchstone training set.

Layout (the ``BodyMaps/AbdomenAtlas1.0Mini`` release; ``MrGiovanni/Touchstone`` README):
``BDMAP_XXXXXXXX/ct.nii.gz``, ``BDMAP_XXXXXXXX/segmentations/<structure>.nii.gz`` (1.0Mini: aorta,
gall_bladder, kidney_left, kidney_right, liver, pancreas, postcava, spleen, stomach; 1.1 adds
more) and ``combined_labels.nii.gz``. The per-structure masks are the labels (their names are
the class names; ``combined_labels`` values are not documented in the release, so they are not
used). No official split ships with the release: every case is ``train`` unless ``split_file``
(a CSV with ``id`` / ``BDMAP_ID`` and ``split`` columns) says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.volumetric.manifest import checked_root, finish, split_options
from medimg_bench.datasets.volumetric.totalsegmentator import (
    TotalSegmentatorDataset,
    resolve_class_map,
)
from medimg_bench.registry import register_dataset

__all__ = ["ABDOMENATLAS_1_0_STRUCTURES", "abdomenatlas"]

ABDOMENATLAS_1_0_STRUCTURES = (
    "aorta", "gall_bladder", "kidney_left", "kidney_right", "liver", "pancreas", "postcava", "spleen", "stomach",
)


def _splits(path: Path) -> dict[str, str]:
    try:
        table = pd.read_csv(path, sep=None, engine="python", dtype=str)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(f"abdomenatlas: cannot read split_file {str(path)!r}: {exc}") from exc
    idc = next((c for c in ("id", "BDMAP_ID", "case") if c in table.columns), None)
    if idc is None or "split" not in table.columns:
        raise ValueError(f"abdomenatlas: split_file {str(path)!r} needs an id (id / BDMAP_ID) and a split column")
    return dict(zip(table[idc].astype(str), table["split"].astype(str)))


@register_dataset("abdomenatlas", tags=("ct", "segmentation", "3d", "abdomen"))
def abdomenatlas(
    root: str | Path,
    split: str | None = None,
    *,
    structures: Sequence[str] | None = None,
    split_file: str | Path | None = None,
    **options: Any,
) -> Any:
    """AbdomenAtlas ``BDMAP_*/ct.nii.gz`` + ``segmentations/<structure>.nii.gz``; label ids
    1..K follow ``structures`` (default: the first case's masks, sorted by name); one sample per
    case, patient = case (the release has no patient ids)."""
    options, slice_axis, only = split_options(options, "abdomenatlas")
    r = checked_root(root, "abdomenatlas")
    cases = sorted(p for p in r.iterdir() if p.is_dir() and (p / "ct.nii.gz").exists())
    if not cases:
        raise FileNotFoundError(f"abdomenatlas: no <case>/ct.nii.gz under {str(r)!r} (BDMAP_* folders)")
    assigned = _splits(Path(split_file)) if split_file is not None else {}
    rows = [{"id": c.name, "patient_id": c.name, "image": f"{c.name}/ct.nii.gz",
             "mask": f"{c.name}/segmentations" if (c / "segmentations").is_dir() else None,
             "split": assigned.get(c.name, "train" if not assigned else None), "modality": "CT"} for c in cases]
    first = next((c for c in cases if (c / "segmentations").is_dir()), None)
    cmap = resolve_class_map(None, first, structures)
    ds = TotalSegmentatorDataset(pd.DataFrame(rows), root=r, class_map=cmap, name="abdomenatlas", **options)
    return finish(ds, split, slice_axis, only)
