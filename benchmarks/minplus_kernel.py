"""The fused min-plus kernel of the GPU distance transform, by block configuration.

    PYTHONPATH=. python benchmarks/minplus_kernel.py [--shape 40 300 200 100]

Times :func:`medimg_bench.metrics._minplus_triton.min_plus_axis` along each axis after the
first, over whole axes and with the batched path's window, for several (BLOCK_R, BLOCK_X,
num_warps) settings, and prints milliseconds and pair evaluations per second. CUDA only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from medimg_bench.metrics import _minplus_triton as K  # noqa: E402

CONFIGS = [(32, 32, 4), (64, 64, 4), (64, 64, 8), (128, 32, 4), (32, 128, 4), (16, 64, 2), (128, 64, 8)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[40, 300, 200, 100])
    ap.add_argument("--window", type=int, default=16)
    args = ap.parse_args()
    g0 = torch.rand(*args.shape, dtype=torch.float64, device="cuda") * 100
    g0[g0 < 30] = float("inf")
    for axis in range(2, g0.ndim):
        n = g0.shape[axis]
        c = torch.arange(n, dtype=torch.float64, device="cuda") * 0.75
        table = (c[:, None] - c[None, :]) ** 2
        for window in (None, args.window):
            evals = g0.numel() * (n if window is None else min(n, 32 + 2 * window))
            for br, bx, nw in CONFIGS:
                K.BLOCK_R, K.BLOCK_X, K.NUM_WARPS = br, bx, nw
                g = g0.clone()
                K.min_plus_axis(g, axis, table, 256 << 20, window=window)  # compile
                torch.cuda.synchronize()
                best = float("inf")
                for _ in range(3):
                    g = g0.clone()
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    K.min_plus_axis(g, axis, table, 256 << 20, window=window)
                    torch.cuda.synchronize()
                    best = min(best, time.perf_counter() - t0)
                print(f"axis {axis} (n={n}) window {window}: BLOCK_R {br:3d} BLOCK_X {bx:3d} warps {nw}: "
                      f"{best * 1e3:8.2f} ms  {evals / best / 1e9:7.1f} G evals/s")


if __name__ == "__main__":
    main()
