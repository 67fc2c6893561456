"""The ``nifti_pairs`` dataset. Any folder of NIfTI images with a folder of label maps, matched by file name
(``images/case1.nii.gz`` ↔ ``labels/case1.nii.gz``). ``channel_suffix`` groups nnU-Net style
``case1_0000.nii.gz``, ``case1_0001.nii.gz``... into one multi-channel sample (channel order =
suffix). An image without a label (``require_labels``) or a label without an image is an
error naming the file. ``split`` names the rows (all rows belong to it)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.mask_formats import is_label_file, label_stem
from medimg_bench.datasets.volumetric.manifest import checked_root, finish, split_options
from medimg_bench.datasets.volumetric.volume import VolumeDataset
from medimg_bench.registry import register_dataset

__all__ = ["nifti_pairs"]


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
    error naming the file. ``split`` names the rows (all rows belong to it). Images may also be
    NRRD / MetaImage; labels NRRD / MetaImage or DICOM SEG ``<id>.dcm`` (segments matched to
    ``classes`` by label, or by number with the ``segment_map`` option)."""
    options, slice_axis, only = split_options(options, "nifti_pairs")
    r = checked_root(root, "nifti_pairs")
    idir = r / image_dir
    if not idir.is_dir():
        raise FileNotFoundError(f"nifti_pairs: image folder {str(idir)!r} does not exist")
    groups = _image_groups(idir, image_dir, channel_suffix)
    labels = _label_files(r, idir, label_dir, groups)
    rows = _pair_rows(groups, labels, idir, split, label_dir=label_dir, require_labels=require_labels,
                      channel_suffix=channel_suffix)
    note = None
    if classes is None and labels:
        classes, note = _classes_from(r, [r / p for p in labels.values()])
    ds = VolumeDataset(
        pd.DataFrame(rows),
        root=r,
        classes=classes,
        modality=modality,
        name="nifti_pairs",
        **options,
    )
    out = finish(ds, None, slice_axis, only)
    out.classes_note = note  # manifest.json["dataset"]["classes_note"]
    return out


def _image_groups(idir: Path, image_dir: str, channel_suffix: bool) -> dict[str, list[tuple[int, str]]]:
    """Image files of ``idir`` by case stem: ``[(channel, relative path)]`` (one channel unless
    nnU-Net's ``_XXXX`` suffixes group several)."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for p in sorted(idir.iterdir()):
        if not is_label_file(p.name) or p.name.lower().endswith(".dcm"):  # images: NIfTI, NRRD, MHA
            continue
        stem, channel = label_stem(p.name), 0
        if channel_suffix:
            m = _CHANNEL_SUFFIX.match(stem)
            if not m:
                raise ValueError(
                    f"nifti_pairs: {str(p)!r} has no _XXXX channel suffix (channel_suffix=True)"
                )
            stem, channel = m.group(1), int(m.group(2))
        groups.setdefault(stem, []).append((channel, f"{image_dir}/{p.name}"))
    if not groups:
        raise FileNotFoundError(f"nifti_pairs: no .nii/.nii.gz/.nrrd/.mha image in {str(idir)!r}")
    return groups


def _label_files(r: Path, idir: Path, label_dir: str | None,
                 groups: Mapping[str, Any]) -> dict[str, str]:
    """Label files by case stem (relative paths); a label without an image is an error."""
    labels: dict[str, str] = {}
    if label_dir is None:
        return labels
    ldir = r / label_dir
    if not ldir.is_dir():
        raise FileNotFoundError(f"nifti_pairs: label folder {str(ldir)!r} does not exist")
    for p in sorted(ldir.iterdir()):
        if is_label_file(p.name):  # NIfTI, NRRD, MetaImage or a DICOM SEG <id>.dcm
            stem = label_stem(p.name)
            if stem not in groups:
                raise ValueError(
                    f"nifti_pairs: label {str(p)!r} has no image named {stem!r} in {str(idir)!r}"
                )
            labels[stem] = f"{label_dir}/{p.name}"
    return labels


def _pair_rows(groups: Mapping[str, list[tuple[int, str]]], labels: Mapping[str, str], idir: Path,
               split: str | None, *, label_dir: str | None, require_labels: bool,
               channel_suffix: bool) -> list[dict[str, Any]]:
    """One manifest row per case; channels must be 0..n-1 and (``require_labels``) a label present."""
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
    return rows


def _classes_from(root: Path, label_files: Sequence[Path]) -> tuple[list[str], str]:
    """The class list (background first) when ``classes`` is not given: the ``labels`` of
    ``root/dataset.json`` (nnU-Net v1 ``{"0": "background"}`` or v2 ``{"background": 0}``), else
    ``background, label_1 .. label_K`` with K the largest label value found. Returns (classes, note)."""
    import json

    meta = root / "dataset.json"
    if meta.is_file():
        info = json.loads(meta.read_text(encoding="utf-8")).get("labels")
        if isinstance(info, dict) and info:
            try:
                pairs = {int(k): str(v) for k, v in info.items()}
            except (TypeError, ValueError):
                pairs = {int(v): str(k) for k, v in info.items() if not isinstance(v, list)}
            if sorted(pairs) != list(range(len(pairs))):
                raise ValueError(f"nifti_pairs: labels in {str(meta)!r} are not 0..K-1: {sorted(pairs)}; "
                                 "set dataset.options.classes=[background,...] instead")
            return [pairs[i] for i in range(len(pairs))], f"classes from {meta}"
    import numpy as np

    from medimg_bench.datasets.mask_formats import read_label_file

    top = 0
    for f in label_files:
        if Path(f).name.lower().endswith(".dcm"):  # DICOM SEG / RTSTRUCT: segments carry their own labels
            continue
        values = np.unique(np.asarray(read_label_file(f)[0]))
        if len(values) and (values.min() < 0 or not np.all(values == np.round(values))):
            raise ValueError(f"nifti_pairs: label map {str(f)!r} holds values other than 0..K "
                             f"({values[:5].tolist()}...); set dataset.options.classes explicitly")
        top = max(top, int(values.max()) if len(values) else 0)
    classes = ["background", *(f"label_{k}" for k in range(1, top + 1))]
    return classes, (f"classes not given and no dataset.json in {root}: named after the label values "
                     f"found (0..{top}); set dataset.options.classes=[background,liver,...] to name them")
