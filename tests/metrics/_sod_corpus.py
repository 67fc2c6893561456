"""The generated corpus of maps and masks that the SOD-toolbox fixtures were computed on.

``tools/sod_toolbox_octave.py`` writes these arrays as PNGs and runs the authors' MATLAB toolbox
under GNU Octave on them; ``tests/metrics/test_sod_toolbox.py`` regenerates them here and checks
each one's SHA-256 against the fixture before comparing numbers (so a change of generator or of
numpy's random streams is reported as such, not as a metric mismatch).

Each item is ``(id, map, mask)``: maps are ``uint8`` (8-bit PNG), ``uint16`` (16-bit PNG) or
``bool`` (1-bit PNG); masks are ``bool`` (1-bit PNG) or ``uint8`` (8-bit PNG, binarised by the
toolbox's ``> 128``).
"""

from __future__ import annotations

import hashlib

import numpy as np

SEED = 20260326
N_ITEMS = 1040
KINDS = ("smooth8", "range8", "noise8", "binary", "constant", "empty_gt", "full_gt", "grey_gt",
         "map16", "edge_gt", "perfect", "inverted", "levels")


def _blobs(rng: np.random.Generator, h: int, w: int, k: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.zeros((h, w))
    for _ in range(k):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        sy, sx = rng.uniform(0.5, max(h, 2) / 2), rng.uniform(0.5, max(w, 2) / 2)
        out += rng.uniform(0.3, 1.0) * np.exp(-((yy - cy) ** 2 / (2 * sy * sy) + (xx - cx) ** 2 / (2 * sx * sx)))
    return out / max(out.max(), 1e-12)


def _size(rng: np.random.Generator, i: int) -> tuple[int, int]:
    if i % 50 == 7:
        return 352, 352
    if i % 97 == 3:
        return 1, int(rng.integers(2, 40))
    h, w = int(rng.integers(2, 97)), int(rng.integers(2, 97))
    return h, w


def _gt(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    return _blobs(rng, h, w, int(rng.integers(1, 4))) > rng.uniform(0.3, 0.8)


def _to8(v: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(v * 255), 0, 255).astype(np.uint8)


def _item(rng: np.random.Generator, i: int) -> tuple[np.ndarray, np.ndarray]:
    kind = KINDS[i % len(KINDS)]
    h, w = _size(rng, i)
    gt = _gt(rng, h, w)
    soft = 0.6 * _blobs(rng, h, w, 3) + 0.4 * np.where(gt, rng.uniform(0.3, 1, (h, w)), rng.uniform(0, 0.6, (h, w)))
    pred: np.ndarray = _to8(soft / max(soft.max(), 1e-12))
    if kind == "range8":
        lo, hi = int(rng.integers(1, 100)), int(rng.integers(150, 255))
        pred = (lo + (pred.astype(np.float64) / 255) * (hi - lo)).astype(np.uint8)
    elif kind == "noise8":
        pred = rng.integers(0, 256, (h, w)).astype(np.uint8)
    elif kind == "binary":
        pred = _gt(rng, h, w) if rng.random() < 0.7 else (gt ^ (rng.random((h, w)) < 0.1))
    elif kind == "constant":
        pred = np.full((h, w), [0, 1, 128, 200, 255, 0][i % 6], dtype=np.uint8)
        if i % 4 == 0:
            pred = pred.astype(bool)
    elif kind == "empty_gt":
        gt = np.zeros((h, w), dtype=bool)
    elif kind == "full_gt":
        gt = np.ones((h, w), dtype=bool)
    elif kind == "grey_gt":  # an 8-bit mask with values around the toolbox's > 128 cut
        return pred, _to8(np.clip(gt * 0.7 + rng.uniform(-0.3, 0.3, (h, w)), 0, 1))
    elif kind == "map16":
        pred = np.clip(np.rint(soft / max(soft.max(), 1e-12) * 65535), 0, 65535).astype(np.uint16)
    elif kind == "edge_gt":  # foreground on the last column / row / one pixel: S-measure corner cases
        gt = np.zeros((h, w), dtype=bool)
        if i % 3 == 0:
            gt[:, -1] = True
        elif i % 3 == 1:
            gt[-1, :] = True
        else:
            gt[int(rng.integers(0, h)), int(rng.integers(0, w))] = True
    elif kind == "perfect":
        pred = np.where(gt, 255, 0).astype(np.uint8)
    elif kind == "inverted":
        pred = np.where(gt, 0, 255).astype(np.uint8) if i % 2 else 255 - pred
    elif kind == "levels":
        pred = ((pred // 64) * 64 + (pred // 64 == 3) * 63).astype(np.uint8)
    if i % 5 == 1 and gt.dtype == bool:  # some masks as 8-bit 0/255
        return pred, np.where(gt, 255, 0).astype(np.uint8)
    return pred, gt


def corpus() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The :data:`N_ITEMS` generated ``(id, map, mask)`` items, in order."""
    rng = np.random.default_rng(SEED)
    out = []
    for i in range(N_ITEMS):
        pred, gt = _item(rng, i)
        out.append((f"c{i:04d}_{KINDS[i % len(KINDS)]}", pred, gt))
    return out


def digest(pred: np.ndarray, gt: np.ndarray) -> str:
    """SHA-256 of a map and mask (dtype, shape and bytes)."""
    h = hashlib.sha256()
    for a in (pred, gt):
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def toolbox_gt(mask: np.ndarray) -> np.ndarray:
    """The mask as the toolbox binarises it: bool as is, 8-bit ``> 128``."""
    return mask if mask.dtype == bool else mask > 128
