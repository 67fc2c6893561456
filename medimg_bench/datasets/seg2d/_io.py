"""Reading 2D images (PNG 1/8/16-bit, palette PNG, JPEG) and pairing folders by stem. Masks are
decoded by the one mask decoder (:mod:`medimg_bench.datasets.masks`), under the encoding each
loader declares."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


def read_image(path: Path) -> np.ndarray:
    """The image as a ``C x H x W`` float32 array in [0, 1] (8-bit / 255, 16-bit / 65535)."""
    from PIL import Image

    with Image.open(path) as im:
        if im.mode == "P":
            im = im.convert("RGB")
        a = np.asarray(im)
    scale = 65535.0 if a.dtype == np.uint16 else (1.0 if a.dtype == bool else 255.0)
    if a.dtype == np.int32:  # PIL mode "I" (16-bit grey read as 32-bit)
        scale = 65535.0
    a = a.astype(np.float32) / scale
    return a[None] if a.ndim == 2 else np.moveaxis(a, -1, 0)


def image_size(path: Path) -> tuple[int, int]:
    """``(height, width)`` from the file header."""
    from PIL import Image

    with Image.open(path) as im:
        return im.size[1], im.size[0]


def list_images(folder: Path, *, suffixes: Sequence[str] = IMAGE_SUFFIXES) -> list[Path]:
    """Image files of ``folder`` (not recursive), sorted by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in suffixes)


def _mask_key(mask: Path, mask_suffix: str, merge_suffix: str | None) -> str | None:
    """The image stem a mask belongs to (None: the name does not fit the pattern)."""
    stem = mask.stem
    if merge_suffix and mask_suffix + merge_suffix in stem:
        stem = stem.split(mask_suffix + merge_suffix)[0] + mask_suffix
    if mask_suffix and not stem.endswith(mask_suffix):
        return None
    return stem[: len(stem) - len(mask_suffix)] if mask_suffix else stem


def pair_by_stem(images: Sequence[Path], masks: Sequence[Path], *, mask_suffix: str = "",
                 merge_suffix: str | None = None
                 ) -> tuple[list[tuple[str, Path, list[Path]]], list[Path], list[Path], dict[str, str]]:
    """Match images and masks by stem (a mask is ``<stem><mask_suffix>.*``; with ``merge_suffix``
    also ``<stem><mask_suffix><merge_suffix><n>.*``, merged). Returns the pairs ``(stem, image,
    masks)`` in image order (an image without its mask has an empty list), the images without a
    mask, the masks without an image, and ``{stem: problem}`` for every image without its mask
    (the expected name; a mask whose name differs only in case is named as such, not paired)."""
    by_stem: dict[str, list[Path]] = {}
    orphans: list[Path] = []
    for m in masks:
        key = _mask_key(m, mask_suffix, merge_suffix)
        if key is None:
            orphans.append(m)
        else:
            by_stem.setdefault(key, []).append(m)
    folded: dict[str, list[str]] = {}
    for key in by_stem:
        folded.setdefault(key.casefold(), []).append(key)
    pairs, lonely_images, problems, named = [], [], {}, set()
    for img in images:
        found = by_stem.get(img.stem)
        if found:
            pairs.append((img.stem, img, sorted(found)))
            continue
        expected = f"{img.stem}{mask_suffix}.*"
        near = [k for k in folded.get(img.stem.casefold(), []) if k != img.stem]
        if near:
            named.update(near)  # told once, on the image: not also "a mask without an image"
            names = sorted(p.name for k in near for p in by_stem[k])
            problems[img.stem] = (f"image {img.name!r} has no mask {expected!r}: mask {names[0]!r} differs from it only "
                                  "in case (names are matched exactly; rename one of them)")
        else:
            problems[img.stem] = f"image {img.name!r} has no mask {expected!r} in the mask folder"
        pairs.append((img.stem, img, []))
        lonely_images.append(img)
    paired = {s for s, _, ms in pairs if ms}
    lonely_masks = sorted(orphans + [p for k, ms in by_stem.items() if k not in paired and k not in named for p in ms])
    return pairs, lonely_images, lonely_masks, problems
