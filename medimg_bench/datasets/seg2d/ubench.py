"""U-Bench's 2D datasets in U-Bench's own prepared layouts: ``dataset=ubench`` with ``name=``.

U-Bench (Tang et al. 2025, arXiv:2510.07041; github.com/FengheTan9/U-Bench @eafbb9fb) trains and
scores its 2D datasets from folders laid out per dataset, chosen in
``dataloader/dataloader.py::getDataloader`` (by ``--dataset_name``, or by a substring of
``--base_dir``). This module reads each of those layouts as U-Bench's ``dataloader/`` classes do,
and names the dataset the way U-Bench's ``--dataset_name`` does (case-insensitive):

==============  ==============================================================================
layout          files (``root`` = U-Bench's ``--base_dir``)
==============  ==============================================================================
``list``        ``train.txt`` / ``val.txt`` (case names), ``images/<case>.png``,
                ``masks/0/<case>.png`` (README layout; busi, bus, isic18, tuscui, stare, ...)
``busbra``      lists of file names, ``Images/<case>``, ``Masks/<case with bus -> mask>``
``glas``        lists of file names, ``glas_dataset/<case>``, ``<case .bmp -> _anno.bmp>``
``montgomery``  lists of file names, ``CXR_png/<case>``, ``Mask/<case>``
``nih``         lists of file names, ``images/<case>``, ``masks/<case .png -> _mask.png>``
``chasedb1``    ``train|val|test/images`` + ``.../labels``, paired in sorted order
``drive``       ``train_data|test_data/images`` + ``.../1st_manual``, sorted order (val = test)
``kvasir``      ``train|validation|test/images`` + ``.../masks``
``frame_csv``   ``<split>_frame.csv`` (``image_path``, ``mask_path``), ``images/``, ``masks/``
                (COVID19, PH2, MonuSeg2018)
``dsb2018``     ``<split>_imageid_frame.csv`` (``ImageId``), ``stage1_train/<id>/images/<id>.png``,
                every ``stage1_train/<id>/masks/*.png`` (union)
``medsegbench`` ``<flag>_<size>.npz`` with ``<split>_images`` / ``<split>_label`` (MedSegBench)
``synapse``     ``lists/lists_Synapse/<split>.txt``; ``train_npz_new/<slice>.npz`` (2D),
                ``test_vol_h5_new/<case>.npy.h5`` (volumes; ``image`` / ``label``)
``acdc``        ``lists_ACDC/<split>.txt``; ``train|valid/<slice>`` (2D npz), ``test/<case>``
                (volume npz; ``img`` / ``label``)
==============  ==============================================================================

Masks are binarised with the rule of the U-Bench class that reads them (``mask_rule``):
``nonzero`` (``label / 255 > 0``), ``gt127`` (Kvasir's ``cv2.threshold(127)``, PH2 / MonuSeg /
DSB2018's ``>= 0.5``), ``eq255`` (CHASEDB1 / DRIVE / COVID19 keep ``label / 255`` and the metric
casts it to ``uint8``: only 255 is foreground). Images come as 3 channels (U-Bench reads them
with ``cv2.imread``; grey files are repeated) in RGB order (U-Bench feeds BGR to its networks).
``size=`` resizes to U-Bench's evaluation grid (``--img_size``, 256; 224 for some networks):
image bilinear (half-pixel centres, no antialiasing, as ``cv2.INTER_LINEAR``), mask nearest.

Synapse and ACDC (U-Bench's "3D-slice" datasets, ``main_multi3d.py``) come as U-Bench stores
them: 2D training slices, and test volumes ``1 x D x H x W`` (image as stored) with a ``D x H x W``
label map; Synapse's labels are mapped to U-Bench's 9 classes as its ``Synapse_dataset`` does
(5, 9, 10, 12, 13 -> 0; 11 -> 5).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.masks import (
    MaskDecodeError,
    check_label_map,
    decode_mask_values,
    grey_of,
    read_stored,
    values_seen,
)
from medimg_bench.datasets.seg2d import _io
from medimg_bench.datasets.seg2d.folder import Seg2DFolder, unpaired_problems
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["ACDC_CLASSES", "MASK_RULES", "SYNAPSE_CLASSES", "UBENCH_DATASETS", "UBenchFolder", "UBenchNpz",
           "UBenchVolumes", "binarize", "ubench"]

MASK_RULES = ("nonzero", "gt127", "eq255")

# MedSegBench flags U-Bench reads through dataloader/download.py (its INFO table; binary tasks)
_MEDSEGBENCH = ("kvasir", "isic2018", "drive", "chasedb1", "dca1", "chuac", "idrib", "cellnuclei",
                "pandental", "bbbc010", "dynamicnuclear", "nuset", "nuclei", "tnbcnuclei", "deepbacs",
                "brifiseg", "covid19radio", "covidquex", "cystoidfluid", "isic2016", "polypgen",
                "promise12", "robotool", "uwaterlooskincancer", "ultrasoundnerve", "usforkidney",
                "yeaz", "mosmedplus")

#: U-Bench ``--dataset_name`` (lower case) -> (layout, mask rule, split U-Bench scores in-domain)
UBENCH_DATASETS: dict[str, tuple[str, str, str]] = {
    **{n: ("list", "nonzero", "val") for n in ("busi", "bus", "isic18", "tuscui", "benign",
                                                "malignant", "stare")},
    # layouts named after their dataset
    **{n: (n, "nonzero", "val") for n in ("busbra", "glas", "montgomery", "nih")},
    **{n: (n, "eq255", "val") for n in ("chasedb1", "drive")},
    "kvasir-seg": ("kvasir", "gt127", "val"),
    "covid19": ("frame_csv", "eq255", "test"),
    **{n: ("frame_csv", "gt127", "test") for n in ("ph2", "monuseg2018")},
    "dsb2018": ("dsb2018", "gt127", "val"),
    # U-Bench routes these two names to its own CHASEDB1 / DRIVE folders before MedSegBench
    **{n: ("medsegbench", "nonzero", "val") for n in _MEDSEGBENCH if n not in ("chasedb1", "drive")},
    # multi-class volumes, scored per volume (main_multi3d.py); no binarisation
    "synapse": ("synapse", "labels", "test_vol"),
    "acdc": ("acdc", "labels", "test"),
}

#: Synapse after U-Bench's remap of the 13 BTCV labels (1 spleen ... 13 left adrenal gland)
SYNAPSE_CLASSES = ("background", "spleen", "right_kidney", "left_kidney", "gallbladder", "pancreas",
                   "liver", "stomach", "aorta")
#: ACDC label values: 1 right ventricle, 2 myocardium, 3 left ventricle
ACDC_CLASSES = ("background", "right_ventricle", "myocardium", "left_ventricle")
# Synapse's BTCV label -> U-Bench's 9-class label (Synapse_dataset with nclass=9)
_SYNAPSE_REMAP = np.array([0, 1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 5, 0, 0], dtype=np.int64)
# layout: (list folder, {split: (data folder, file name of a listed case, image key)})
_VOLUMES = {
    "synapse": ("lists/lists_Synapse", {"train": ("train_npz_new", "{}.npz", "image"),
                                        "test_vol": ("test_vol_h5_new", "{}.npy.h5", "image")}),
    "acdc": ("lists_ACDC", {"train": ("train", "{}", "img"), "valid": ("valid", "{}", "img"),
                            "test": ("test", "{}", "img")}),
}

# list layouts: (image folder, mask path from the case name, case names carry their suffix)
_LISTS: dict[str, tuple[str, Callable[[str], str], bool]] = {
    "list": ("images", lambda c: f"masks/0/{c}.png", False),
    "busbra": ("Images", lambda c: "Masks/" + c.replace("bus", "mask"), True),
    "glas": ("glas_dataset", lambda c: "glas_dataset/" + c.replace(".bmp", "_anno.bmp"), True),
    "montgomery": ("CXR_png", lambda c: f"Mask/{c}", True),
    "nih": ("images", lambda c: "masks/" + c.replace(".png", "_mask.png"), True),
}
_FOLDERS = {"chasedb1": ({"train": "train", "val": "val", "test": "test"}, "images", "labels"),
            "drive": ({"train": "train_data", "val": "test_data", "test": "test_data"}, "images", "1st_manual"),
            "kvasir": ({"train": "train", "val": "validation", "test": "test"}, "images", "masks")}


#: U-Bench's rules as thresholds of the binary encoding on 8-bit grey (foreground 255)
_RULE_THRESHOLDS = {"nonzero": 0, "gt127": 127, "eq255": 254}


def binarize(grey: np.ndarray, rule: str, *, source: str | Path = "<array>") -> np.ndarray:
    """An 8-bit grey mask as a 0/1 int64 map under U-Bench's ``rule`` (see the module doc): the
    mask decoder's binary encoding (foreground 255) with the rule's threshold, so a file with
    nonzero values that the rule leaves empty is refused naming ``source``."""
    if rule not in _RULE_THRESHOLDS:
        raise ValueError(f"ubench: mask_rule must be one of {MASK_RULES}, got {rule!r}")
    return decode_mask_values(grey, source=source, encoding="binary", foreground=255,
                              threshold=_RULE_THRESHOLDS[rule], full_scale=255.0)


def _grey(path: Path) -> np.ndarray:
    """A mask file as 8-bit grey, as ``cv2.IMREAD_GRAYSCALE`` reads it: RGB and palette colours by
    the ITU-R 601 weights (U-Bench's rules are on intensities), 16-bit scaled to 8-bit."""
    stored = read_stored(path)
    if stored.palette:
        from PIL import Image

        with Image.open(path) as im:
            return np.asarray(im.convert("L"))
    a = grey_of(stored, weights="itu601")
    if stored.full_scale == 65535.0:
        return (a.astype(np.float64) / 257.0).round().astype(np.uint8)
    return a.astype(np.uint8) * 255 if stored.full_scale == 1.0 else a  # 1-bit: 0/255, as cv2 reads it


def _rgb(image: np.ndarray) -> np.ndarray:
    """``C x H x W`` -> 3 channels (grey repeated, alpha dropped)."""
    if image.shape[0] == 1:
        return np.repeat(image, 3, axis=0)
    return image[:3]


def _resize(image: torch.Tensor, mask: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """U-Bench's ``Resize(size, size)``: bilinear image (no antialiasing), nearest mask."""
    import torch.nn.functional as F

    img = F.interpolate(image[None], size=(size, size), mode="bilinear", align_corners=False,
                        antialias=False)[0]
    m = F.interpolate(mask[None, None].float(), size=(size, size), mode="nearest")[0, 0]
    return img.clamp(0, 1), m.long()


class UBenchFolder(Seg2DFolder):
    """A U-Bench file layout: images as 3 channels, masks binarised with ``mask_rule``, optionally
    resized to ``size`` x ``size`` (U-Bench's evaluation grid)."""

    def __init__(self, pairs: Sequence[tuple[str, Path, list[Path]]], *, root: Path, mask_rule: str,
                 size: int | None = None, unpaired: Sequence[dict[str, Any]] = (),
                 mask_problems: Mapping[str, str] | None = None, name: str = "ubench") -> None:
        if mask_rule not in MASK_RULES:
            raise ValueError(f"{name}: mask_rule must be one of {MASK_RULES}, got {mask_rule!r}")
        super().__init__(pairs, root=root, classes=["background", "foreground"], mask_encoding="binary",
                         unpaired=unpaired, mask_problems=mask_problems, name=name)
        self.mask_rule = mask_rule
        self.size = size

    def decode_mask(self, path: Path) -> np.ndarray:
        """One mask file binarised with U-Bench's rule (several files of one image: their union,
        DSB2018's one mask per nucleus)."""
        grey = _grey(path)
        if not grey.any():  # all zero after the 8-bit conversion: a 16-bit 0/1 file is not empty
            stored = read_stored(path)
            if stored.array.any():
                raise MaskDecodeError(path, f"the file is not empty ({values_seen(stored.array)}) but is all zero "
                                      "as 8-bit grey (U-Bench reads masks so): an empty mask")
        return binarize(grey, self.mask_rule, source=path)

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        sample = super().load(row)
        sample["image"] = torch.from_numpy(np.ascontiguousarray(_rgb(sample["image"].numpy())))
        if self.size:
            sample["image"], sample["mask"] = _resize(sample["image"], sample["mask"], self.size)
            sample["meta"]["resized_to"] = (self.size, self.size)
        return sample


def _read_list(root: Path, split: str, lists: Mapping[str, str], name: str) -> list[str]:
    if split not in lists:
        raise ValueError(f"{name}: split must be one of {sorted(lists)} for this layout, got {split!r}")
    path = root / lists[split]
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise FileNotFoundError(f"{name}: cannot read the {split} list {str(path)!r}: {exc}") from exc
    cases = [ln.strip() for ln in lines if ln.strip()]
    if not cases:
        raise ValueError(f"{name}: the {split} list {str(path)!r} names no case")
    return cases


def _missing_mask(mask: Path, listings: dict[Path, dict[str, str]]) -> str:
    """Why ``mask`` is absent: no such file, or one whose name differs only in case."""
    folder = mask.parent
    if folder not in listings:
        listings[folder] = {p.name.casefold(): p.name for p in folder.iterdir()} if folder.is_dir() else {}
    near = listings[folder].get(mask.name.casefold())
    if near is not None:
        return f"no mask {str(mask)!r}: mask {near!r} differs from it only in case (names are matched exactly)"
    return f"no mask {str(mask)!r}"


def _from_list(root: Path, layout: str, split: str, lists: Mapping[str, str], name: str):
    image_dir, mask_of, has_suffix = _LISTS[layout]
    pairs, problems, listings = [], {}, {}
    for case in _read_list(root, split, lists, name):
        image = root / image_dir / (case if has_suffix else f"{case}.png")
        mask = root / mask_of(case)
        if mask.is_file():
            pairs.append((case, image, [mask]))
        else:  # a listed case whose mask is missing is a failing sample, not a vanishing one
            pairs.append((case, image, []))
            problems[case] = f"image {image.name!r}: {_missing_mask(mask, listings)}"
    return pairs, ([], problems)


def _from_folders(root: Path, layout: str, split: str, name: str):
    splits, image_sub, mask_sub = _FOLDERS[layout]
    if split not in splits:
        raise ValueError(f"{name}: split must be one of {sorted(splits)} for this layout, got {split!r}")
    idir, mdir = root / splits[split] / image_sub, root / splits[split] / mask_sub
    for d in (idir, mdir):
        if not d.is_dir():
            raise FileNotFoundError(f"{name}: folder {str(d)!r} does not exist (dataset.root={str(root)!r})")
    suffixes = (*_io.IMAGE_SUFFIXES, ".gif")  # DRIVE's manual annotations are GIFs
    images, masks = _io.list_images(idir, suffixes=suffixes), _io.list_images(mdir, suffixes=suffixes)
    if layout == "kvasir":  # U-Bench zips two unsorted listings; the files share their names
        pairs, _, lonely_m, problems = _io.pair_by_stem(images, masks)
        return pairs, (unpaired_problems([], lonely_m), {k: f"{v} ({str(mdir)!r})" for k, v in problems.items()})
    if len(images) != len(masks):  # U-Bench asserts the same: it pairs the n-th image with the n-th mask
        raise ValueError(f"{name}: {len(images)} images in {str(idir)!r} but {len(masks)} masks in "
                         f"{str(mdir)!r}; this layout pairs them in sorted order")
    return [(img.stem, img, [m]) for img, m in zip(images, masks)], ([], {})


def _from_frame(root: Path, layout: str, split: str, name: str):
    csv = root / (f"{split}_frame.csv" if layout == "frame_csv" else f"{split}_imageid_frame.csv")
    try:
        frame = pd.read_csv(csv)
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{name}: cannot read {str(csv)!r}: {exc}") from exc
    need = ("image_path", "mask_path") if layout == "frame_csv" else ("ImageId",)
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise ValueError(f"{name}: {str(csv)!r} has no column(s) {missing} (columns: {list(frame.columns)})")
    if layout == "frame_csv":
        return [(str(Path(i).stem), root / "images" / str(i), [root / "masks" / str(m)])
                for i, m in zip(frame["image_path"], frame["mask_path"])], ([], {})
    pairs = []
    for iid in dict.fromkeys(str(x) for x in frame["ImageId"]):  # unique, first-seen order
        case = root / "stage1_train" / iid
        mdir = case / "masks"
        masks = _io.list_images(mdir) if mdir.is_dir() else [mdir / "(none)"]
        pairs.append((iid, case / "images" / f"{iid}.png", masks or [mdir / "(none)"]))
    return pairs, ([], {})


class UBenchNpz(ManifestDataset):
    """A MedSegBench ``<flag>_<size>.npz`` split as U-Bench reads it (``FlexibleMedSegBench``):
    binary masks ``label * 255 / 255 > 0``, grey images repeated to 3 channels."""

    task = "segmentation"

    def __init__(self, path: Path, split: str, *, size: int | None = None, name: str = "ubench") -> None:
        try:
            with np.load(path) as z:
                n = len(z[f"{split}_images"])
                n_labels = len(z[f"{split}_label"])
        except KeyError as exc:
            raise ValueError(f"{name}: {str(path)!r} has no array {exc} (split={split!r})") from exc
        except (OSError, ValueError) as exc:
            raise FileNotFoundError(f"{name}: cannot read {str(path)!r}: {exc}") from exc
        if n != n_labels:
            raise ValueError(f"{name}: {str(path)!r} holds {n} {split} images but {n_labels} labels")
        manifest = pd.DataFrame({"id": [f"{split}_{i:05d}" for i in range(n)], "npz": str(path),
                                 "index": range(n)})
        super().__init__(manifest, root=path.parent, path_columns=("npz",),
                         classes=["background", "foreground"], name=name)
        self.split, self.size = split, size
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def _load_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:  # one read per worker; the arrays are small (<= 512 px)
            path = self.resolve(self.manifest["npz"].iat[0])
            with np.load(path) as z:
                self._arrays = (z[f"{self.split}_images"], z[f"{self.split}_label"])
        return self._arrays

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        images, labels = self._load_arrays()
        i = int(row["index"])
        img = images[i]
        img = np.stack([img] * 3, axis=0) if img.ndim == 2 else np.moveaxis(img[..., :3], -1, 0)
        lab = labels[i][..., 0] if labels[i].ndim == 3 else labels[i]
        image = torch.from_numpy(img.astype(np.float32) / 255.0)
        mask = torch.from_numpy((lab > 0).astype(np.int64))
        if image.shape[1:] != mask.shape:
            raise SampleError(f"image is {tuple(image.shape[1:])} but label is {tuple(mask.shape)}",
                              sample_id=str(row["id"]), path=str(row["npz"]))
        meta = self.meta_for(row)
        if self.size:
            image, mask = _resize(image, mask, self.size)
            meta["resized_to"] = (self.size, self.size)
        meta.update(path=str(row["npz"]), spacing=(1.0, 1.0))
        return {"id": str(row["id"]), "image": image, "mask": mask, "meta": meta}


def _read_arrays(path: Path, image_key: str) -> tuple[np.ndarray, np.ndarray]:
    """``(image, label)`` of one U-Bench ``.npz`` / ``.h5`` file (never unpickles)."""
    if path.suffix == ".h5":
        try:
            import h5py
        except ImportError as exc:  # an optional dependency (the `data` extra)
            raise ImportError("ubench: reading Synapse's .npy.h5 volumes needs h5py (pip install h5py)") from exc
        with h5py.File(path, "r") as f:
            return np.asarray(f[image_key][:]), np.asarray(f["label"][:])
    with np.load(path, allow_pickle=False) as z:
        return np.asarray(z[image_key]), np.asarray(z["label"])


class UBenchVolumes(ManifestDataset):
    """Synapse / ACDC as U-Bench stores them: 2D training slices or test volumes, image as stored
    (``1 x [D x] H x W`` float32), multi-class label map (Synapse remapped to 9 classes)."""

    task = "segmentation"

    def __init__(self, cases: Sequence[tuple[str, Path]], *, root: Path, kind: str, image_key: str,
                 name: str = "ubench") -> None:
        manifest = pd.DataFrame({"id": [c for c, _ in cases], "file": [str(p) for _, p in cases]})
        classes = SYNAPSE_CLASSES if kind == "synapse" else ACDC_CLASSES
        super().__init__(manifest, root=root, path_columns=("file",), classes=classes, name=name)
        self.kind, self.image_key = kind, image_key

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        sid, path = str(row["id"]), self.resolve(row["file"])
        try:
            image, label = _read_arrays(path, self.image_key)
        except (OSError, KeyError, ValueError) as exc:
            raise SampleError(f"cannot read {path.name}: {exc}", sample_id=sid, path=str(path)) from exc
        if image.shape != label.shape or image.ndim not in (2, 3):
            raise SampleError(f"image {image.shape} and label {label.shape} must be the same 2D or 3D shape",
                              sample_id=sid, path=str(path))
        try:
            lab = check_label_map(label, path)  # a float label with fractions is refused, not rounded
        except ValueError as exc:
            raise SampleError(str(exc), sample_id=sid, path=str(path)) from exc
        if self.kind == "synapse":
            if lab.min(initial=0) < 0 or lab.max(initial=0) >= len(_SYNAPSE_REMAP):
                raise SampleError(f"label values {lab.min()}..{lab.max()} outside BTCV's 0..13", sample_id=sid,
                                  path=str(path))
            lab = _SYNAPSE_REMAP[lab]
        elif lab.min(initial=0) < 0 or lab.max(initial=0) >= len(ACDC_CLASSES):
            raise SampleError(f"label values {lab.min()}..{lab.max()} outside ACDC's 0..3", sample_id=sid, path=str(path))
        meta = self.meta_for(row)
        meta.update(path=str(path), spacing=(1.0,) * image.ndim)
        return {"id": sid, "image": torch.from_numpy(image.astype(np.float32)[None]),
                "mask": torch.from_numpy(lab), "meta": meta}


def _volumes(root: Path, kind: str, split: str, name: str) -> UBenchVolumes:
    list_dir, splits = _VOLUMES[kind]
    if split not in splits:
        raise ValueError(f"{name}: split must be one of {sorted(splits)} for this layout, got {split!r}")
    folder, pattern, key = splits[split]
    cases = _read_list(root, split, {split: f"{list_dir}/{split}.txt"}, name)
    return UBenchVolumes([(Path(pattern.format(c)).name.removesuffix(".npy.h5").removesuffix(".npz"),
                           root / folder / pattern.format(c)) for c in cases],
                         root=root, kind=kind, image_key=key, name=name)


def _layout_of(name: str, layout: str | None) -> tuple[str, str, str]:
    key = name.lower()
    if layout is None:
        if key not in UBENCH_DATASETS:
            raise ValueError(f"ubench: unknown U-Bench dataset {name!r}; known: {sorted(UBENCH_DATASETS)} "
                             "(or give layout= for a folder in one of U-Bench's layouts)")
        return UBENCH_DATASETS[key]
    known = {v[0] for v in UBENCH_DATASETS.values()}
    if layout not in known:
        raise ValueError(f"ubench: layout must be one of {sorted(known)}, got {layout!r}")
    rule, split = next(((r, s) for lay, r, s in UBENCH_DATASETS.values() if lay == layout))
    return layout, rule, split


@register_dataset("ubench", tags=("segmentation", "2d"))
def ubench(*, root: str | Path, split: str | None = None, name: str = "busi", layout: str | None = None,
           mask_rule: str | None = None, size: int | None = None, train_list: str = "train.txt",
           val_list: str = "val.txt", npz_size: int = 256) -> ManifestDataset:
    """One U-Bench dataset in U-Bench's prepared layout (``root`` = its ``--base_dir``).

    ``name``: U-Bench's ``--dataset_name`` (``busi``, ``BUSBRA``, ``Glas``, ``Kvasir-SEG``, a
    MedSegBench flag, ...); ``layout`` reads any folder in one of the layouts instead.
    ``split=None`` is the split U-Bench scores in-domain (``val``; ``test`` for the frame CSVs and
    ACDC, ``test_vol`` for Synapse).
    ``mask_rule`` overrides the layout's binarisation; ``size`` resizes to U-Bench's grid.
    ``train_list`` / ``val_list``: U-Bench's ``--train_file_dir`` / ``--val_file_dir``."""
    lay, rule, default_split = _layout_of(name, layout)
    split = split or default_split
    rule = mask_rule or rule
    r = Path(root)
    if not r.is_dir():
        raise FileNotFoundError(f"ubench: dataset.root {str(r)!r} is not a folder (U-Bench's --base_dir "
                                f"for {name!r})")
    label = f"ubench[{name}]"
    if lay == "medsegbench":
        return UBenchNpz(r / f"{name.lower()}_{npz_size}.npz", split, size=size, name=label)
    if lay in _VOLUMES:
        if size or mask_rule:
            raise ValueError(f"{label}: size / mask_rule apply to the binary 2D layouts; U-Bench scores "
                             f"{name} on the stored grid with its multi-class labels")
        return _volumes(r, lay, split, label)
    if lay in _LISTS:
        pairs, unpaired = _from_list(r, lay, split, {"train": train_list, "val": val_list}, label)
    elif lay in _FOLDERS:
        pairs, unpaired = _from_folders(r, lay, split, label)
    else:
        pairs, unpaired = _from_frame(r, lay, split, label)
    if not pairs:
        raise ValueError(f"{label}: no image/mask pair found for split {split!r} under {str(r)!r}")
    unpaired, problems = unpaired
    return UBenchFolder(pairs, root=r, mask_rule=rule, size=size, unpaired=unpaired, mask_problems=problems,
                        name=label)
