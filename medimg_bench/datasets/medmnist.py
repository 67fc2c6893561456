"""MedMNIST v2 / MedMNIST+ from the official ``{flag}.npz`` / ``{flag}_{size}.npz`` files.

Each file holds ``{train,val,test}_images`` (2D: N×H×W grey or N×H×W×3 RGB; 3D: N×D×H×W) and
``{split}_labels`` (N×1 class index, or N×14 0/1 for ChestMNIST) as uint8.

Memory: an ``.npz`` is a zip archive and NumPy cannot memory-map its members. This loader
(``mmap=True``, default) memory-maps a member in place when it is stored uncompressed (what
``np.savez`` writes: the array bytes sit contiguously in the zip at a known offset); when the member
is deflate-compressed (``np.savez_compressed``) it is extracted once to
``{cache_dir}/{file stem}/{split}_images.npy`` (default cache dir: ``$MEDIMG_BENCH_CACHE`` or
``~/.cache/medimg_bench``, then ``medmnist``) and that file is memory-mapped, so DataLoader
workers share pages instead of each holding a copy. ``mmap=False`` loads the split into memory.
Labels are always loaded (a few bytes per sample).
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets._common import PathManifestDataset
from medimg_bench.registry import register_dataset

__all__ = ["MEDMNIST_INFO", "MedMNISTDataset", "medmnist", "npz_member"]

_ORGAN = [
    "bladder",
    "femur-left",
    "femur-right",
    "heart",
    "kidney-left",
    "kidney-right",
    "liver",
    "lung-left",
    "lung-right",
    "pancreas",
    "spleen",
]

#: flag → (task, channels, 3D?, class names) as published with MedMNIST (medmnist/info.py, v3.0).
MEDMNIST_INFO: dict[str, tuple[str, int, bool, tuple[str, ...]]] = {
    "pathmnist": (
        "multi-class",
        3,
        False,
        (
            "adipose",
            "background",
            "debris",
            "lymphocytes",
            "mucus",
            "smooth muscle",
            "normal colon mucosa",
            "cancer-associated stroma",
            "colorectal adenocarcinoma epithelium",
        ),
    ),
    "chestmnist": (
        "multi-label",
        1,
        False,
        (
            "atelectasis",
            "cardiomegaly",
            "effusion",
            "infiltration",
            "mass",
            "nodule",
            "pneumonia",
            "pneumothorax",
            "consolidation",
            "edema",
            "emphysema",
            "fibrosis",
            "pleural",
            "hernia",
        ),
    ),
    "dermamnist": (
        "multi-class",
        3,
        False,
        (
            "actinic keratoses and intraepithelial carcinoma",
            "basal cell carcinoma",
            "benign keratosis-like lesions",
            "dermatofibroma",
            "melanoma",
            "melanocytic nevi",
            "vascular lesions",
        ),
    ),
    "octmnist": (
        "multi-class",
        1,
        False,
        ("choroidal neovascularization", "diabetic macular edema", "drusen", "normal"),
    ),
    "pneumoniamnist": ("binary-class", 1, False, ("normal", "pneumonia")),
    "retinamnist": ("ordinal-regression", 3, False, ("0", "1", "2", "3", "4")),
    "breastmnist": ("binary-class", 1, False, ("malignant", "normal, benign")),
    "bloodmnist": (
        "multi-class",
        3,
        False,
        (
            "basophil",
            "eosinophil",
            "erythroblast",
            "immature granulocytes(myelocytes, metamyelocytes and promyelocytes)",
            "lymphocyte",
            "monocyte",
            "neutrophil",
            "platelet",
        ),
    ),
    "tissuemnist": (
        "multi-class",
        1,
        False,
        (
            "Collecting Duct, Connecting Tubule",
            "Distal Convoluted Tubule",
            "Glomerular endothelial cells",
            "Interstitial endothelial cells",
            "Leukocytes",
            "Podocytes",
            "Proximal Tubule Segments",
            "Thick Ascending Limb",
        ),
    ),
    "organamnist": ("multi-class", 1, False, tuple(_ORGAN)),
    "organcmnist": ("multi-class", 1, False, tuple(_ORGAN)),
    "organsmnist": ("multi-class", 1, False, tuple(_ORGAN)),
    "organmnist3d": (
        "multi-class",
        1,
        True,
        (
            "liver",
            "kidney-right",
            "kidney-left",
            "femur-right",
            "femur-left",
            "bladder",
            "heart",
            "lung-right",
            "lung-left",
            "spleen",
            "pancreas",
        ),
    ),
    "nodulemnist3d": ("binary-class", 1, True, ("benign", "malignant")),
    "adrenalmnist3d": ("binary-class", 1, True, ("normal", "hyperplasia")),
    "fracturemnist3d": (
        "multi-class",
        1,
        True,
        ("buckle rib fracture", "nondisplaced rib fracture", "displaced rib fracture"),
    ),
    "vesselmnist3d": ("binary-class", 1, True, ("vessel", "aneurysm")),
    "synapsemnist3d": ("binary-class", 1, True, ("inhibitory synapse", "excitatory synapse")),
}

_SIZES_2D = (28, 64, 128, 224)
_SIZES_3D = (28, 64)


def _default_cache() -> Path:
    base = os.environ.get("MEDIMG_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "medimg_bench"
    )
    return Path(base) / "medmnist"


def npz_member(
    path: str | Path, key: str, *, mmap: bool = True, cache_dir: str | Path | None = None
) -> np.ndarray:
    """Array ``key`` of an ``.npz`` file, memory-mapped when possible (see the module docstring).

    Returns a read-only ``np.memmap`` (stored member, or cached ``.npy`` of a compressed one) or,
    with ``mmap=False``, an in-memory array. Never unpickles: object arrays raise ``ValueError``."""
    path = Path(path)
    name = f"{key}.npy"
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ValueError(f"cannot read {str(path)!r} as .npz: {exc}") from exc
    with zf:
        if name not in zf.namelist():
            raise KeyError(
                f"{str(path)!r} has no array {key!r} (has {[n[:-4] for n in zf.namelist()]})"
            )
        info = zf.getinfo(name)
        if not mmap:
            with zf.open(info) as f:
                return _read_npy(f, path, key)
        if info.compress_type == zipfile.ZIP_STORED:
            with open(path, "rb") as raw:
                raw.seek(info.header_offset)
                header = raw.read(30)
                if header[:4] != b"PK\x03\x04":
                    raise ValueError(f"{str(path)!r}: corrupt zip entry for {key!r}")
                name_len, extra_len = struct.unpack("<HH", header[26:30])
                raw.seek(info.header_offset + 30 + name_len + extra_len)
                shape, fortran, dtype = _npy_header(raw, path, key)
                offset = raw.tell()
            return np.memmap(
                path,
                dtype=dtype,
                mode="r",
                shape=shape,
                order="F" if fortran else "C",
                offset=offset,
            )
        cache = Path(cache_dir) if cache_dir is not None else _default_cache()
        stat = path.stat()
        target = cache / f"{path.stem}-{stat.st_size}-{int(stat.st_mtime)}" / name
        if not target.exists():
            from filelock import FileLock

            from medimg_bench._fs import atomic_write

            target.parent.mkdir(parents=True, exist_ok=True)
            # one process extracts (the others wait, then find it); the rename is atomic, so
            # no reader ever memory-maps a partial file
            with FileLock(str(target.parent / f".{name}.lock")):
                if not target.exists():
                    with zf.open(info) as f:
                        arr = _read_npy(f, path, key)
                    with atomic_write(target) as out:
                        np.save(out, arr, allow_pickle=False)
        return np.load(target, mmap_mode="r", allow_pickle=False)


def _npy_header(f: Any, path: Path, key: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: member {key!r} is not a .npy array ({exc})") from exc
    if dtype.hasobject:
        raise ValueError(
            f"{str(path)!r}: member {key!r} holds Python objects; refusing to unpickle"
        )
    return shape, fortran, dtype


def _read_npy(f: Any, path: Path, key: str) -> np.ndarray:
    try:
        return np.lib.format.read_array(f, allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{str(path)!r}: member {key!r} could not be read ({exc})") from exc


class MedMNISTDataset(PathManifestDataset):
    """One split of a MedMNIST flag; ``image`` is ``C×H×W`` (2D) or ``1×D×H×W`` (3D) float32 in
    [0, 1]; ``label`` an int (multi-class) or a float 14-vector (ChestMNIST)."""

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: Path,
        file: str,
        flag: str,
        split: str,
        images: np.ndarray,
        labels: np.ndarray,
        mmap: bool = True,
        cache_dir: str | Path | None = None,
        transform: Callable | None = None,
        upsample: int | None = None,
    ) -> None:
        info = MEDMNIST_INFO[flag]
        self.upsample = upsample
        super().__init__(
            manifest,
            root=root,
            classes=info[3],
            transform=transform,
            name=f"medmnist/{flag}",
        )
        self.flag, self.split, self.file = flag, split, file
        self.multilabel = info[0] == "multi-label"
        self.is3d = info[2]
        self.mmap, self.cache_dir = mmap, cache_dir
        self.images: np.ndarray | None = images
        self.labels = labels

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
    name = "medmnist"
    flag = flag.lower()
    if flag not in MEDMNIST_INFO:
        raise ValueError(f"{name}: unknown flag {flag!r}; one of {sorted(MEDMNIST_INFO)}")
    split = {"valid": "val", "validation": "val"}.get(split, split)
    if split not in ("train", "val", "test"):
        raise ValueError(f"{name}: split must be 'train', 'val' or 'test', got {split!r}")
    task, channels, is3d, classes = MEDMNIST_INFO[flag]
    sizes = _SIZES_3D if is3d else _SIZES_2D
    if size is not None and size not in sizes:
        raise ValueError(f"{name}: size {size} not available for {flag} (sizes {sizes})")
    if upsample is not None and (is3d or int(upsample) < 1):
        raise ValueError(f"{name}: upsample={upsample} needs a 2D flag and a positive size")
    if root is None or str(root) in ("", "???"):
        raise ValueError(f"{name}: set root= to the folder holding {flag}.npz")
    r = Path(root).expanduser()
    candidates = [f"{flag}.npz"] if size in (None, 28) else []
    if size not in (None, 28):
        candidates = [f"{flag}_{size}.npz"]
    elif size == 28:
        candidates.append(f"{flag}_28.npz")
    path = next((r / c for c in candidates if (r / c).exists()), None)
    if path is None:
        raise FileNotFoundError(f"{name}: none of {candidates} in {str(r)!r}")
    images = npz_member(path, f"{split}_images", mmap=mmap, cache_dir=cache_dir)
    labels = np.asarray(npz_member(path, f"{split}_labels", mmap=False))
    n = images.shape[0]
    if labels.shape[0] != n:
        raise ValueError(
            f"{name}: {path.name} has {n} {split}_images but {labels.shape[0]} {split}_labels"
        )
    k = len(classes)
    labels = labels.reshape(n, -1)
    if task == "multi-label":
        if labels.shape[1] != k or not np.isin(labels, [0, 1]).all():
            raise ValueError(
                f"{name}: {path.name} {split}_labels must be N×{k} of 0/1, got shape {labels.shape}"
            )
    else:
        bad = (labels[:, 0] < 0) | (labels[:, 0] >= k) if labels.shape[1] == 1 else np.ones(n, bool)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{name}: {path.name} {split}_labels[{i}] = {labels[i].tolist()} is not a class index in 0..{k - 1}"
            )
    expect = 4 if is3d or channels == 3 else 3
    if images.ndim != expect:
        raise ValueError(
            f"{name}: {path.name} {split}_images has shape {images.shape}; {flag} expects {expect} axes"
        )
    man = pd.DataFrame(
        {
            "id": [f"{flag}_{split}_{i:06d}" for i in range(n)],
            "index": np.arange(n),
            "path": path.name,
        }
    )
    if task != "multi-label":
        man["label"] = labels[:, 0].astype(int)
    return MedMNISTDataset(
        man,
        root=r,
        file=path.name,
        flag=flag,
        split=split,
        images=images,
        labels=labels,
        mmap=mmap,
        cache_dir=cache_dir,
        transform=transform,
        upsample=upsample,
    )
