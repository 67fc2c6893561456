"""The ``camelyon16`` dataset: tiles of the CAMELYON16 whole-slide images in the challenge's own
layout, with slide labels, for slide-level multiple-instance learning (``protocol=mil``).

Layout (camelyon16.grand-challenge.org; as kaiko-ai/eva's ``Camelyon16`` reads it)::

    training/normal/normal_001.tif ...   label normal
    training/tumor/tumor_001.tif ...     label tumor
    testing/images/test_001.tif ...
    testing/reference.csv                no header: slide, Normal|Tumor, [lesion type, ...]

Splits: ``train`` / ``val`` (eva's 54 validation slides, the PatchCamelyon validation slides),
``training`` (all training slides) and ``test``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.pathology.wsi import (
    WSITileDataset,
    no_tissue_reason,
    open_slide,
    tiles_for_slide,
)
from medimg_bench.registry import register_dataset

__all__ = ["camelyon16", "camelyon16_slides", "EVA_VAL_SLIDES"]

log = logging.getLogger(__name__)

CLASSES = ("normal", "tumor")

# kaiko-ai/eva src/eva/vision/data/datasets/classification/camelyon16.py (``_val_slides``,
# commit 73b61a79): the slides PatchCamelyon validates on.
EVA_VAL_SLIDES = frozenset(
    [f"normal_{i:03d}" for i in (10, 13, 16, 17, 19, 20, 25, 30, 31, 32, 52, 56, 57, 67, 76, 79, 85, 95, 98, 99,
                                 101, 102, 105, 106, 109, 129, 132, 137, 142, 143, 148, 152)]
    + [f"tumor_{i:03d}" for i in (1, 5, 11, 12, 13, 19, 31, 37, 43, 46, 57, 65, 69, 71, 73, 79, 80, 81, 82, 85,
                                  97, 109)]
)

SPLITS = ("train", "val", "training", "test")


def _reference(root: Path) -> dict[str, str]:
    path = root / "testing" / "reference.csv"
    if not path.exists():
        raise FileNotFoundError(f"camelyon16: {str(path)!r} does not exist (the test-set slide labels)")
    df = pd.read_csv(path, header=None, dtype=str)
    if df.shape[1] < 2:
        raise ValueError(f"camelyon16: {str(path)!r} needs at least two columns (slide, Normal|Tumor)")
    out: dict[str, str] = {}
    for line, (slide, lab) in enumerate(zip(df[0], df[1]), start=1):
        lab = str(lab).strip().lower()
        if lab not in CLASSES:
            raise ValueError(f"camelyon16: {str(path)!r} line {line} (slide {slide!r}): label {lab!r} is not "
                             f"Normal or Tumor")
        out[Path(str(slide).strip()).stem] = lab
    return out


def camelyon16_slides(root: str | Path, split: str = "test", *, val_slides: str | None = "eva") -> pd.DataFrame:
    """One row per slide of ``split``: ``slide_id``, ``path`` (relative to root), ``label``
    (0 normal, 1 tumor) and ``patient_id`` (the slide: CAMELYON16 has one slide per patient)."""
    r = dataset_root(root, "camelyon16")
    if split not in SPLITS:
        raise ValueError(f"camelyon16: split={split!r}; known splits: {list(SPLITS)}")
    if val_slides not in ("eva", None):
        raise ValueError(f"camelyon16: val_slides={val_slides!r}; 'eva' or null")
    rows = []
    if split == "test":
        folder = r / "testing" / "images"
        if not folder.is_dir():
            raise FileNotFoundError(f"camelyon16: {str(folder)!r} is not a directory")
        ref = _reference(r)
        on_disk = {p.stem: p for p in sorted(folder.glob("*.tif"))}
        for sid, p in on_disk.items():
            if sid not in ref:
                raise ValueError(f"camelyon16: slide {str(p)!r} has no row in testing/reference.csv")
            rows.append({"slide_id": sid, "path": str(p.relative_to(r)), "label": CLASSES.index(ref[sid])})
        missing = sorted(set(ref) - set(on_disk))
        if missing:  # the challenge's duplicate test_049 is usually deleted: an exclusion, shown
            log.warning("camelyon16: %d slides of reference.csv are not on disk (%s)", len(missing), missing[:5])
    else:
        for lab in CLASSES:
            folder = r / "training" / lab
            if not folder.is_dir():
                raise FileNotFoundError(f"camelyon16: {str(folder)!r} is not a directory")
            for p in sorted(folder.glob("*.tif")):
                if not p.stem.startswith(lab + "_"):
                    raise ValueError(f"camelyon16: slide {str(p)!r} in training/{lab} is not named {lab}_NNN.tif")
                held = val_slides == "eva" and p.stem in EVA_VAL_SLIDES
                if split == "training" or (split == "val") == held:
                    rows.append({"slide_id": p.stem, "path": str(p.relative_to(r)), "label": CLASSES.index(lab)})
    if not rows:
        raise ValueError(f"camelyon16: no slides of split {split!r} under {str(r)!r}")
    df = pd.DataFrame(rows)
    df["patient_id"] = df["slide_id"]
    if split == "test":  # listed by reference.csv, absent from testing/images
        df.attrs["not_on_disk"] = missing
    return df


@register_dataset("camelyon16", tags=("pathology", "classification", "wsi", "mil"))
def camelyon16(
    root: str | Path,
    split: str = "test",
    *,
    val_slides: str | None = "eva",
    mpp: float = 0.25,
    tile_size: int = 224,
    tissue_threshold: float = 0.5,
    thumbnail_size: int = 1024,
    base_mpp: float | None = None,
    max_tiles_per_slide: int | None = 10000,
    seed: int = 0,
    backend: str = "auto",
    transform: Callable | None = None,
) -> WSITileDataset:
    """Tissue tiles of the CAMELYON16 slides of ``split`` (``tile_size`` px at ``mpp`` µm/px,
    eva's 224 px at 0.25 µm/px by default, at most ``max_tiles_per_slide`` per slide drawn with
    ``seed``, eva's 10,000); every tile carries its slide's ``slide_id`` and ``label``."""
    slides = camelyon16_slides(root, split, val_slides=val_slides)
    r = Path(root).expanduser()
    rng = np.random.default_rng(seed)
    parts, used, tissueless = [], backend, []
    for s in slides.to_dict("records"):
        slide = open_slide(r / s["path"], backend)
        used = slide.backend
        tiles, m0 = tiles_for_slide(slide, mpp=mpp, tile_size=tile_size, stride=tile_size,
                                     tissue_threshold=tissue_threshold, thumbnail_size=thumbnail_size,
                                     base_mpp=base_mpp)
        if not len(tiles):
            log.warning("camelyon16: no tissue tiles in %s", s["path"])
            tissueless.append(s)
            continue
        if max_tiles_per_slide is not None and len(tiles) > max_tiles_per_slide:
            tiles = tiles.iloc[np.sort(rng.choice(len(tiles), max_tiles_per_slide, replace=False))]
        parts.append(tiles.assign(id=[f"{s['slide_id']}/{x}_{y}" for x, y in zip(tiles["x"], tiles["y"])],
                                  path=s["path"], slide_id=s["slide_id"], patient_id=s["patient_id"],
                                  label=s["label"], tile_size=tile_size, mpp=mpp, base_mpp=m0))
    if not parts:
        raise ValueError(f"camelyon16: no slide of split {split!r} has tissue tiles "
                         f"(tissue_threshold={tissue_threshold})")
    ds = WSITileDataset(pd.concat(parts, ignore_index=True), root=r, classes=list(CLASSES), backend=used,
                        transform=transform)
    ds.name = "camelyon16"
    for s in tissueless:  # listed, not a sample: counted and shown; protocol=mil fails the slide
        ds.exclude(s["slide_id"], file=s["path"], reason=no_tissue_reason(tissue_threshold), kind="no_tiles")
    for sid in slides.attrs.get("not_on_disk", []):
        ds.exclude(sid, file=f"testing/images/{sid}.tif",
                   reason="listed in testing/reference.csv, not on disk (the challenge's duplicate test_049 is "
                          "usually deleted)")
    return ds

