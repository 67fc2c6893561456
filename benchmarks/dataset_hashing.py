"""Dataset fingerprint: the content of every file, hashed once, then a stat per file.

    python benchmarks/dataset_hashing.py [--n 10000] [--size 256] [--dir DIR] [--keep]

Writes ``n`` ``size`` x ``size`` 8-bit PNGs and a ``labels.csv`` (the ``csv`` dataset's layout)
and times, side by side in one run, from a cold page cache (``posix_fadvise(DONTNEED)``):

* ``fingerprint, first run``: ``dataset.fingerprint()`` of a ``csv`` dataset with an empty
  file-hash cache — manifest, every file's SHA-256 and the options;
* ``fingerprint, second run``: the same on a new dataset object — a ``stat`` per file and one
  SQLite look-up per 500 files (building the dataset is timed apart);
* ``manifest only``: the fingerprint before issue #19 (a hash of the manifest table);
* ``reading every image``: what an evaluation reads anyway (the toolkit's PNG reader), the
  peer this cost is measured against.

Prints seconds, files per second and the ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _write(root: Path, n: int, size: int) -> list[Path]:
    from PIL import Image

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (size, size), dtype=np.uint8)
    lines = ["path,label"]
    files = []
    for i in range(n):
        path = root / f"img{i:05d}.png"
        if not path.exists():
            img = np.roll(base, i, axis=1) ^ np.uint8(i % 251)  # no two alike
            Image.fromarray(img).save(path)
        files.append(path)
        lines.append(f"{path.name},{'abc'[i % 3]}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    past = 1_600_000_000  # written long ago: digests are cached (not "racily clean")
    for p in files:
        os.utime(p, (past, past))
    return files


def _evict(files: list[Path]) -> None:
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _manifest_only(ds) -> str:
    import pandas as pd

    h = hashlib.sha256()
    h.update(type(ds).__name__.encode())
    h.update(pd.util.hash_pandas_object(ds.manifest.astype(str), index=False).values.tobytes())
    h.update(json.dumps(ds.classes).encode())
    return h.hexdigest()[:16]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mb-ds-hash-"))
    root = base / "pngs"
    cache_dir = Path(tempfile.mkdtemp(prefix="mb-hash-cache-"))
    os.environ["MEDIMG_BENCH_CACHE"] = str(cache_dir)
    from medimg_bench.datasets.io import read_image
    from medimg_bench.registry import create_dataset

    try:
        t_write, files = _timed(lambda: _write(root, args.n, args.size))
        total = sum(p.stat().st_size for p in files)
        print(f"{len(files)} PNGs of {args.size}x{args.size}, {total / 1e6:.0f} MB (written in {t_write:.1f} s); "
              f"{os.cpu_count()} CPUs; cold page cache before the first run and the read\n")
        rows = []
        t_build, ds = _timed(lambda: create_dataset("csv", root=root, split="test"))
        rows.append(("building the dataset (csv loader, not timed below)", t_build))
        _evict(files)
        t_first, fp = _timed(ds.fingerprint)
        rows.append(("fingerprint, first run (every byte hashed)", t_first))
        again = create_dataset("csv", root=root, split="test")
        t_second, fp2 = _timed(again.fingerprint)
        assert fp == fp2
        rows.append(("fingerprint, second run (a stat per file)", t_second))
        t_old, _ = _timed(lambda: _manifest_only(ds))
        rows.append(("manifest only (before issue #19)", t_old))
        _evict(files)
        t_read, _ = _timed(lambda: [read_image(p) for p in files])
        rows.append(("reading every image (read_image)", t_read))
        for name, t in rows:
            print(f"{name:<46} {t:9.3f} s  {len(files) / t:12,.0f} files/s")
        print(f"\nfirst run / reading every image   {t_first / t_read:6.2f}x")
        print(f"second run / reading every image  {t_second / t_read:6.3f}x")
        print(f"second run / manifest only        {t_second / max(t_old, 1e-9):6.1f}x")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(base if not args.dir else root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
