"""Seeded phantoms for the demo and the tests, written to disk and read back with the toolkit's
own readers (so the demo exercises the same I/O path as real data).

* ``synthetic_cxr`` — 2D chest-X-ray-like 16-bit PNGs (lungs, heart, ribs, noise) with three
  findings as multi-hot labels and a lesion label map: ``nodule`` (small dense blob),
  ``effusion`` (fluid level filling a lung base), ``cardiomegaly`` (enlarged heart).
* ``synthetic_ct`` — 3D CT-like NIfTI volumes in Hounsfield units with anisotropic spacing and an
  organ label map: 1 ``liver``, 2 ``kidney`` (both sides), 3 ``spleen``, 4 ``spine``.
* ``builtin_real`` — the real DICOM and NIfTI files that pydicom and nibabel ship.

Every image depends only on ``(seed, index)``; files are generated once into a folder per
parameter set under ``cache_dir`` (default ``$MEDIMG_BENCH_CACHE/synthetic``, else
``~/.cache/medimg_bench/synthetic``) and reused. ``root=`` only reads back such a folder (it holds
the writer's ``params.json``); any other folder is refused, never written into.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.grid import align_to_image_grid, read_target
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = ["CXR_FINDINGS", "CT_ORGANS", "default_cache_dir", "make_cxr_phantom", "write_synthetic_cxr", "make_ct_phantom", "write_synthetic_ct", "SyntheticCXR", "SyntheticCT"]

CXR_FINDINGS = ("nodule", "effusion", "cardiomegaly")
CT_ORGANS = ("background", "liver", "kidney", "spleen", "spine")
_SITES = ("site_a", "site_b", "site_c")


def default_cache_dir() -> Path:
    """Where generated phantoms are written unless a ``root`` is given."""
    import os

    base = os.environ.get("MEDIMG_BENCH_CACHE") or (Path.home() / ".cache" / "medimg_bench")
    return Path(base) / "synthetic"


def _ellipse(shape: Sequence[int], center: Sequence[float], radii: Sequence[float]) -> np.ndarray:
    grids = np.ogrid[tuple(slice(0, s) for s in shape)]
    acc = np.zeros(shape, dtype=np.float32)
    for g, c, r in zip(grids, center, radii):
        acc = acc + ((g - c) / r) ** 2
    return acc <= 1.0


# -- 2D chest X-ray phantom -------------------------------------------------------------------
def make_cxr_phantom(
    labels: Sequence[int], *, size: int = 64, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """One chest-X-ray-like image and its lesion map.

    Returns ``image`` (float32 in [0, 1], ``size×size``; dense tissue is bright as in a radiograph)
    and ``mask`` (uint8: 0 none, i+1 for finding ``CXR_FINDINGS[i]``).
    """
    rng = np.random.default_rng(seed)
    h = w = size
    img = np.full((h, w), 0.55, dtype=np.float32)
    body = _ellipse((h, w), (h * 0.55, w * 0.5), (h * 0.5, w * 0.46))
    img[~body] = 0.05
    jitter = rng.normal(0, 0.02, 4) * size
    lung_r = (h * 0.3, w * 0.16)
    left = _ellipse((h, w), (h * 0.5 + jitter[0], w * 0.3 + jitter[1]), lung_r)
    right = _ellipse((h, w), (h * 0.5 + jitter[2], w * 0.7 + jitter[3]), lung_r)
    lungs = left | right
    img[lungs] = 0.2
    for k in range(5):  # ribs: faint bright bands across the lungs
        y = int(h * (0.28 + 0.1 * k + rng.normal(0, 0.01)))
        band = np.zeros((h, w), bool)
        band[max(y, 0) : y + max(1, size // 40)] = True
        img[band & lungs] += 0.12
    mask = np.zeros((h, w), dtype=np.uint8)
    heart_scale = (1.3 + rng.uniform(0, 0.1)) if labels[2] else (1.0 + rng.uniform(-0.05, 0.08))
    heart = _ellipse((h, w), (h * 0.62, w * 0.55), (h * 0.14 * heart_scale, w * 0.12 * heart_scale))
    img[heart] = 0.6
    if labels[2]:
        mask[heart] = 3
    if labels[1]:  # effusion: the base of one lung fills with fluid (bright)
        lung = left if rng.random() < 0.5 else right
        rows = np.nonzero(lung.any(1))[0]
        level = rows.min() + int((rows.max() - rows.min()) * rng.uniform(0.55, 0.7))
        fluid = lung.copy()
        fluid[:level] = False
        img[fluid] = 0.38
        mask[fluid] = 2
    if labels[0]:  # nodule: a small dense blob inside a lung
        ys, xs = np.nonzero(lungs & (mask == 0))
        if len(ys):
            i = rng.integers(len(ys))
            r = size * rng.uniform(0.035, 0.06)
            blob = _ellipse((h, w), (ys[i], xs[i]), (r, r))
            img[blob] = 0.5
            mask[blob] = 1
    img += rng.normal(0, 0.06, (h, w)).astype(np.float32)
    return np.clip(img, 0, 1), mask


def write_synthetic_cxr(
    root: str | Path, *, n: int = 200, size: int = 64, seed: int = 0, test_fraction: float = 0.3
) -> Path:
    """Write ``n`` phantoms as 16-bit PNG images + 8-bit PNG masks and ``manifest.csv`` under
    ``root``; two images per patient, split by patient. Returns the manifest path."""
    from PIL import Image

    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "masks").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_patients = (n + 1) // 2
    patient_test = rng.random(n_patients) < test_fraction
    rows = []
    for i in range(n):
        pid = i // 2
        labels = (rng.random(3) < np.array([0.35, 0.3, 0.3])).astype(int)
        image, mask = make_cxr_phantom(labels, size=size, seed=seed * 100_003 + i)
        sid = f"cxr_{i:05d}"
        Image.fromarray((image * 65535).round().astype(np.uint16)).save(root / "images" / f"{sid}.png")
        Image.fromarray(mask).save(root / "masks" / f"{sid}.png")
        rows.append(
            {
                "id": sid,
                "patient_id": f"p{pid:05d}",
                "image": f"images/{sid}.png",
                "mask": f"masks/{sid}.png",
                **{f: int(v) for f, v in zip(CXR_FINDINGS, labels)},
                "view": "PA" if rng.random() < 0.7 else "AP",
                "sex": "F" if rng.random() < 0.5 else "M",
                "age": int(rng.integers(18, 90)),
                "site": _SITES[pid % len(_SITES)],
                "split": "test" if patient_test[pid] else "train",
            }
        )
    manifest = root / "manifest.csv"
    pd.DataFrame(rows).to_csv(manifest, index=False)
    return manifest


# -- 3D CT phantom ----------------------------------------------------------------------------
def make_ct_phantom(
    *, shape: Sequence[int] = (64, 64, 32), seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """One CT-like volume (float32 HU, axes x, y, z) and its organ label map (uint8, ``CT_ORGANS``).

    Air −1000 HU, fat −100, soft tissue 40, liver 60, spleen 50, kidney cortex 150 (contrast),
    bone 700, Gaussian noise σ = 15 HU. Organ sizes and positions vary with ``seed``.
    """
    rng = np.random.default_rng(seed)
    sx, sy, sz = shape
    vol = np.full(shape, -1000.0, dtype=np.float32)
    lab = np.zeros(shape, dtype=np.uint8)

    def j(scale: float = 0.04) -> float:
        return float(rng.normal(0, scale))

    body = _ellipse(shape, (sx * 0.5, sy * 0.5, sz * 0.5), (sx * 0.46, sy * 0.38, sz * 0.9))
    vol[body] = -100.0
    inner = _ellipse(shape, (sx * 0.5, sy * 0.5, sz * 0.5), (sx * 0.42, sy * 0.34, sz * 0.9))
    vol[inner] = 40.0
    # patient left/right: x increasing = patient left (RAS)
    liver = _ellipse(
        shape,
        (sx * (0.32 + j()), sy * (0.45 + j()), sz * (0.55 + j())),
        (sx * (0.15 + j(0.02)), sy * (0.15 + j(0.02)), sz * (0.3 + j(0.03))),
    )
    spleen = _ellipse(
        shape,
        (sx * (0.7 + j()), sy * (0.55 + j()), sz * (0.6 + j())),
        (sx * (0.07 + j(0.01)), sy * (0.08 + j(0.01)), sz * (0.18 + j(0.02))),
    )
    kidneys = np.zeros(shape, bool)
    for side in (0.36, 0.64):
        kidneys |= _ellipse(
            shape,
            (sx * (side + j(0.02)), sy * (0.68 + j(0.02)), sz * (0.4 + j())),
            (sx * 0.05, sy * 0.06, sz * (0.16 + j(0.02))),
        )
    spine = _ellipse(shape, (sx * 0.5, sy * 0.76, sz * 0.5), (sx * 0.05, sy * 0.05, sz * 2))
    for organ, value, hu in ((liver, 1, 60.0), (kidneys, 2, 150.0), (spleen, 3, 50.0), (spine, 4, 700.0)):
        region = organ & inner
        vol[region] = hu
        lab[region] = value
    vol += rng.normal(0, 15.0, shape).astype(np.float32)
    return vol, lab


def write_synthetic_ct(
    root: str | Path,
    *,
    n: int = 16,
    shape: Sequence[int] = (64, 64, 32),
    spacing: Sequence[float] = (1.5, 1.5, 3.0),
    seed: int = 0,
    test_fraction: float = 0.375,
) -> Path:
    """Write ``n`` volumes as NIfTI (HU, int16) + label maps (uint8) with an RAS affine of the given
    ``spacing`` (mm) and ``manifest.csv`` under ``root``. Returns the manifest path."""
    import nibabel as nib

    root = Path(root)
    (root / "imagesTr").mkdir(parents=True, exist_ok=True)
    (root / "labelsTr").mkdir(parents=True, exist_ok=True)
    affine = np.diag([*map(float, spacing), 1.0])
    rng = np.random.default_rng(seed)
    n_test = max(1, round(n * test_fraction))
    test_ids = set(rng.choice(n, n_test, replace=False).tolist())
    rows = []
    for i in range(n):
        vol, lab = make_ct_phantom(shape=shape, seed=seed * 100_003 + i)
        sid = f"ct_{i:04d}"
        nib.save(nib.Nifti1Image(vol.round().astype(np.int16), affine), root / "imagesTr" / f"{sid}.nii.gz")
        nib.save(nib.Nifti1Image(lab, affine), root / "labelsTr" / f"{sid}.nii.gz")
        rows.append(
            {
                "id": sid,
                "patient_id": sid,
                "image": f"imagesTr/{sid}.nii.gz",
                "mask": f"labelsTr/{sid}.nii.gz",
                "modality": "CT",
                "sex": "F" if rng.random() < 0.5 else "M",
                "age": int(rng.integers(18, 90)),
                "site": _SITES[i % len(_SITES)],
                "split": "test" if i in test_ids else "train",
            }
        )
    manifest = root / "manifest.csv"
    pd.DataFrame(rows).to_csv(manifest, index=False)
    return manifest


def _materialize(
    kind: str, root: str | Path | None, params: Mapping[str, Any], writer: Callable[..., Path],
    cache_dir: str | Path | None = None,
) -> tuple[Path, pd.DataFrame]:
    """Generate the phantoms once per parameter set and return (folder, manifest).

    Phantoms are written under ``cache_dir`` (default :func:`default_cache_dir`), one folder
    ``<kind>_<parameters>`` per parameter set. ``root`` only reads back a phantom folder this toolkit wrote (its
    ``params.json`` marker, same parameters); any other folder is refused, never written into.

    Safe when many processes start at once on one cache (a Hydra multirun, a SLURM array on a
    shared file system): ``_fs.locked_materialize`` lets the first writer build under a file lock
    into a temporary folder renamed into place, so a reader sees either no folder or a finished
    one (``params.json`` is written last, inside the temporary folder). A writer killed half-way
    leaves only a ``.tmp-*`` folder that no reader takes for finished; the next writer removes it.
    """
    from medimg_bench._fs import locked_materialize

    wanted = json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}, sort_keys=True)
    if root is not None:
        return _read_phantom_folder(kind, Path(root), wanted), \
            pd.read_csv(Path(root) / "manifest.csv", dtype={"id": str, "patient_id": str})
    key = "_".join(f"{k}{v}" for k, v in sorted(params.items())).replace(" ", "").replace(",", "x")
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = base / f"{kind}_{key}"

    def finished(where: Path) -> bool:
        stamp = where / "params.json"
        return stamp.exists() and stamp.read_text() == wanted and (where / "manifest.csv").exists()

    def build(tmp: Path) -> None:
        writer(tmp, **params)
        (tmp / "params.json").write_text(wanted)

    locked_materialize(folder, build, is_complete=finished)
    return folder, pd.read_csv(folder / "manifest.csv", dtype={"id": str, "patient_id": str})


def _read_phantom_folder(kind: str, folder: Path, wanted: str) -> Path:
    """``folder`` if it is a finished phantom folder of these parameters, else a ValueError that
    says where synthetic data goes (the ``root`` of a generated dataset is never written into)."""
    stamp = folder / "params.json"
    if not stamp.is_file() or not (folder / "manifest.csv").is_file():
        what = "does not exist" if not folder.exists() else "is not a phantom folder this toolkit wrote (no params.json)"
        raise ValueError(
            f"synthetic_{kind}: root={str(folder)!r} {what}. Synthetic data is generated, not read from a "
            f"root: it is written under the cache ({default_cache_dir()}, from $MEDIMG_BENCH_CACHE); set "
            "dataset.options.cache_dir=DIR (cache_dir=DIR in Python) to write it elsewhere and leave "
            "dataset.root null. root= only reads back a phantom folder written before (its params.json).")
    if stamp.read_text() != wanted:
        raise ValueError(f"synthetic_{kind}: root={str(folder)!r} holds phantoms made with {stamp.read_text()}, "
                         f"not the ones asked for ({wanted}); drop root= to generate these under the cache "
                         "(dataset.options.cache_dir=DIR to choose where), or ask for the folder's options")
    return folder


def _select_split(manifest: pd.DataFrame, split: str | None, name: str) -> pd.DataFrame:
    if split in (None, "all"):
        return manifest
    if split not in set(manifest["split"]):
        raise ValueError(f"{name}: unknown split {split!r}; have {sorted(set(manifest['split']))} or 'all'")
    return manifest[manifest["split"] == split]


class SyntheticCXR(ManifestDataset):
    """2D chest-X-ray phantoms: ``image`` 1×H×W in [0, 1], multi-hot ``label`` (3 findings),
    lesion ``mask``."""

    task = "classification"

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.io import read_image

        path = self.resolve(row["image"])
        array, _ = read_image(path)
        if array.dtype != np.uint16:
            raise SampleError(f"expected a 16-bit PNG, got {array.dtype}", sample_id=row["id"], path=str(path))
        image = torch.from_numpy(array.astype(np.float32) / 65535.0)[None]
        mpath = self.resolve(row["mask"])
        mask_arr, _ = read_image(mpath)
        if mask_arr.shape != array.shape:
            raise SampleError(
                f"image/mask shape mismatch: image {array.shape} ({path}), mask {mask_arr.shape}",
                sample_id=row["id"],
                path=str(mpath),
            )
        label = torch.tensor([float(row[f]) for f in CXR_FINDINGS])
        meta = {**self.meta_for(row), "path": str(path), "spacing": (1.0, 1.0)}
        return {"id": row["id"], "image": image, "label": label, "mask": torch.from_numpy(mask_arr.astype(np.int64)), "meta": meta}


@register_dataset("synthetic_cxr", tags=("synthetic", "cxr", "classification"))
def synthetic_cxr(
    root: str | Path | None = None,
    split: str | None = "test",
    *,
    n: int = 200,
    size: int = 64,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> SyntheticCXR:
    """Chest-X-ray phantoms (multi-label: nodule, effusion, cardiomegaly), split by patient,
    written under ``cache_dir`` (default ``$MEDIMG_BENCH_CACHE/synthetic``); ``root``
    only reads back a phantom folder written before."""
    folder, manifest = _materialize("cxr", root, {"n": n, "size": size, "seed": seed}, write_synthetic_cxr,
                                    cache_dir=cache_dir)
    return SyntheticCXR(
        _select_split(manifest, split, "synthetic_cxr"),
        root=folder,
        path_columns=("image", "mask"),
        classes=CXR_FINDINGS,
        transform=transform,
        name="synthetic_cxr",
    )


class SyntheticCT(ManifestDataset):
    """3D CT phantoms: ``image`` 1×X×Y×Z (HU, optionally windowed to [0, 1]), organ ``mask``."""

    task = "segmentation"

    def __init__(self, *args: Any, window: Sequence[float] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.window = tuple(window) if window is not None else None

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.io import read_image

        path = self.resolve(row["image"])
        array, meta = read_image(path)
        mpath = self.resolve(row["mask"])
        mask_arr, mmeta = read_target(mpath)
        mask_arr = align_to_image_grid(
            mask_arr, mmeta.get("affine"), meta.get("affine"), image_shape=tuple(array.shape),
            sample_id=str(row["id"]), image_path=path, mask_path=mpath,
        )
        image = torch.from_numpy(np.asarray(array, dtype=np.float32))[None]
        if self.window is not None:
            lo, hi = self.window
            image = ((image.clamp(lo, hi) - lo) / (hi - lo)).contiguous()
        out_meta = {**self.meta_for(row), "path": str(path), "spacing": meta["spacing"], "affine": meta["affine"]}
        return {
            "id": row["id"],
            "image": image,
            "mask": torch.from_numpy(np.asarray(mask_arr).astype(np.int64)),
            "meta": out_meta,
        }


@register_dataset("synthetic_ct", tags=("synthetic", "ct", "segmentation"))
def synthetic_ct(
    root: str | Path | None = None,
    split: str | None = "test",
    *,
    n: int = 16,
    shape: Sequence[int] = (64, 64, 32),
    spacing: Sequence[float] = (1.5, 1.5, 3.0),
    seed: int = 0,
    window: Sequence[float] | None = (-200.0, 300.0),
    cache_dir: str | Path | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> SyntheticCT:
    """CT phantoms with 4 organ classes, anisotropic spacing (mm), HU windowed to [0, 1] by
    default (``window=None`` keeps HU); written under ``cache_dir`` (default
    ``$MEDIMG_BENCH_CACHE/synthetic``), ``root`` only reads back a phantom folder written before."""
    params = {"n": n, "shape": tuple(int(s) for s in shape), "spacing": tuple(float(s) for s in spacing), "seed": seed}
    folder, manifest = _materialize("ct", root, params, write_synthetic_ct, cache_dir=cache_dir)
    return SyntheticCT(
        _select_split(manifest, split, "synthetic_ct"),
        root=folder,
        path_columns=("image", "mask"),
        classes=CT_ORGANS,
        transform=transform,
        name="synthetic_ct",
        window=window,
    )
