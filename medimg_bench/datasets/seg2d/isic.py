"""ISIC 2018 Task 1 (lesion boundary segmentation): ``dataset=isic2018_task1``."""

from __future__ import annotations

from pathlib import Path

from medimg_bench.datasets.seg2d.folder import Seg2DFolder, build
from medimg_bench.registry import register_dataset

__all__ = ["isic2018_task1"]

_SPLITS = {
    "train": ("ISIC2018_Task1-2_Training_Input", "ISIC2018_Task1_Training_GroundTruth"),
    "val": ("ISIC2018_Task1-2_Validation_Input", "ISIC2018_Task1_Validation_GroundTruth"),
    "test": ("ISIC2018_Task1-2_Test_Input", "ISIC2018_Task1_Test_GroundTruth"),
}


@register_dataset("isic2018_task1", tags=("segmentation", "2d", "dermoscopy"))
def isic2018_task1(*, root: str | Path, split: str | None = "train", mask_encoding: str = "binary",
                   mask_foreground: float | None = None) -> Seg2DFolder:
    """``ISIC_<n>.jpg`` images and ``ISIC_<n>_segmentation.png`` masks (0/255) of the official
    folders (``ISIC2018_Task1-2_<Split>_Input`` / ``ISIC2018_Task1_<Split>_GroundTruth``). Masks
    are ``binary`` (``mask_foreground`` None: each file's own foreground value, 255 in the release)."""
    split = split or "train"
    if split not in _SPLITS:
        raise ValueError(f"isic2018_task1: split must be one of {sorted(_SPLITS)}, got {split!r}")
    images, masks = _SPLITS[split]
    return build(root, images, masks, classes=["background", "lesion"], name="isic2018_task1",
                 mask_suffix="_segmentation", mask_encoding=mask_encoding, mask_foreground=mask_foreground)
