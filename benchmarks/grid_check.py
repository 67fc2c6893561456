"""Cost of the image/mask grid rule, and of checking it from headers, on NIfTI pairs.

Writes ``--n`` image/mask pairs (``--shape``, int16 image, uint8 mask, .nii.gz) to a temporary
folder, half of the masks stored flipped along y (same voxels, re-oriented on load), then times:

* loading each pair through ``nifti_pairs`` (reads both files, applies the rule);
* the rule alone on the loaded arrays (``align_to_image_grid``: same grid, and flipped);
* ``datasets check`` from the headers only (``read_pixels=False``: the off-grid listing) vs the
  peer way of finding off-grid pairs without it: ``nibabel.load(...).get_fdata()`` of both files.

Prints ms per pair and ratios. Run::

    python benchmarks/grid_check.py            # 20 pairs of 192x192x96
    python benchmarks/grid_check.py --quick    # 6 pairs of 96x96x48
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np


def _write(root: Path, n: int, shape: tuple[int, int, int]) -> None:
    import nibabel as nib

    rng = np.random.default_rng(0)
    affine = np.diag([0.8, 0.8, 2.0, 1.0])
    flip = np.eye(4)
    flip[1, 1], flip[1, 3] = -1, shape[1] - 1
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    for i in range(n):
        img = (rng.normal(size=shape) * 200).astype(np.int16)
        mask = (img > 150).astype(np.uint8)
        nib.save(nib.Nifti1Image(img, affine), str(root / "images" / f"c{i:03d}.nii.gz"))
        if i % 2:
            nib.save(nib.Nifti1Image(np.ascontiguousarray(mask[:, ::-1]), affine @ flip),
                     str(root / "labels" / f"c{i:03d}.nii.gz"))
        else:
            nib.save(nib.Nifti1Image(mask, affine), str(root / "labels" / f"c{i:03d}.nii.gz"))


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--shape", type=int, nargs=3, default=(192, 192, 96))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n, shape = (6, (96, 96, 48)) if args.quick else (args.n, tuple(args.shape))

    import nibabel as nib

    from medimg_bench.datasets import create
    from medimg_bench.datasets.check import check_dataset
    from medimg_bench.datasets.grid import align_to_image_grid

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"{n} pairs of {shape}, half the masks stored flipped")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, n, shape)
        ds = create("nifti_pairs", root)
        ds[0], ds[1]  # warm: lazy imports, first-touch of the page cache
        load = _best(lambda: [ds[i] for i in range(len(ds))], repeat=2) / n

        pairs = []
        for i in range(n):
            im = nib.load(str(root / "images" / f"c{i:03d}.nii.gz"))
            mk = nib.load(str(root / "labels" / f"c{i:03d}.nii.gz"))
            pairs.append((np.asarray(mk.dataobj), mk.affine, im.affine, im.shape))

        def rule() -> None:
            for m, maff, iaff, ishape in pairs:
                align_to_image_grid(m, maff, iaff, image_shape=ishape, sample_id="s",
                                    image_path="i", mask_path="m")

        rule_t = _best(rule) / n

        def peer_pixels() -> None:
            for i in range(n):
                nib.load(str(root / "images" / f"c{i:03d}.nii.gz")).get_fdata()
                nib.load(str(root / "labels" / f"c{i:03d}.nii.gz")).get_fdata()

        headers = _best(lambda: check_dataset(ds, read_pixels=False)) / n
        pixels = _best(peer_pixels, repeat=2) / n
    print(f"load through nifti_pairs (read both files + rule): {1e3 * load:8.2f} ms/pair")
    print(f"grid rule alone (half re-oriented):                {1e3 * rule_t:8.2f} ms/pair "
          f"({100 * rule_t / load:.1f}% of loading)")
    print(f"datasets check from headers (off-grid listing):    {1e3 * headers:8.2f} ms/pair")
    print(f"peer: read both volumes with nibabel get_fdata:     {1e3 * pixels:8.2f} ms/pair "
          f"(headers are {pixels / headers:.0f}x faster)")


if __name__ == "__main__":
    main()
