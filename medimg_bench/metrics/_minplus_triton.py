"""A fused min-plus pass for the exact distance transform on CUDA (Triton).

``out[p, x, q] = min_y g[p, y, q] + table[y, x]`` over a whole axis, in one kernel: each
program keeps a ``BLOCK_R × BLOCK_X`` tile of minima in registers and streams the ``y`` values,
so nothing of size ``rows × n × n`` is ever written to memory (the torch fallback materialises
``g + table`` chunk by chunk, which is what made the GPU path memory-bound). Only additions and
minima: no multiply-add can be contracted, so every value is the float64 number the torch and
KD-tree paths compute. Triton is imported on first use; :func:`available` says whether it can
run for a tensor (a CUDA tensor with Triton installed, or any tensor under
``TRITON_INTERPRET=1``, which the tests use to run the kernel on the CPU).
"""

from __future__ import annotations

import functools
import os

import torch

__all__ = ["available", "min_plus_axis"]

BLOCK_R = 32
BLOCK_X = 32


@functools.lru_cache(maxsize=1)
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def minplus(g_ptr, t_ptr, out_ptr, rows_total, n, q_len,
                BLOCK_R: tl.constexpr, BLOCK_X: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        xs = tl.program_id(1) * BLOCK_X + tl.arange(0, BLOCK_X)
        rmask = rows < rows_total
        xmask = xs < n
        p = (rows // q_len).to(tl.int64)
        q = (rows % q_len).to(tl.int64)
        base = p * n * q_len + q
        acc = tl.full((BLOCK_R, BLOCK_X), float("inf"), tl.float64)
        for y in range(0, n):
            gy = tl.load(g_ptr + base + y * q_len, mask=rmask, other=float("inf"))
            ty = tl.load(t_ptr + y * n + xs, mask=xmask, other=float("inf"))
            acc = tl.minimum(acc, gy[:, None] + ty[None, :])
        offs = base[:, None] + xs[None, :].to(tl.int64) * q_len
        tl.store(out_ptr + offs, acc, mask=rmask[:, None] & xmask[None, :])

    return minplus


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@functools.lru_cache(maxsize=1)
def _importable() -> bool:
    try:
        import triton  # noqa: F401
    except Exception:  # pragma: no cover - depends on the environment
        return False
    return True


def available(t: torch.Tensor) -> bool:
    """Whether :func:`min_plus_axis` can run on ``t``'s device."""
    if os.environ.get("MEDIMG_BENCH_NO_TRITON"):
        return False
    return (t.is_cuda or _interpreting()) and _importable()


def min_plus_axis(g: torch.Tensor, axis: int, table: torch.Tensor, chunk_bytes: int) -> torch.Tensor:
    """``g`` (contiguous float64) with axis ``axis`` replaced by ``min_y g[.., y, ..] + table[y, x]``,
    in place, chunked over the leading axes so the temporary output stays within ``chunk_bytes``.
    ``table`` is the ``(n, n)`` float64 table of squared coordinate differences."""
    import triton

    g = g.contiguous()
    n = g.shape[axis]
    lead = 1
    for s in g.shape[:axis]:
        lead *= s
    q_len = 1
    for s in g.shape[axis + 1:]:
        q_len *= s
    flat = g.view(lead, n, q_len)
    table = table.contiguous()
    step = max(1, chunk_bytes // max(1, 8 * n * q_len))
    kernel = _kernel()
    out = torch.empty((min(step, lead), n, q_len), dtype=g.dtype, device=g.device)
    for a in range(0, lead, step):
        part = flat[a : a + step]
        dst = out[: part.shape[0]]
        rows_total = part.shape[0] * q_len
        grid = (triton.cdiv(rows_total, BLOCK_R), triton.cdiv(n, BLOCK_X))
        kernel[grid](part, table, dst, rows_total, n, q_len, BLOCK_R=BLOCK_R, BLOCK_X=BLOCK_X)
        part.copy_(dst)
    return g
