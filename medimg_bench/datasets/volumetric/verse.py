"""The ``verse`` dataset. VerSe'19/'20 in the BIDS-like layout: ``<set>/rawdata/sub-*/<stem>_ct.nii.gz`` with
``<set>/derivatives/sub-*/<stem>_seg-vert_msk.nii.gz`` and ``<stem>_seg-subreg_ctd.json``.
``root`` is one set folder or their parent; a set folder's name gives the split
(``...training`` → train, ``...validation``, ``...test``). One sample per CT scan; a subject
with several scans keeps one ``patient_id`` (``sub-*``)."""

from __future__ import annotations

import json
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

__all__ = ["VERSE_LABELS", "VerSeDataset", "verse"]


# -- VerSe -------------------------------------------------------------------------------------
VERSE_LABELS: dict[int, str] = {
    **{i: f"C{i}" for i in range(1, 8)},
    **{i + 7: f"T{i}" for i in range(1, 13)},
    **{i + 19: f"L{i}" for i in range(1, 7)},
    26: "sacrum",
    27: "coccyx",
    28: "T13",
}


class VerSeDataset(VolumeDataset):
    """VerSe scans with vertebra label maps (1-7 C1-C7, 8-19 T1-T12, 20-25 L1-L6, 26 sacrum,
    27 coccyx, 28 T13). ``meta["centroids"]`` maps label → (i, j, k) voxel position in the
    returned array and ``meta["centroids_world"]`` → RAS mm, from the ``*_ctd.json`` file."""

    def __init__(self, manifest: pd.DataFrame, **kwargs: Any) -> None:
        classes = ["background"] + [VERSE_LABELS[i] for i in range(1, 29)]
        super().__init__(manifest, classes=classes, **kwargs)

    def extra_meta(self, row: Mapping[str, Any], affine: np.ndarray) -> dict[str, Any]:
        ctd = row.get("centroids")
        if not isinstance(ctd, str):
            return {}
        world = _verse_centroids_world(self.resolve(ctd), self.resolve(row["image"]))
        inv = np.linalg.inv(affine)
        voxel = {
            k: tuple(float(v) for v in (inv @ np.append(w, 1.0))[:3]) for k, w in world.items()
        }
        return {
            "centroids": voxel,
            "centroids_world": {k: tuple(float(v) for v in w) for k, w in world.items()},
        }


def _verse_centroids_world(ctd_path: Path, image_path: Path) -> dict[int, np.ndarray]:
    """Centroids of a VerSe ``*_ctd.json`` in RAS mm. The file's coordinates are voxel indices of
    the image reoriented to its ``direction`` axis codes (e.g. P, I, R)."""
    from nibabel import orientations as nio

    from medimg_bench.datasets.io import read_nifti_header

    try:
        entries = json.loads(ctd_path.read_text())
    except (OSError, ValueError) as exc:
        raise SampleError(f"cannot read centroid JSON: {exc}", path=str(ctd_path)) from exc
    if not isinstance(entries, list) or not entries or "direction" not in entries[0]:
        raise SampleError(
            "centroid JSON must be a list starting with {'direction': [...]}", path=str(ctd_path)
        )
    header = read_nifti_header(image_path)
    affine, shape = header["affine"], header["shape"][:3]
    transform = nio.ornt_transform(
        nio.io_orientation(affine), nio.axcodes2ornt(tuple(entries[0]["direction"]))
    )
    ctd_affine = affine @ nio.inv_ornt_aff(
        transform, shape
    )  # voxel of the reoriented grid -> world
    out = {}
    for e in entries[1:]:
        try:
            out[int(e["label"])] = (
                ctd_affine @ np.array([e["X"], e["Y"], e["Z"], 1.0], dtype=float)
            )[:3]
        except (KeyError, TypeError, ValueError) as exc:
            raise SampleError(f"bad centroid entry {e!r}", path=str(ctd_path)) from exc
    return out


def _verse_split(path: Path) -> str | None:
    name = path.name.lower()
    for split in ("training", "validation", "test"):
        if split in name:
            return {"training": "train", "validation": "validation", "test": "test"}[split]
    return None


@register_dataset("verse", tags=("ct", "segmentation", "3d", "spine"))
def verse(root: str | Path, split: str | None = "test", **options: Any):
    """VerSe'19/'20 in the BIDS-like layout: ``<set>/rawdata/sub-*/<stem>_ct.nii.gz`` with
    ``<set>/derivatives/sub-*/<stem>_seg-vert_msk.nii.gz`` and ``<stem>_seg-subreg_ctd.json``.
    ``root`` is one set folder or their parent; a set folder's name gives the split
    (``...training`` → train, ``...validation``, ``...test``). One sample per CT scan; a subject
    with several scans keeps one ``patient_id`` (``sub-*``)."""
    options, slice_axis, only = split_options(options, "verse")
    r = checked_root(root, "verse")
    sets = (
        [r]
        if (r / "rawdata").is_dir()
        else sorted(p for p in r.iterdir() if (p / "rawdata").is_dir())
    )
    if not sets:
        raise FileNotFoundError(
            f"verse: no rawdata folder in {str(r)!r} nor in a set folder below it"
        )
    rows = []
    for s in sets:
        for ct in sorted((s / "rawdata").glob("sub-*/*_ct.nii.gz")):
            stem = ct.name[: -len("_ct.nii.gz")]
            deriv = s / "derivatives" / ct.parent.name
            msk = deriv / f"{stem}_seg-vert_msk.nii.gz"
            ctd = deriv / f"{stem}_seg-subreg_ctd.json"
            rows.append(
                {
                    "id": stem,
                    "patient_id": ct.parent.name,
                    "image": str(ct.relative_to(r)),
                    "mask": str(msk.relative_to(r)) if msk.exists() else None,
                    "centroids": str(ctd.relative_to(r)) if ctd.exists() else None,
                    "split": _verse_split(s) or "train",
                    "modality": "CT",
                }
            )
    if not rows:
        raise FileNotFoundError(f"verse: no rawdata/sub-*/*_ct.nii.gz under {str(r)!r}")
    ds = VerSeDataset(pd.DataFrame(rows), root=r, name="verse", **options)
    return finish(ds, split, slice_axis, only)
