"""The ``nifti_pairs`` dataset. Any folder of NIfTI images with a folder of label maps, matched by file name
(``images/case1.nii.gz`` ↔ ``labels/case1.nii.gz``). ``channel_suffix`` groups nnU-Net style
``case1_0000.nii.gz``, ``case1_0001.nii.gz``... into one multi-channel sample (channel order =
suffix). An image without a label (``require_labels``) or a label without an image is an
error naming the file. ``split`` names the rows (all rows belong to it)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.mask_formats import is_label_file, label_stem
from medimg_bench.datasets.volumetric.manifest import _finish, _root, _split_options
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
    options, slice_axis, only = _split_options(options, "nifti_pairs")
    r = _root(root, "nifti_pairs")
    idir = r / image_dir
    if not idir.is_dir():
        raise FileNotFoundError(f"nifti_pairs: image folder {str(idir)!r} does not exist")
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
    labels: dict[str, str] = {}
    if label_dir is not None:
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
