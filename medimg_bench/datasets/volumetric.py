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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets._volumetric_utils import (
    SliceDataset,
    VolumeDataset,
    nifti_stem,
    read_volume,
)
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = [
    "BraTSDataset",
    "KiTS23Dataset",
    "TotalSegmentatorDataset",
    "VerSeDataset",
    "VolumeDataset",
    "SliceDataset",
    "msd",
    "brats",
    "kits23",
    "totalsegmentator",
    "verse",
    "nifti_pairs",
    "VERSE_LABELS",
]

_COMMON = ("spacing", "orientation", "transform")


def _root(root: str | Path, name: str) -> Path:
    r = Path(root).expanduser()
    if not r.is_dir():
        raise FileNotFoundError(
            f"{name}: dataset root {str(r)!r} does not exist or is not a directory"
        )
    return r


def _finish(
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


def _split_options(options: dict[str, Any], name: str) -> tuple[dict[str, Any], int | None, bool]:
    unknown = set(options) - {*_COMMON, "slice_axis", "only_labeled_slices"}
    if unknown:
        raise TypeError(
            f"{name}: unknown options {sorted(unknown)} (common options: {sorted(_COMMON)}, "
            "slice_axis, only_labeled_slices)"
        )
    slice_axis = options.pop("slice_axis", None)
    only = bool(options.pop("only_labeled_slices", False))
    return options, slice_axis, only


# -- Medical Segmentation Decathlon ------------------------------------------------------------
def _msd_task_dir(root: Path, task: str | None) -> Path:
    if (root / "dataset.json").is_file() and task is None:
        return root
    tasks = sorted(p for p in root.iterdir() if p.is_dir() and (p / "dataset.json").is_file())
    if task is not None:
        matches = [
            p
            for p in tasks
            if p.name == task
            or p.name.startswith(task + "_")
            or p.name.lower().endswith("_" + task.lower())
        ]
        if len(matches) != 1:
            raise FileNotFoundError(
                f"msd: task {task!r} not found under {str(root)!r} (tasks: {[p.name for p in tasks]})"
            )
        return matches[0]
    if not tasks:
        raise FileNotFoundError(
            f"msd: no dataset.json in {str(root)!r} nor in a Task folder below it"
        )
    raise ValueError(
        f"msd: {str(root)!r} holds several tasks {[p.name for p in tasks]}; pass task="
    )


@register_dataset("msd", tags=("ct", "mri", "segmentation", "3d"))
def msd(root: str | Path, split: str | None = "train", *, task: str | None = None, **options: Any):
    """Medical Segmentation Decathlon task (any of the 10) from its ``dataset.json``.

    ``root`` is a task folder (``Task09_Spleen/`` with ``dataset.json``, ``imagesTr``,
    ``labelsTr``, ``imagesTs``) or their parent with ``task="Task09_Spleen"`` (or ``"Task09"``,
    ``"Spleen"``). Splits: ``train`` (the ``training`` list, labelled) and ``test`` (the ``test``
    list, no labels). Multi-modal 4D images give one channel per modality, in dataset.json order.
    """
    options, slice_axis, only = _split_options(options, "msd")
    task_dir = _msd_task_dir(_root(root, "msd"), task)
    meta_path = task_dir / "dataset.json"
    try:
        info = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"msd: cannot parse {str(meta_path)!r}: {exc}") from exc
    for key in ("labels", "training"):
        if key not in info:
            raise ValueError(f"msd: {str(meta_path)!r} has no {key!r} entry")
    labels = {int(k): str(v) for k, v in info["labels"].items()}
    if sorted(labels) != list(range(len(labels))):
        raise ValueError(f"msd: labels in {str(meta_path)!r} are not 0..K-1: {sorted(labels)}")
    modalities = [
        str(v) for _, v in sorted(info.get("modality", {}).items(), key=lambda kv: int(kv[0]))
    ]
    modality = "CT" if "CT" in modalities else "MR"
    rows = []
    for entry in info["training"]:
        rows.append({"image": _rel(entry["image"]), "mask": _rel(entry["label"]), "split": "train"})
    for entry in info.get("test", []):
        path = entry["image"] if isinstance(entry, Mapping) else entry
        rows.append({"image": _rel(path), "mask": None, "split": "test"})
    manifest = pd.DataFrame(rows, columns=["image", "mask", "split"])
    manifest.insert(0, "id", [nifti_stem(Path(p).name) for p in manifest["image"]])
    manifest["patient_id"] = manifest["id"]
    manifest["modality"] = modality
    ds = VolumeDataset(
        manifest,
        root=task_dir,
        classes=[labels[i] for i in range(len(labels))],
        channel_names=modalities,
        name=f"msd/{info.get('name', task_dir.name)}",
        **options,
    )
    return _finish(ds, split, slice_axis, only)


def _rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path


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
    options, slice_axis, only = _split_options(options, "brats")
    r = _root(root, "brats")
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
    return _finish(ds, split, slice_axis, only)


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
    options, slice_axis, only = _split_options(options, "kits23")
    r = _root(root, "kits23")
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
    return _finish(ds, split, slice_axis, only)


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


def _class_map(
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
    options, slice_axis, only = _split_options(options, "totalsegmentator")
    r = _root(root, "totalsegmentator")
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
    cmap = _class_map(class_map, first, structures)
    ds = TotalSegmentatorDataset(table, root=r, class_map=cmap, name="totalsegmentator", **options)
    return _finish(ds, split, slice_axis, only)


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
    options, slice_axis, only = _split_options(options, "verse")
    r = _root(root, "verse")
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
    return _finish(ds, split, slice_axis, only)


# -- generic image/label folder pairs ----------------------------------------------------------
_CHANNEL_SUFFIX = re.compile(r"^(.*)_(\d{4})$")


@register_dataset("nifti_pairs", tags=("ct", "mri", "segmentation", "3d"))
def nifti_pairs(
    root: str | Path,
    split: str | None = None,
    *,
    image_dir: str = "images",
    label_dir: str | None = "labels",
    channel_suffix: bool = False,
    require_labels: bool = True,
    classes: Sequence[str] | None = None,
    modality: str | None = None,
    **options: Any,
):
    """Any folder of NIfTI images with a folder of label maps, matched by file name
    (``images/case1.nii.gz`` ↔ ``labels/case1.nii.gz``). ``channel_suffix`` groups nnU-Net style
    ``case1_0000.nii.gz``, ``case1_0001.nii.gz``... into one multi-channel sample (channel order =
    suffix). An image without a label (``require_labels``) or a label without an image is an
    error naming the file. ``split`` names the rows (all rows belong to it)."""
    options, slice_axis, only = _split_options(options, "nifti_pairs")
    r = _root(root, "nifti_pairs")
    idir = r / image_dir
    if not idir.is_dir():
        raise FileNotFoundError(f"nifti_pairs: image folder {str(idir)!r} does not exist")
    groups: dict[str, list[tuple[int, str]]] = {}
    for p in sorted(idir.iterdir()):
        if p.name.startswith(".") or not p.name.endswith((".nii", ".nii.gz")):
            continue
        stem, channel = nifti_stem(p.name), 0
        if channel_suffix:
            m = _CHANNEL_SUFFIX.match(stem)
            if not m:
                raise ValueError(
                    f"nifti_pairs: {str(p)!r} has no _XXXX channel suffix (channel_suffix=True)"
                )
            stem, channel = m.group(1), int(m.group(2))
        groups.setdefault(stem, []).append((channel, f"{image_dir}/{p.name}"))
    if not groups:
        raise FileNotFoundError(f"nifti_pairs: no .nii/.nii.gz image in {str(idir)!r}")
    labels: dict[str, str] = {}
    if label_dir is not None:
        ldir = r / label_dir
        if not ldir.is_dir():
            raise FileNotFoundError(f"nifti_pairs: label folder {str(ldir)!r} does not exist")
        for p in sorted(ldir.iterdir()):
            if p.name.endswith((".nii", ".nii.gz")) and not p.name.startswith("."):
                stem = nifti_stem(p.name)
                if stem not in groups:
                    raise ValueError(
                        f"nifti_pairs: label {str(p)!r} has no image named {stem!r} in {str(idir)!r}"
                    )
                labels[stem] = f"{label_dir}/{p.name}"
    rows = []
    for stem, chans in sorted(groups.items()):
        numbers = sorted(c for c, _ in chans)
        if numbers != list(range(len(numbers))):
            raise ValueError(
                f"nifti_pairs: case {stem!r} has channels {numbers}, expected 0..{len(numbers) - 1}"
            )
        if label_dir is not None and require_labels and stem not in labels:
            raise ValueError(
                f"nifti_pairs: image {str(idir / sorted(chans)[0][1])!r} has no label in {label_dir!r}"
            )
        paths = [p for _, p in sorted(chans)]
        rows.append(
            {
                "id": stem,
                "image": paths if channel_suffix else paths[0],
                "mask": labels.get(stem),
                "split": split,
            }
        )
    ds = VolumeDataset(
        pd.DataFrame(rows),
        root=r,
        classes=classes,
        modality=modality,
        name="nifti_pairs",
        **options,
    )
    return _finish(ds, None, slice_axis, only)
