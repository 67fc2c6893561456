"""Data-loading throughput: medimg_bench datasets vs MONAI on the same files.

Writes (a) a folder of chest X-ray sized PNGs (1024×1024, 8-bit) and (b) NIfTI volumes
(256×256×128 int16, .nii.gz) to a temporary directory, then reads every file once per
configuration through a ``DataLoader`` with ``num_workers`` 0 and 2:

* ours: ``TableDataset`` (PNG → float32 ``1×H×W``; NIfTI → float32 ``1×X×Y×Z``),
  and for PNG also ``DiskCache`` over it after one warm pass (safetensors float32 entries);
* peer: MONAI ``Dataset`` + ``LoadImaged(keys="image", ensure_channel_first=True)``
  (float32 MetaTensors), batched by ``monai.data.DataLoader``.

Prints images/s for each and the ratio ours / MONAI. Run::

    python benchmarks/data_loading.py            # 200 PNGs, 20 volumes
    python benchmarks/data_loading.py --quick    # 32 PNGs, 4 volumes of 128×128×64
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch


def _cxr_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """A smooth, X-ray-like 8-bit image (compresses like a real radiograph, unlike noise)."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    img = 0.35 + 0.25 * np.sin(3.0 * x + rng.uniform(0, 3)) * np.cos(2.0 * y)
    for _ in range(6):  # soft blobs: lungs, heart, bones
        cx, cy, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.05, 0.25)
        img += 0.3 * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)
    return np.clip(img * 255, 0, 255).astype(np.uint8)


def write_pngs(folder: Path, n: int, size: int, seed: int = 0) -> list[str]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    base = [_cxr_like(rng, size) for _ in range(min(n, 8))]
    for i in range(n):
        # vary the pixels so that no two files are identical
        img = base[i % len(base)] ^ rng.integers(0, 2, (size, size), dtype=np.uint8)
        p = folder / f"{i:05d}.png"
        Image.fromarray(img).save(p)
        paths.append(str(p))
    return paths


def write_niftis(folder: Path, n: int, shape: tuple[int, int, int], seed: int = 0) -> list[str]:
    import nibabel as nib

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(*[np.linspace(-1, 1, s, dtype=np.float32) for s in shape], indexing="ij")
    body = (z**2 + y**2 < 0.8).astype(np.float32)
    paths = []
    for i in range(n):
        vol = -1000 + body * (1040 + 60 * np.sin(8 * x + i)) + rng.normal(0, 20, shape)
        img = nib.Nifti1Image(vol.astype(np.int16), np.diag([0.8, 0.8, 1.5, 1.0]))
        p = folder / f"case_{i:04d}.nii.gz"
        nib.save(img, p)
        paths.append(str(p))
    return paths


def _one_pass(make_loader: Callable[[], torch.utils.data.DataLoader], n: int) -> float:
    """Images/s of one full pass (worker start-up included)."""
    start = time.perf_counter()
    seen = 0
    for batch in make_loader():
        seen += len(batch["image"])
    assert seen == n, f"read {seen} of {n} images"
    return seen / (time.perf_counter() - start)


def _best_interleaved(loaders: dict[str, Callable[[], torch.utils.data.DataLoader]], n: int, repeats: int) -> dict[str, float]:
    """Best images/s of each loader over ``repeats`` rounds; within a round the loaders run one
    after the other, so a load spike from other processes hits them alike."""
    best = dict.fromkeys(loaders, 0.0)
    for _ in range(repeats):
        for name, make in loaders.items():
            best[name] = max(best[name], _one_pass(make, n))
    return best


def ours_loader(paths: list[str], workers: int, batch: int, cache_dir: Path | None = None):
    from medimg_bench.datasets.base import TableDataset
    from medimg_bench.datasets.cache import DiskCache
    from medimg_bench.sample import collate

    manifest = pd.DataFrame({"id": [Path(p).name for p in paths], "image": paths})
    ds = TableDataset(manifest, image_column="image", name="bench")
    if cache_dir is not None:
        ds = DiskCache(ds, cache_dir)
    return lambda: torch.utils.data.DataLoader(
        ds, batch_size=batch, num_workers=workers, collate_fn=collate, persistent_workers=False
    ), ds


def monai_loader(paths: list[str], workers: int, batch: int):
    from monai.data import DataLoader, Dataset
    from monai.transforms import LoadImaged

    ds = Dataset(
        data=[{"image": p} for p in paths],
        transform=LoadImaged(keys="image", image_only=True, ensure_channel_first=True, dtype=np.float32),
    )
    return lambda: DataLoader(ds, batch_size=batch, num_workers=workers)


def _same_pixels(ours_ds, paths: list[str]) -> None:
    """Both sides must deliver the same values (MONAI's PIL reader transposes 2D: compare sums)."""
    from monai.transforms import LoadImage

    a = ours_ds[0]["image"]
    b = LoadImage(image_only=True, ensure_channel_first=True, dtype=np.float32)(paths[0])
    assert a.numel() == b.numel() and float(a.double().sum()) == float(torch.as_tensor(b).double().sum())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small run (seconds)")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-png", type=int, default=None)
    ap.add_argument("--n-nifti", type=int, default=None)
    ap.add_argument("--dir", type=Path, default=None, help="where to write the files (default: a temp dir)")
    args = ap.parse_args(argv)
    # MONAI warns at import about an optional GPU DICOM decoder; irrelevant here
    warnings.filterwarnings("ignore", message=".*nvImageCodec.*")
    warnings.filterwarnings("ignore", message=".*NvImgCodec.*")
    n_png = args.n_png or (32 if args.quick else 200)
    n_nii = args.n_nifti or (4 if args.quick else 20)
    png_size = 1024
    vol_shape = (128, 128, 64) if args.quick else (256, 256, 128)

    tmp = tempfile.TemporaryDirectory(prefix="medimg-bench-loading-") if args.dir is None else None
    root = Path(tmp.name) if tmp else args.dir
    try:
        t = time.perf_counter()
        pngs = write_pngs(root / "png", n_png, png_size)
        niis = write_niftis(root / "nifti", n_nii, vol_shape)
        png_mb = sum(os.path.getsize(p) for p in pngs) / n_png / 1e6
        nii_mb = sum(os.path.getsize(p) for p in niis) / n_nii / 1e6
        print(f"wrote {n_png} PNG {png_size}x{png_size} uint8 (~{png_mb:.2f} MB each) and "
              f"{n_nii} NIfTI {vol_shape} int16 .nii.gz (~{nii_mb:.1f} MB each) in "
              f"{time.perf_counter() - t:.1f} s")
        print(f"torch {torch.__version__}, python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs visible, best of {args.repeats} interleaved passes")
        _, ds = ours_loader(pngs, 0, 1)
        _same_pixels(ds, pngs)
        _, ds = ours_loader(niis, 0, 1)
        _same_pixels(ds, niis)

        header = (f"{'data':<22}{'workers':>8}{'ours img/s':>12}{'MONAI img/s':>13}"
                  f"{'ours/MONAI':>12}{'DiskCache img/s':>17}")
        print(header)
        print("-" * len(header))
        for kind, paths, batch in (("PNG 1024² uint8", pngs, 8), ("NIfTI " + "×".join(map(str, vol_shape)), niis, 2)):
            for w in args.workers:
                loaders = {"ours": ours_loader(paths, w, batch)[0], "monai": monai_loader(paths, w, batch)}
                if kind.startswith("PNG"):
                    make_c, cached = ours_loader(paths, w, batch, cache_dir=root / "cache")
                    cached.warm()
                    loaders["cache"] = make_c
                r = _best_interleaved(loaders, len(paths), args.repeats)
                cache = f"{r['cache']:>17.1f}" if "cache" in r else f"{'-':>17}"
                print(f"{kind:<22}{w:>8}{r['ours']:>12.1f}{r['monai']:>13.1f}"
                      f"{r['ours'] / r['monai']:>12.2f}{cache}", flush=True)
    finally:
        if tmp:
            tmp.cleanup()


if __name__ == "__main__":
    main()
