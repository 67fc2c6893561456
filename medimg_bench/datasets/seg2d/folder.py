"""The generic 2D image/mask folder loader: ``dataset=seg2d_folder``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.masks import MASK_ENCODINGS, decode_mask
from medimg_bench.datasets.seg2d import _io
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["Seg2DFolder", "seg2d_folder"]


class Seg2DFolder(ManifestDataset):
    """Images and masks paired by file stem; a sample is ``{"id": stem, "image": C x H x W float32
    in [0, 1], "mask": H x W int64 labels, "meta"}`` at the file's own size (no resizing).

    ``classes`` names the label values (``["background", "lesion"]`` for a binary mask). Masks are
    decoded by :func:`medimg_bench.datasets.masks.decode_mask` under ``mask_encoding`` (``auto``,
    ``binary`` with ``mask_foreground`` — None: the file's own foreground value —, ``label_map``;
    ``mask_colors`` declares the colours of an RGB label mask, index = label). An image whose
    mask is missing (or named with another case) is a sample that fails with a ``[target]``
    reason naming the expected mask (``mask_problems``); masks without an image are listed by
    :meth:`check`, with every pair whose image and mask sizes differ (from the file headers).
    ``select_class`` keeps one label of a multi-class mask as the foreground (``mask == value`` -> 1).
    """

    task = "segmentation"

    def __init__(self, pairs: Sequence[tuple[str, Path, list[Path]]], *, root: Path,
                 classes: Sequence[str], mask_encoding: str = "auto", mask_foreground: float | None = None,
                 mask_colors: Sequence[Sequence[int]] | None = None, select_class: int | None = None,
                 unpaired: Sequence[dict[str, Any]] = (), mask_problems: Mapping[str, str] | None = None,
                 name: str = "seg2d_folder", extra: Mapping[str, Sequence[Any]] | None = None) -> None:
        if mask_encoding not in MASK_ENCODINGS:
            raise ValueError(f"{name}: mask_encoding must be one of {MASK_ENCODINGS}, got {mask_encoding!r}")
        problems = dict(mask_problems or {})
        manifest = pd.DataFrame({
            "id": [p[0] for p in pairs],
            "image": [str(p[1]) for p in pairs],
            "mask": [None if not p[2] else [str(m) for m in p[2]] if len(p[2]) > 1 else str(p[2][0]) for p in pairs],
            **{k: list(v) for k, v in (extra or {}).items()},
        })
        if problems:
            manifest["mask_problem"] = [problems.get(p[0]) for p in pairs]
        super().__init__(manifest, root=root, path_columns=("image", "mask"), classes=classes, name=name)
        self.mask_encoding = mask_encoding
        self.mask_foreground = mask_foreground
        self.mask_colors = [list(c) for c in mask_colors] if mask_colors is not None else None
        self.select_class = select_class
        self.unpaired = list(unpaired)

    def decode_mask(self, path: Path) -> np.ndarray:
        """One mask file as labels under the declared encoding (a ``ValueError`` names the file)."""
        # with select_class the file holds more labels than the dataset's classes: not bounded here
        n = len(self.classes or ()) if self.select_class is None else None
        return decode_mask(path, encoding=self.mask_encoding, foreground=self.mask_foreground,
                           num_classes=n or None, colors=self.mask_colors)

    def _mask(self, row: Mapping[str, Any]) -> np.ndarray:
        problem = row.get("mask_problem")
        if isinstance(problem, str) or not isinstance(row["mask"], (str, list)):
            err = SampleError(problem or "no mask", sample_id=str(row["id"]), path=str(row["image"]))
            err.stage = "target"  # type: ignore[attr-defined]
            raise err
        paths = row["mask"] if isinstance(row["mask"], list) else [row["mask"]]
        out = None
        for p in paths:
            try:
                m = self.decode_mask(self.resolve(p))
            except (OSError, ValueError) as exc:
                err = SampleError(f"mask cannot be decoded: {exc}", sample_id=str(row["id"]), path=str(p))
                err.stage = "target"  # type: ignore[attr-defined]
                raise err from exc
            if out is not None and m.shape != out.shape:
                raise SampleError(f"mask {p} is {m.shape[0]}x{m.shape[1]} but the other masks of the "
                                  f"image are {out.shape[0]}x{out.shape[1]}", sample_id=str(row["id"]), path=str(p))
            out = m if out is None else np.maximum(out, m)  # several masks of one image: union
        assert out is not None
        if self.select_class is not None:
            out = (out == self.select_class).astype(np.int64)
        return out

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        sid = str(row["id"])
        mask = self._mask(row)
        image = _io.read_image(self.resolve(row["image"]))
        if mask.shape != image.shape[1:]:
            raise SampleError(f"image is {image.shape[1]}x{image.shape[2]} but mask {row['mask']} is "
                              f"{mask.shape[0]}x{mask.shape[1]} (height x width)", sample_id=sid,
                              path=str(self.resolve(row["image"])))
        k = len(self.classes or ())
        if k and int(mask.max(initial=0)) >= k:
            raise SampleError(f"mask has label {int(mask.max())} but the dataset has {k} classes "
                              f"{self.classes}", sample_id=sid, path=str(row["mask"]))
        meta = self.meta_for(row)
        meta.update(path=str(self.resolve(row["image"])), mask_path=str(row["mask"]), spacing=(1.0, 1.0))
        return {"id": sid, "image": torch.from_numpy(np.ascontiguousarray(image)),
                "mask": torch.from_numpy(mask), "meta": meta}

    def check(self) -> list[dict[str, Any]]:
        """Missing files, images without their mask, unpaired masks and pairs whose image and mask
        sizes differ (headers)."""
        problems = super().check() + [dict(p) for p in self.unpaired]
        if "mask_problem" in self.manifest:
            problems += [{"id": sid, "path": str(self.resolve(image)), "problem": str(why)}
                         for sid, image, why in zip(self.manifest["id"], self.manifest["image"],
                                                    self.manifest["mask_problem"]) if isinstance(why, str)]
        missing = {p["id"] for p in problems}
        for sid, image, mask in zip(self.manifest["id"], self.manifest["image"], self.manifest["mask"]):
            if sid in missing or mask is None:
                continue
            size = _io.image_size(self.resolve(image))
            for m in mask if isinstance(mask, list) else [mask]:
                msize = _io.image_size(self.resolve(m))
                if msize != size:
                    problems.append({"id": sid, "path": str(self.resolve(m)),
                                     "problem": f"size mismatch: image {image} is {size[0]}x{size[1]}, "
                                                f"mask is {msize[0]}x{msize[1]} (height x width)"})
        return problems


def unpaired_problems(images: Sequence[Path], masks: Sequence[Path]) -> list[dict[str, Any]]:
    """``check`` entries for masks without an image (images without a mask are failing samples)."""
    del images
    return [{"id": p.stem, "path": str(p), "problem": "mask without an image"} for p in masks]


def build(root: str | Path, image_dir: str, mask_dir: str, *, classes: Sequence[str], name: str,
          mask_suffix: str = "", merge_suffix: str | None = None, mask_encoding: str = "auto",
          mask_foreground: float | None = None, mask_colors: Sequence[Sequence[int]] | None = None,
          select_class: int | None = None, image_filter: Any = None) -> Seg2DFolder:
    """Pair ``root/image_dir`` with ``root/mask_dir`` (the same folder for BUSI-style layouts)."""
    root = Path(root)
    idir, mdir = root / image_dir, root / mask_dir
    for d in (idir, mdir):
        if not d.is_dir():
            raise FileNotFoundError(f"{name}: folder {str(d)!r} does not exist (dataset.root={str(root)!r})")
    images = _io.list_images(idir)
    masks = _io.list_images(mdir)
    if idir == mdir:
        images = [p for p in images if not image_filter(p)] if image_filter else images
        masks = [p for p in masks if image_filter(p)] if image_filter else masks
    pairs, _, lonely_m, problems = _io.pair_by_stem(images, masks, mask_suffix=mask_suffix, merge_suffix=merge_suffix)
    if len(problems) == len(pairs):
        raise ValueError(f"{name}: no image in {str(idir)!r} has a mask in {str(mdir)!r} "
                         f"(mask name = image stem + {mask_suffix!r})")
    problems = {k: f"{v} ({str(mdir)!r})" for k, v in problems.items()}
    return Seg2DFolder(pairs, root=root, classes=classes, mask_encoding=mask_encoding,
                       mask_foreground=mask_foreground, mask_colors=mask_colors, select_class=select_class,
                       unpaired=unpaired_problems([], lonely_m), mask_problems=problems, name=name)


@register_dataset("seg2d_folder", tags=("segmentation", "2d"))
def seg2d_folder(*, root: str | Path, split: str | None = None, image_dir: str = "images",
                 mask_dir: str = "masks", classes: Sequence[str] = ("background", "foreground"),
                 mask_suffix: str = "", mask_encoding: str = "auto", mask_foreground: float | None = None,
                 mask_colors: Sequence[Sequence[int]] | None = None, select_class: int | None = None,
                 mask_format: str | None = None) -> Seg2DFolder:
    """Any folder pair of 2D images and masks matched by file stem (``mask_suffix``: masks named
    ``<stem><suffix>.png``); masks decoded under ``mask_encoding`` (``auto``: a label map for more
    than two classes, else a binary mask with one foreground value). ``mask_format`` is the old
    name of ``mask_encoding`` (``labels`` = ``label_map``)."""
    if mask_format is not None:
        mask_encoding = {"labels": "label_map"}.get(mask_format, mask_format)
    return build(root, image_dir, mask_dir, classes=list(classes), name="seg2d_folder",
                 mask_suffix=mask_suffix, mask_encoding=mask_encoding, mask_foreground=mask_foreground,
                 mask_colors=mask_colors, select_class=select_class)
