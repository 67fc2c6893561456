"""Model identity: the full SHA-256 of every file of a model folder, once, then from the cache.

    python benchmarks/model_hashing.py [--gb 10] [--dir DIR] [--keep]

Writes a model folder of ``gb`` GB (four ``.safetensors``-named shards plus configs) under
``DIR`` (default: a temporary folder), then times, side by side in one run, each from a cold
page cache (``posix_fadvise(DONTNEED)`` after an ``fsync``, no root needed):

* ``ours, first run``: :func:`medimg_bench.models.vlm.hf.files_signature` with an empty
  file-hash cache — every byte read and hashed (SHA-256, in threads);
* ``ours, second run``: the same call again — one ``stat`` and one SQLite look-up per file;
* ``sha256sum`` (GNU coreutils, the peer) over the same files;
* ``old sampled signature``: size plus the first and last MiB of each file (what the identity
  was before issue #19; it missed weights changed in the middle).

Prints seconds, GB/s and the ratios. Goal: the first run within 1.5x of ``sha256sum``; the
second run under 0.1 s.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_BLOCK = 64 << 20


def _write_model(folder: Path, gb: float) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"architectures": ["LlavaForConditionalGeneration"]}')
    (folder / "tokenizer.json").write_text('{"model": {"type": "BPE"}}' * 1000)
    block = bytearray(os.urandom(_BLOCK))
    per_shard = int(gb * 1e9 / 4)
    shards = []
    for s in range(4):
        path = folder / f"model-{s + 1:05d}-of-00004.safetensors"
        shards.append(path)
        if path.exists() and path.stat().st_size == per_shard:
            continue
        with open(path, "wb") as f:
            left, n = per_shard, 0
            while left > 0:
                block[:8] = (s * 1_000_003 + n).to_bytes(8, "little")  # no two blocks alike
                f.write(block[:min(left, _BLOCK)])
                left -= _BLOCK
                n += 1
            f.flush()
            os.fsync(f.fileno())
    return sorted(p for p in folder.iterdir() if p.is_file())


def _evict(files: list[Path]) -> None:
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _sampled(folder: Path) -> str:
    """The identity before issue #19: small files whole, large ones by size + first/last MiB."""
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        size = p.stat().st_size
        h.update(f"{p.name}\0{size}\0".encode())
        with open(p, "rb") as fh:
            if size <= 8 << 20:
                h.update(fh.read())
            else:
                h.update(fh.read(1 << 20))
                fh.seek(size - (1 << 20))
                h.update(fh.read(1 << 20))
    return h.hexdigest()


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=10.0)
    ap.add_argument("--dir", default=None, help="where to write the model folder (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the folder (and reuse it next time)")
    args = ap.parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="mb-model-hash-"))
    folder = base / "model"
    cache_dir = Path(tempfile.mkdtemp(prefix="mb-hash-cache-"))
    os.environ["MEDIMG_BENCH_CACHE"] = str(cache_dir)  # an empty file-hash cache
    from medimg_bench.models.vlm.hf import files_signature

    try:
        t_write, files = _timed(lambda: _write_model(folder, args.gb))
        total = sum(p.stat().st_size for p in files)
        past = 1_600_000_000  # a time long past: digests of just-written files are not cached
        for p in files:
            os.utime(p, (past, past))
        print(f"model folder {folder}: {len(files)} files, {total / 1e9:.2f} GB (written in {t_write:.1f} s)")
        print(f"{os.cpu_count()} CPUs; cold page cache before each timing (posix_fadvise DONTNEED)\n")
        rows = []
        _evict(files)
        t_first, sig = _timed(lambda: files_signature(folder))
        rows.append(("ours, first run (full SHA-256)", t_first))
        t_second, sig2 = _timed(lambda: files_signature(folder))
        assert sig2 == sig
        rows.append(("ours, second run (cached digests)", t_second))
        _evict(files)
        t_peer, _ = _timed(lambda: subprocess.run(["sha256sum", *map(str, files)], check=True,
                                                   capture_output=True))
        rows.append(("sha256sum (coreutils, one process)", t_peer))
        _evict(files)
        t_old, _ = _timed(lambda: _sampled(folder))
        rows.append(("old sampled signature (size + 2 MiB per file)", t_old))
        for name, t in rows:
            rate = f"{total / t / 1e9:6.2f} GB/s" if t > 0 else ""
            print(f"{name:<48} {t:9.3f} s  {rate}")
        print(f"\nfirst run / sha256sum          {t_first / t_peer:6.2f}x")
        print(f"second run / first run         {t_second / t_first:8.5f}x  ({t_first / max(t_second, 1e-9):,.0f}x faster)")
        print(f"second run / old sampled       {t_second / max(t_old, 1e-9):6.2f}x")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(base if not args.dir else folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
