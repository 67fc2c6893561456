"""Reading 2D images and masks (PNG 1/8/16-bit, palette PNG, JPEG) and pairing folders by stem.

Masks become integer label maps. ``mask_format``:

* ``"auto"``: a 1-bit PNG is 0/1; a palette PNG gives its indices; a grey mask whose values are
  all class indices (``< n_classes``) is a label map; any other grey mask is binarised with the
  evaluation toolbox's rule ``value > 128`` (8-bit; ``> 32768`` for 16-bit), which also cleans
  JPEG masks; an RGB(A) mask goes through MATLAB's ``rgb2gray`` weights first;
* ``"binary"``: always ``> 128`` (``> 32768`` for 16-bit), 1-bit as is;
* ``"labels"``: the stored values (or palette indices) as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
MASK_FORMATS = ("auto", "binary", "labels")
# MATLAB rgb2gray: 0.298936021293775 R + 0.587043074451121 G + 0.114020904255103 B, rounded
_RGB2GRAY = np.array([0.298936021293775, 0.587043074451121, 0.114020904255103])


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


def rgb2gray(a: np.ndarray) -> np.ndarray:
    """MATLAB ``rgb2gray`` of an 8-bit ``H x W x 3`` array (rounded to uint8)."""
    return np.clip(np.rint(a[..., :3].astype(np.float64) @ _RGB2GRAY), 0, 255).astype(np.uint8)


def read_mask(path: Path, *, mask_format: str = "auto", n_classes: int = 2) -> np.ndarray:
    """The mask as an ``H x W`` int64 label map (rules in the module docstring)."""
    from PIL import Image

    if mask_format not in MASK_FORMATS:
        raise ValueError(f"mask_format must be one of {MASK_FORMATS}, got {mask_format!r}")
    with Image.open(path) as im:
        mode = im.mode
        a = np.asarray(im)
    if mode == "1":
        return a.astype(np.int64)
    if mode == "P" and mask_format != "binary":
        return a.astype(np.int64)
    if mode in ("RGB", "RGBA"):
        a = rgb2gray(a)
    elif a.ndim == 3:
        a = a[..., 0]
    if mask_format == "labels":
        return a.astype(np.int64)
    cut = 32768 if a.dtype in (np.uint16, np.int32) else 128
    if mask_format == "auto" and int(a.max(initial=0)) < n_classes:
        return a.astype(np.int64)
    return (a > cut).astype(np.int64)


def image_size(path: Path) -> tuple[int, int]:
    """``(height, width)`` from the file header."""
    from PIL import Image

    with Image.open(path) as im:
        return im.size[1], im.size[0]


def list_images(folder: Path, *, suffixes: Sequence[str] = IMAGE_SUFFIXES) -> list[Path]:
    """Image files of ``folder`` (not recursive), sorted by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in suffixes)


def pair_by_stem(images: Sequence[Path], masks: Sequence[Path], *, mask_suffix: str = "",
                 merge_suffix: str | None = None) -> tuple[list[tuple[str, Path, list[Path]]], list[Path], list[Path]]:
    """Match images and masks by stem (a mask is ``<stem><mask_suffix>.*``; with ``merge_suffix``
    also ``<stem><mask_suffix><merge_suffix><n>.*``, merged). Returns the pairs ``(stem, image,
    masks)``, the images without a mask and the masks without an image."""
    by_stem: dict[str, list[Path]] = {}
    for m in masks:
        stem = m.stem
        if mask_suffix and not stem.endswith(mask_suffix):
            if merge_suffix and mask_suffix + merge_suffix in stem:
                stem = stem.split(mask_suffix + merge_suffix)[0] + mask_suffix
            else:
                by_stem.setdefault("\0" + m.name, []).append(m)
                continue
        elif merge_suffix and mask_suffix + merge_suffix in stem:
            stem = stem.split(mask_suffix + merge_suffix)[0] + mask_suffix
        key = stem[: len(stem) - len(mask_suffix)] if mask_suffix else stem
        by_stem.setdefault(key, []).append(m)
    pairs, lonely_images = [], []
    for img in images:
        found = by_stem.pop(img.stem, None)
        if found:
            pairs.append((img.stem, img, sorted(found)))
        else:
            lonely_images.append(img)
    lonely_masks = sorted(p for ms in by_stem.values() for p in ms)
    return pairs, lonely_images, lonely_masks
