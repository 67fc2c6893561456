"""The ``medmnist`` dataset. MedMNIST ``flag`` (any of the 18 in :data:`MEDMNIST_INFO`) from ``root/{flag}.npz``
(size 28) or ``root/{flag}_{size}.npz`` (64/128/224 for 2D, 64 for 3D)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import PathManifestDataset
from medimg_bench.datasets.medmnist.npz import npz_member
from medimg_bench.datasets.medmnist.release import (
    MEDMNIST_INFO,
    SIZES_2D,
    SIZES_3D,
    FileCheck,
    identify_file,
    parse_file_name,
)
from medimg_bench.registry import register_dataset

__all__ = ["MedMNISTDataset", "MedMNISTSource", "medmnist"]


@dataclass(frozen=True)
class MedMNISTSource:
    """Where a split comes from: ``root/file``, its flag and split, and how images are read."""

    root: Path
    file: str
    flag: str
    split: str
    mmap: bool = True
    cache_dir: str | Path | None = None


class MedMNISTDataset(PathManifestDataset):
    """One split of a MedMNIST flag; ``image`` is ``C×H×W`` (2D) or ``1×D×H×W`` (3D) float32 in
    [0, 1]; ``label`` an int (multi-class) or a float 14-vector (ChestMNIST)."""

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        source: MedMNISTSource,
        *,
        images: np.ndarray,
        labels: np.ndarray,
        transform: Callable | None = None,
        upsample: int | None = None,
    ) -> None:
        info = MEDMNIST_INFO[source.flag]
        self.upsample = upsample
        super().__init__(
            manifest,
            root=source.root,
            classes=info[3],
            transform=transform,
            name=f"medmnist/{source.flag}",
        )
        self.flag, self.split, self.file = source.flag, source.split, source.file
        self.multilabel = info[0] == "multi-label"
        self.is3d = info[2]
        self.mmap, self.cache_dir = source.mmap, source.cache_dir
        self.images: np.ndarray | None = images
        self.labels = labels

    def file_check(self, *, warn: bool = True) -> FileCheck:
        """The file's MD5 against the official release (see :func:`identify_file`)."""
        flag, size = parse_file_name(self.file)
        return identify_file(self.resolve(self.file), flag=self.flag, size=size, warn=warn)

    def __getstate__(self) -> dict[str, Any]:
        # a pickled np.memmap would be copied in full into every worker: re-map it there instead
        state = dict(self.__dict__)
        if self.mmap:
            state["images"] = None
        return state

    def _images(self) -> np.ndarray:
        if self.images is None:
            self.images = npz_member(
                self.resolve(self.file), f"{self.split}_images", mmap=True, cache_dir=self.cache_dir
            )
        return self.images

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        i = int(row["index"])
        a = np.asarray(self._images()[i])
        if self.is3d:
            if a.ndim != 3:
                raise ValueError(
                    f"{self.file}: {self.split}_images[{i}] has shape {a.shape}, expected D×H×W"
                )
            x = a[None]
        elif a.ndim == 3 and a.shape[-1] == 3:
            x = np.moveaxis(a, -1, 0)
        elif a.ndim == 2:
            x = a[None]
        else:
            raise ValueError(
                f"{self.file}: {self.split}_images[{i}] has shape {a.shape}, expected H×W or H×W×3"
            )
        scale = 255.0 if a.dtype == np.uint8 else 1.0
        image = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32) / np.float32(scale))
        if self.upsample and not self.is3d and image.shape[-1] != self.upsample:
            # nearest neighbour: each pixel repeated (PIL NEAREST for an integer factor)
            image = torch.nn.functional.interpolate(image[None], size=(self.upsample,) * 2, mode="nearest")[0]
        y = self.labels[i]
        label: Any = (
            torch.as_tensor(y, dtype=torch.float32) if self.multilabel else int(y.reshape(-1)[0])
        )
        meta = self.meta_for(row)
        meta.update(path=str(self.resolve(self.file)), index=i, flag=self.flag, modality=self.flag)
        return {"id": str(row["id"]), "image": image, "label": label, "meta": meta}


@register_dataset("medmnist", tags=("medmnist", "classification", "2d", "3d"))
def medmnist(
    root: str | Path,
    split: str = "test",
    *,
    flag: str = "pathmnist",
    size: int | None = None,
    mmap: bool = True,
    cache_dir: str | Path | None = None,
    transform: Callable | None = None,
    upsample: int | None = None,
) -> MedMNISTDataset:
    """MedMNIST ``flag`` (any of the 18 in :data:`MEDMNIST_INFO`) from ``root/{flag}.npz``
    (size 28) or ``root/{flag}_{size}.npz`` (64/128/224 for 2D, 64 for 3D).

    ``upsample`` resizes 2D images to ``upsample × upsample`` pixels by nearest neighbour: the
    MedMNIST v2 paper's "(224)" models were trained on the 28×28 images resized to 224 (not on
    the MedMNIST+ ``_224`` files, which are images of their own).

    ``split``: ``train``, ``val``, ``test``. Labels are checked against the class count; a label
    out of range raises naming the split and index. Ids are ``{flag}_{split}_{index:06d}``."""
    flag, split = _check_options(flag, split, size, upsample)
    if root is None or str(root) in ("", "???"):
        raise ValueError(f"medmnist: set root= to the folder holding {flag}.npz")
    r = Path(root).expanduser()
    path = _find_file(r, flag, size)
    images = npz_member(path, f"{split}_images", mmap=mmap, cache_dir=cache_dir)
    labels = _read_labels(path, flag, split, images.shape[0])
    expect = 4 if MEDMNIST_INFO[flag][2] or MEDMNIST_INFO[flag][1] == 3 else 3
    if images.ndim != expect:
        raise ValueError(
            f"medmnist: {path.name} {split}_images has shape {images.shape}; {flag} expects {expect} axes"
        )
    n = images.shape[0]
    man = pd.DataFrame(
        {
            "id": [f"{flag}_{split}_{i:06d}" for i in range(n)],
            "index": np.arange(n),
            "path": path.name,
        }
    )
    if MEDMNIST_INFO[flag][0] != "multi-label":
        man["label"] = labels[:, 0].astype(int)
    source = MedMNISTSource(r, path.name, flag, split, mmap=mmap, cache_dir=cache_dir)
    return MedMNISTDataset(man, source, images=images, labels=labels, transform=transform, upsample=upsample)


def _check_options(flag: str, split: str, size: int | None, upsample: int | None) -> tuple[str, str]:
    """``(flag, split)`` normalised; unknown flags, splits, sizes and upsampling refused."""
    flag = flag.lower()
    if flag not in MEDMNIST_INFO:
        raise ValueError(f"medmnist: unknown flag {flag!r}; one of {sorted(MEDMNIST_INFO)}")
    split = {"valid": "val", "validation": "val"}.get(split, split)
    if split not in ("train", "val", "test"):
        raise ValueError(f"medmnist: split must be 'train', 'val' or 'test', got {split!r}")
    is3d = MEDMNIST_INFO[flag][2]
    sizes = SIZES_3D if is3d else SIZES_2D
    if size is not None and size not in sizes:
        raise ValueError(f"medmnist: size {size} not available for {flag} (sizes {sizes})")
    if upsample is not None and (is3d or int(upsample) < 1):
        raise ValueError(f"medmnist: upsample={upsample} needs a 2D flag and a positive size")
    return flag, split


def _find_file(root: Path, flag: str, size: int | None) -> Path:
    """``{flag}.npz`` (or ``{flag}_28.npz``) for size 28, ``{flag}_{size}.npz`` otherwise."""
    candidates = [f"{flag}.npz", f"{flag}_28.npz"] if size in (None, 28) else [f"{flag}_{size}.npz"]
    if size is None:
        candidates = candidates[:1]
    path = next((root / c for c in candidates if (root / c).exists()), None)
    if path is None:
        raise FileNotFoundError(f"medmnist: none of {candidates} in {str(root)!r}")
    return path


def _read_labels(path: Path, flag: str, split: str, n: int) -> np.ndarray:
    """``{split}_labels`` as ``(n, 1)`` class indices or ``(n, 14)`` 0/1; errors name the file."""
    task, _, _, classes = MEDMNIST_INFO[flag]
    labels = np.asarray(npz_member(path, f"{split}_labels", mmap=False))
    if labels.shape[0] != n:
        raise ValueError(f"medmnist: {path.name} has {n} {split}_images but {labels.shape[0]} {split}_labels")
    k = len(classes)
    labels = labels.reshape(n, -1)
    if task == "multi-label":
        if labels.shape[1] != k or not np.isin(labels, [0, 1]).all():
            raise ValueError(f"medmnist: {path.name} {split}_labels must be N×{k} of 0/1, got shape {labels.shape}")
        return labels
    bad = (labels[:, 0] < 0) | (labels[:, 0] >= k) if labels.shape[1] == 1 else np.ones(n, bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"medmnist: {path.name} {split}_labels[{i}] = {labels[i].tolist()} is not a class index in 0..{k - 1}"
        )
    return labels
