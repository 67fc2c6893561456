"""The ``skm_tea`` dataset: SKM-TEA's Raw Data track (Desai et al., NeurIPS Datasets 2021).

Layout (``StanfordMIMI/skm-tea`` ``DATASET.md``, v1.0.0): ``annotations/<version>/{train,val,test}.json``
(COCO-like; ``images`` lists ``file_name``, ``scan_id``, ``subject_id``, ``voxel_spacing``,
``matrix_shape``), ``files_recon_calib-24/<scan>.h5`` with ``kspace`` (Nx, Ny, Nz, echoes, coils)
hybrid k-space (x, ky, kz), ``maps`` (Nx, Ny, Nz, coils, maps), ``target`` (Nx, Ny, Nz, echoes,
maps), all complex64, and ``segmentation_masks/raw-data-track/<scan>.nii.gz`` tissue labels.
2D slices are the (ky, kz) planes along x; the mask runs along kz.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.masks import check_label_map
from medimg_bench.datasets.mri_recon.base import ReconDataset
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["SKM_TEA_TISSUES", "SkmTeaDataset", "skm_tea"]

SKM_TEA_TISSUES = (
    "patellar_cartilage", "femoral_cartilage", "tibial_cartilage_medial",
    "tibial_cartilage_lateral", "meniscus_medial", "meniscus_lateral",
)
_COMBINED = ("patellar_cartilage", "femoral_cartilage", "tibial_cartilage", "meniscus")
_SPLITS = {"train": "train", "val": "val", "validation": "val", "test": "test"}


class SkmTeaDataset(ReconDataset):
    """SKM-TEA scans, one sample per scan and echo (id ``<scan>_echo<n>``)."""

    def __init__(self, manifest: pd.DataFrame, *, combine_tissues: bool = False, **kwargs: Any) -> None:
        classes = ["background", *(_COMBINED if combine_tissues else SKM_TEA_TISSUES)]
        super().__init__(manifest, classes=classes, **kwargs)
        self.combine_tissues = combine_tissues

    def read_arrays(self, row: Mapping[str, Any], path: Path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        import h5py

        e = int(row["echo"]) - 1
        try:
            with h5py.File(path, "r") as f:
                missing = [k for k in ("kspace", "target") if k not in f]
                if missing:
                    raise SampleError(f"SKM-TEA file lacks {missing} (has {sorted(f.keys())})",
                                      sample_id=str(row["id"]), path=str(path))
                ks, tg = f["kspace"], f["target"]
                if ks.ndim != 5 or tg.ndim != 5 or not e < ks.shape[3]:
                    raise SampleError(f"expected kspace (Nx, Ny, Nz, echoes, coils) and target (Nx, Ny, Nz, "
                                      f"echoes, maps) holding echo {e + 1}; got {ks.shape}, {tg.shape}",
                                      sample_id=str(row["id"]), path=str(path))
                kspace = ks[:, :, :, e, :].transpose(0, 3, 1, 2)
                target = np.abs(tg[:, :, :, e, 0])
                maps = f["maps"][..., 0].transpose(0, 3, 1, 2) if "maps" in f else None
        except OSError as exc:
            raise SampleError(f"cannot read HDF5: {exc}", sample_id=str(row["id"]), path=str(path)) from exc
        return kspace, maps, target

    def read_seg(self, row: Mapping[str, Any], path: Path, shape: tuple[int, ...]) -> np.ndarray:
        from medimg_bench.datasets.io import read_image

        arr, _ = read_image(path)
        arr = np.asarray(arr)
        if arr.ndim == 4 and arr.shape[-1] == len(SKM_TEA_TISSUES):  # one-hot, as the h5 "seg"
            labels = np.where(arr.any(-1), arr.argmax(-1) + 1, 0)
        elif arr.ndim == 3:
            labels = arr
        else:
            raise SampleError(f"tissue mask must be a label map or {len(SKM_TEA_TISSUES)}-channel one-hot, "
                              f"got shape {arr.shape}", sample_id=str(row["id"]), path=str(path))
        try:  # the one mask decoder's label-map rule: fractions, negatives, labels past the tissues refused
            labels = check_label_map(labels, path, num_classes=len(SKM_TEA_TISSUES) + 1, what="tissue mask")
        except ValueError as exc:
            raise SampleError(str(exc), sample_id=str(row["id"]), path=str(path)) from exc
        if self.combine_tissues:  # medial + lateral tibial cartilage, medial + lateral meniscus
            labels = np.array([0, 1, 2, 3, 3, 4, 4])[labels]
        return labels


def _scans(root: Path, version: str) -> list[dict[str, Any]]:
    ann = root / "annotations" / version
    if not ann.is_dir():
        raise FileNotFoundError(f"skm_tea: no annotation folder {str(ann)!r} (annotations/<version>/{{train,val,test}}.json)")
    rows = []
    for name in ("train", "val", "test"):
        p = ann / f"{name}.json"
        if not p.exists():
            continue
        try:
            images = json.loads(p.read_text())["images"]
            for im in images:
                rows.append({"scan": str(im["scan_id"]), "file_name": str(im["file_name"]),
                             "subject": str(im.get("subject_id", im["scan_id"])), "split": _SPLITS[name],
                             "spacing": im.get("voxel_spacing")})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"skm_tea: cannot read annotation file {str(p)!r}: {exc!r}") from exc
    if not rows:
        raise FileNotFoundError(f"skm_tea: no train/val/test.json in {str(ann)!r}")
    return rows


@register_dataset("skm_tea", tags=("mri", "reconstruction", "segmentation", "3d"))
def skm_tea(
    root: str | Path,
    split: str | None = "test",
    *,
    version: str = "v1.0.0",
    echoes: Sequence[int] = (1, 2),
    recon_dir: str = "files_recon_calib-24",
    seg_dir: str = "segmentation_masks/raw-data-track",
    combine_tissues: bool = False,
    **options: Any,
) -> SkmTeaDataset:
    """SKM-TEA Raw Data track: one sample per scan and echo (``echoes``), split from the
    annotation files of ``version``; patient = ``subject_id``; masks as in
    :class:`~medimg_bench.datasets.mri_recon.base.ReconDataset` (``mask_kind``, ``accelerations``,
    ``center_fractions``, ``mask_seed``)."""
    r = Path(root).expanduser()
    if not r.is_dir():
        raise FileNotFoundError(f"skm_tea: dataset root {str(r)!r} does not exist or is not a directory")
    if not set(echoes) <= {1, 2} or not echoes:
        raise ValueError(f"skm_tea: echoes must be a non-empty subset of (1, 2), got {list(echoes)}")
    rows = []
    for s in _scans(r, version):
        seg = Path(seg_dir) / f"{s['scan']}.nii.gz"
        for e in echoes:
            rows.append({"id": f"{s['scan']}_echo{e}", "patient_id": s["subject"], "scan_id": s["scan"],
                         "echo": int(e), "file": f"{recon_dir}/{s['file_name']}",
                         "seg": str(seg) if (r / seg).exists() else None, "split": s["split"],
                         "spacing": s["spacing"], "modality": "MR"})
    ds = SkmTeaDataset(pd.DataFrame(rows), root=r, name="skm_tea", combine_tissues=combine_tissues, **options)
    if split is not None:
        present = sorted(set(ds.manifest["split"]))
        ds = ds.filter(split=split)  # type: ignore[assignment]
        if len(ds) == 0:
            raise ValueError(f"skm_tea: split {split!r} is empty under {str(r)!r} (splits present: {present})")
    return ds
