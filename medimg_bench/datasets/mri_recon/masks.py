"""fastMRI's k-space undersampling masks (``fastmri/data/subsample.py``), rewritten.

Same random stream as fastMRI's ``MaskFunc.__call__(shape, seed=seed)`` with a fresh mask
function: ``RandomState(seed)``, one draw choosing the (centre fraction, acceleration) pair, then
the mask's own draws. So a seed gives fastMRI's mask bit for bit (tested against its code on
generated shapes, ``tools/fastmri_fixtures.py``). fastMRI seeds validation / test masks with
``tuple(map(ord, file_name))``: :func:`file_seed`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MASK_KINDS", "file_seed", "undersampling_mask"]

MASK_KINDS = ("random", "equispaced", "equispaced_fraction")


def file_seed(file_name: str) -> tuple[int, ...]:
    """fastMRI's per-file mask seed: the code points of the file name."""
    return tuple(map(ord, file_name))


def _center(num_cols: int, num_low: int) -> np.ndarray:
    mask = np.zeros(num_cols, dtype=bool)
    pad = (num_cols - num_low + 1) // 2
    mask[pad: pad + num_low] = True
    return mask


def undersampling_mask(
    kind: str,
    num_cols: int,
    *,
    center_fractions: Sequence[float],
    accelerations: Sequence[float],
    seed: int | Sequence[int] | None = None,
    offset: int | None = None,
) -> tuple[np.ndarray, int]:
    """A 1D column mask ``(num_cols,)`` bool and its number of low-frequency (centre) columns.

    ``kind``: ``random`` (fastMRI ``RandomMaskFunc``), ``equispaced`` (``EquiSpacedMaskFunc``),
    ``equispaced_fraction`` (``EquispacedMaskFractionFunc``, the public multicoil masks).
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"unknown mask kind {kind!r}; choose from {MASK_KINDS}")
    if len(center_fractions) != len(accelerations) or not len(accelerations):
        raise ValueError("center_fractions and accelerations need the same, non-zero length")
    if num_cols < 2:
        raise ValueError(f"num_cols must be >= 2, got {num_cols}")
    rng = np.random.RandomState(seed)
    choice = rng.randint(len(center_fractions))
    cf, acc = center_fractions[choice], accelerations[choice]
    if not (0 < cf < 1) or acc < 1:
        raise ValueError(f"need 0 < center_fraction < 1 and acceleration >= 1, got {cf}, {acc}")
    num_low = round(num_cols * cf)
    accel = np.zeros(num_cols, dtype=bool)
    if kind == "random":
        prob = (num_cols / acc - num_low) / (num_cols - num_low)
        accel = rng.uniform(size=num_cols) < prob
    elif kind == "equispaced":
        if offset is None:
            offset = rng.randint(0, high=round(acc))
        accel[offset::int(acc)] = True
    else:
        adjusted = (acc * (num_low - num_cols)) / (num_low * acc - num_cols)
        if offset is None:
            offset = rng.randint(0, high=round(adjusted))
        accel[np.around(np.arange(offset, num_cols - 1, adjusted)).astype(np.uint64)] = True
    return _center(num_cols, num_low) | accel, num_low
