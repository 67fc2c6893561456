"""Generated per-frame phase label sequences (ground truth, prediction) shaped like surgical
videos: ordered phases with skips, back-and-forth transitions and short phases; predictions with
shifted boundaries, flicker, phases never predicted or predicted but absent. Used by the fixture
tools (tools/phase_*.py) and the tests, so both see the same sequences."""

from __future__ import annotations

import numpy as np

__all__ = ["cholec80_corpus", "pitvis_corpus", "unpack"]


def _gt(rng: np.random.Generator, num_classes: int, first: int, length: int) -> np.ndarray:
    order = [k for k in range(first, num_classes) if rng.random() > 0.15] or [first]
    if rng.random() < 0.4 and len(order) > 2:  # a jump back, as GallbladderDissection <-> Packaging
        i = int(rng.integers(1, len(order)))
        order.insert(i + 1, order[i - 1])
    weights = rng.gamma(1.2, size=len(order))
    if rng.random() < 0.3:
        weights[int(rng.integers(len(order)))] = 0.01  # a very short phase
    sizes = np.maximum(1, np.round(weights / weights.sum() * length)).astype(int)
    return np.repeat(np.asarray(order), sizes)


def _pred(rng: np.random.Generator, gt: np.ndarray, num_classes: int, first: int) -> np.ndarray:
    mode = rng.random()
    if mode < 0.05:
        return rng.integers(first, num_classes, gt.size)
    if mode < 0.1:
        return gt.copy()
    starts = np.flatnonzero(np.r_[True, gt[1:] != gt[:-1]])
    labels = gt[starts]
    shift = rng.integers(-15, 16, starts.size)
    shift[0] = 0
    edges = np.clip(starts + shift, 0, gt.size)
    pred = gt.copy()
    for k in range(1, starts.size):  # moved boundary: the earlier or later phase spills over
        lo, hi = sorted((starts[k], edges[k]))
        pred[lo:hi] = labels[k - 1] if edges[k] > starts[k] else labels[k]
    flicker = rng.random(gt.size) < rng.choice([0.0, 0.02, 0.1])
    step = rng.choice([-2, -1, 1, 2], gt.size)
    pred[flicker] = np.clip(pred[flicker] + step[flicker], first, num_classes - 1)
    if rng.random() < 0.15:  # a phase never predicted
        k = int(rng.choice(np.unique(gt)))
        pred[pred == k] = min(k + 1, num_classes - 1) if k + 1 < num_classes else max(k - 1, first)
    if rng.random() < 0.15:  # a short run of a phase absent from the ground truth
        absent = np.setdiff1d(np.arange(first, num_classes), gt)
        if absent.size:
            at = int(rng.integers(gt.size))
            pred[at : at + int(rng.integers(1, 20))] = int(rng.choice(absent))
    return pred


def _corpus(n: int, seed: int, num_classes: int, first: int, lengths: tuple[int, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        length = int(rng.integers(*lengths))
        gt = _gt(rng, num_classes, first, length)
        out.append((gt.astype(np.int64), _pred(rng, gt, num_classes, first).astype(np.int64)))
    return out


def cholec80_corpus(n: int, *, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` (gt, pred) pairs over Cholec80's 7 phases (0-based), 20-700 frames."""
    return _corpus(n, seed, 7, 0, (20, 700))


def pitvis_corpus(n: int, *, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` (gt, pred) pairs over PitVis labels 0 (background) .. 14, 10-500 frames."""
    return _corpus(n, seed, 15, 0, (10, 500))


def unpack(gt: np.ndarray, pred: np.ndarray, lengths: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (gt, pred) pairs of a fixture's concatenated arrays."""
    cuts = np.cumsum(lengths)[:-1]
    return list(zip((g.astype(np.int64) for g in np.split(gt, cuts)), (p.astype(np.int64) for p in np.split(pred, cuts))))
