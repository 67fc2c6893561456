"""Polyp segmentation layouts: PraNet's ``TestDataset/<set>/{images,masks}`` (``dataset=pranet_polyp``)
and Kvasir-SEG's ``{images,masks}`` with JPEG masks (``dataset=kvasir_seg``)."""

from __future__ import annotations

from pathlib import Path

from medimg_bench.datasets.seg2d.folder import Seg2DFolder, build
from medimg_bench.registry import register_dataset

__all__ = ["pranet_polyp", "kvasir_seg", "PRANET_SETS"]

PRANET_SETS = ("Kvasir", "CVC-ClinicDB", "CVC-ColonDB", "ETIS-LaribPolypDB", "CVC-300")


@register_dataset("pranet_polyp", tags=("segmentation", "2d", "endoscopy"))
def pranet_polyp(*, root: str | Path, split: str | None = None, subset: str = "Kvasir",
                 mask_encoding: str = "binary", mask_foreground: float | None = None) -> Seg2DFolder:
    """One test set of PraNet's ``TestDataset`` (``subset``: Kvasir, CVC-ClinicDB, CVC-ColonDB,
    ETIS-LaribPolypDB or CVC-300); ``root`` is ``TestDataset/`` or its parent. Masks ``binary``:
    0/255 (soft edges included) -> ``> 128``, as the toolbox reads them; 0/1 masks as 0/1."""
    if subset not in PRANET_SETS:
        raise ValueError(f"pranet_polyp: subset must be one of {PRANET_SETS}, got {subset!r}")
    root = Path(root)
    base = root / "TestDataset" if (root / "TestDataset").is_dir() else root
    return build(base / subset, "images", "masks", classes=["background", "polyp"], name="pranet_polyp",
                 mask_encoding=mask_encoding, mask_foreground=mask_foreground)


@register_dataset("kvasir_seg", tags=("segmentation", "2d", "endoscopy"))
def kvasir_seg(*, root: str | Path, split: str | None = None, mask_encoding: str = "binary",
               mask_foreground: float | None = None) -> Seg2DFolder:
    """Kvasir-SEG (1,000 polyp images): ``images/*.jpg`` and ``masks/*.jpg``; the JPEG masks are
    ``binary``: ``> 128`` after MATLAB's ``rgb2gray`` (compression leaves grey values)."""
    root = Path(root)
    base = root / "Kvasir-SEG" if (root / "Kvasir-SEG").is_dir() else root
    return build(base, "images", "masks", classes=["background", "polyp"], name="kvasir_seg",
                 mask_encoding=mask_encoding, mask_foreground=mask_foreground)
