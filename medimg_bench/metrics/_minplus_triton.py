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

__all__ = ["available", "first_axis_pass", "min_plus_axis", "plane_min"]

# measured on an H100 (benchmarks/minplus_kernel.py): 128 x 32 x 4 warps runs ~2e12 pair
# evaluations/s, 4x the 32 x 32 tile; wider x tiles are slower
BLOCK_R = 128
BLOCK_X = 32
NUM_WARPS = 4
BLOCK_Q = 32
BLOCK_Y = 32
BLOCK_C = 256


@functools.lru_cache(maxsize=1)
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def minplus(g_ptr, t_ptr, out_ptr, rows_total, n, q_len, window,
                BLOCK_R: tl.constexpr, BLOCK_X: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        xs = tl.program_id(1) * BLOCK_X + tl.arange(0, BLOCK_X)
        rmask = rows < rows_total
        xmask = xs < n
        p = (rows // q_len).to(tl.int64)
        q = (rows % q_len).to(tl.int64)
        base = p * n * q_len + q
        acc = tl.full((BLOCK_R, BLOCK_X), float("inf"), tl.float64)
        x0 = tl.program_id(1) * BLOCK_X
        for y in range(tl.maximum(x0 - window, 0), tl.minimum(x0 + BLOCK_X + window, n)):
            gy = tl.load(g_ptr + base + y * q_len, mask=rmask, other=float("inf"))
            ty = tl.load(t_ptr + y * n + xs, mask=xmask, other=float("inf"))
            acc = tl.minimum(acc, gy[:, None] + ty[None, :])
        offs = base[:, None] + xs[None, :].to(tl.int64) * q_len
        tl.store(out_ptr + offs, acc, mask=rmask[:, None] & xmask[None, :])

    return minplus


@functools.lru_cache(maxsize=1)
def _plane_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def plane(g_ptr, base_ptr, i1_ptr, i2_ptr, t1_ptr, t2_ptr, out_ptr, nq, n1, n2,
              BLOCK_Q: tl.constexpr, BLOCK_Y: tl.constexpr):
        qs = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
        qm = qs < nq
        base = tl.load(base_ptr + qs, mask=qm, other=0)
        i1 = tl.load(i1_ptr + qs, mask=qm, other=0).to(tl.int64)
        i2 = tl.load(i2_ptr + qs, mask=qm, other=0).to(tl.int64)
        acc = tl.full((BLOCK_Q, BLOCK_Y), float("inf"), tl.float64)
        for y1 in range(0, n1):
            t1 = tl.load(t1_ptr + i1 * n1 + y1, mask=qm, other=float("inf"))
            for y0 in range(0, n2, BLOCK_Y):
                ys = y0 + tl.arange(0, BLOCK_Y)
                m = qm[:, None] & (ys < n2)[None, :]
                gv = tl.load(g_ptr + base[:, None] + y1 * n2 + ys[None, :], mask=m, other=float("inf"))
                t2 = tl.load(t2_ptr + i2[:, None] * n2 + ys[None, :], mask=m, other=float("inf"))
                acc = tl.minimum(acc, (gv + t1[:, None]) + t2)
        tl.store(out_ptr + qs, tl.min(acc, axis=1), mask=qm)

    return plane


@functools.lru_cache(maxsize=1)
def _first_pass_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def first(seeds_ptr, c_ptr, out_ptr, n_cols, n0, BLOCK_C: tl.constexpr):
        # seeds and out are (n0, n_cols): element (i, col) at i * n_cols + col
        cols = (tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
        cm = cols < n_cols
        inf = float("inf")
        last = tl.full((BLOCK_C,), -1, tl.int32)
        for i in range(0, n0):
            off = cols + i * n_cols
            s = tl.load(seeds_ptr + off, mask=cm, other=0)
            last = tl.where(s != 0, i, last)
            dl = tl.load(c_ptr + i) - tl.load(c_ptr + tl.maximum(last, 0))
            tl.store(out_ptr + off, tl.where(last >= 0, dl * dl, inf), mask=cm)
        nxt = tl.full((BLOCK_C,), -1, tl.int32)
        for j in range(0, n0):
            i = n0 - 1 - j
            off = cols + i * n_cols
            s = tl.load(seeds_ptr + off, mask=cm, other=0)
            nxt = tl.where(s != 0, i, nxt)
            dr = tl.load(c_ptr + tl.maximum(nxt, 0)) - tl.load(c_ptr + i)
            cur = tl.load(out_ptr + off, mask=cm, other=inf)
            tl.store(out_ptr + off, tl.minimum(cur, tl.where(nxt >= 0, dr * dr, inf)), mask=cm)

    return first


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


def min_plus_axis(g: torch.Tensor, axis: int, table: torch.Tensor, chunk_bytes: int,
                  window: int | None = None) -> torch.Tensor:
    """``g`` (contiguous float64) with axis ``axis`` replaced by ``min_y g[.., y, ..] + table[y, x]``,
    in place, chunked over the leading axes so the temporary output stays within ``chunk_bytes``.
    ``table`` is the ``(n, n)`` float64 table of squared coordinate differences. With ``window``,
    ``y`` runs over at least ``|y − x| ≤ window`` (a block of ``x`` shares one range, so some
    ``x`` see a little more): the result is then an upper bound that is exact wherever it is
    below the squared distance of every seed beyond the window."""
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
        grid = (triton.cdiv(rows_total, BLOCK_R), triton.cdiv(n, BLOCK_X))  # read at call time
        kernel[grid](part, table, dst, rows_total, n, q_len, n if window is None else int(window),
                     BLOCK_R=BLOCK_R, BLOCK_X=BLOCK_X, num_warps=NUM_WARPS)
        part.copy_(dst)
    return g


def first_axis_pass(seeds: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
    """Squared distance (float64) along axis 1 of a ``(B, n0, ...)`` boolean stack to the
    nearest seed of the same column (``inf`` without one): one program per block of columns
    sweeps the axis forwards and backwards — the values of the torch scans, in one kernel."""
    import triton

    b, n0 = seeds.shape[0], seeds.shape[1]
    rest = seeds[0, 0].numel()
    # (n0, B·rest) layout: consecutive columns are consecutive in memory at every step
    s = seeds.reshape(b, n0, rest).transpose(0, 1).contiguous().view(torch.uint8)
    out = torch.empty((n0, b * rest), dtype=torch.float64, device=seeds.device)
    n_cols = b * rest
    _first_pass_kernel()[(triton.cdiv(n_cols, BLOCK_C),)](s, c0.contiguous(), out, n_cols, n0, BLOCK_C=BLOCK_C)
    return out.view(n0, b, *seeds.shape[2:]).transpose(0, 1).contiguous()


def plane_min(g1: torch.Tensor, planes: torch.Tensor, i1: torch.Tensor, i2: torch.Tensor,
              t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
    """For each query ``q``: ``min_{y1, y2} (g1[planes[q], y1, y2] + t1[i1[q], y1]) + t2[i2[q], y2]``
    (float64), the exact squared distance of a 3D query from the first pass over its whole plane.
    ``g1`` is a contiguous ``(P, n1, n2)`` view; ``planes`` the plane index of each query."""
    import triton

    nq = planes.numel()
    out = torch.empty(nq, dtype=torch.float64, device=g1.device)
    if nq == 0:
        return out
    n1, n2 = g1.shape[1], g1.shape[2]
    base = planes.to(torch.int64) * (n1 * n2)
    _plane_kernel()[(triton.cdiv(nq, BLOCK_Q),)](g1, base.contiguous(), i1.contiguous(), i2.contiguous(),
                                                 t1.contiguous(), t2.contiguous(), out, nq, n1, n2,
                                                 BLOCK_Q=BLOCK_Q, BLOCK_Y=BLOCK_Y)
    return out
