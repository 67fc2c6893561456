"""BUSI (Breast Ultrasound Images, Al-Dhabyani et al. 2020): ``dataset=busi``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from medimg_bench.datasets.seg2d.folder import Seg2DFolder, build
from medimg_bench.registry import register_dataset

__all__ = ["busi", "BUSI_GROUPS"]

BUSI_GROUPS = ("benign", "malignant", "normal")


@register_dataset("busi", tags=("segmentation", "2d", "ultrasound"))
def busi(*, root: str | Path, split: str | None = None, groups: tuple[str, ...] | list[str] = BUSI_GROUPS,
         mask_encoding: str = "binary", mask_foreground: float | None = None) -> Seg2DFolder:
    """``Dataset_BUSI_with_GT/<group>/<group> (n).png`` with ``<group> (n)_mask.png`` beside it
    (and ``_mask_1.png``... for images with several lesions: merged). The group is the manifest's
    ``group`` column (``filter(group="malignant")``); normal images have empty masks. Masks are
    ``binary`` (0/255 in the release; ``mask_foreground`` None: each file's own value)."""
    root = Path(root)
    base = root / "Dataset_BUSI_with_GT" if (root / "Dataset_BUSI_with_GT").is_dir() else root
    parts = []
    for g in groups:
        if g not in BUSI_GROUPS:
            raise ValueError(f"busi: unknown group {g!r}; expected {BUSI_GROUPS}")
        if (base / g).is_dir():
            ds = build(base, g, g, classes=["background", "lesion"], name="busi", mask_suffix="_mask",
                       merge_suffix="_", mask_encoding=mask_encoding, mask_foreground=mask_foreground,
                       image_filter=lambda p: "_mask" in p.stem)
            ds.manifest["group"] = g
            parts.append(ds)
    if not parts:
        raise FileNotFoundError(f"busi: none of {list(groups)} under {str(base)!r}")
    first = parts[0]
    merged = first.with_manifest(pd.concat([p.manifest for p in parts], ignore_index=True))
    merged.unpaired = [u for p in parts for u in p.unpaired]
    return merged
