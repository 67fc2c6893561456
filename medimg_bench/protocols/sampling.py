"""Patient-level sampling for the protocols: validation carve-out, few-shot sets and label
fractions. The unit drawn is always the patient, so a patient's images are never split between
the drawn set and the rest; the same seed gives the same set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["split_patients", "few_shot_indices", "fraction_indices", "positives"]


def positives(labels: np.ndarray, n_classes: int) -> np.ndarray:
    """``(N, K)`` boolean: sample i belongs to class k (one-hot of class indices, or multi-hot
    labels ≥ 0.5; NaN counts as not belonging)."""
    y = np.asarray(labels)
    if y.ndim == 1:
        out = np.zeros((len(y), n_classes), dtype=bool)
        ok = ~np.isnan(y.astype(float))
        out[np.nonzero(ok)[0], y[ok].astype(int)] = True
        return out
    return np.nan_to_num(y.astype(float), nan=0.0) >= 0.5


def _patients(patients: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    uniq, inverse = np.unique(np.asarray(patients, dtype=str), return_inverse=True)
    return uniq, inverse


def split_patients(patients: Sequence[str], *, fraction: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(rest, held_out)``: ``fraction`` of the patients (at least one, never all) held
    out, drawn with ``seed``."""
    uniq, inv = _patients(patients)
    if len(uniq) < 2:
        raise ValueError(f"cannot hold out a validation set: only {len(uniq)} patient(s)")
    rng = np.random.default_rng(seed)
    n_held = min(max(1, round(fraction * len(uniq))), len(uniq) - 1)
    held = np.zeros(len(uniq), dtype=bool)
    held[rng.permutation(len(uniq))[:n_held]] = True
    mask = held[inv]
    return np.nonzero(~mask)[0], np.nonzero(mask)[0]


def few_shot_indices(
    labels: np.ndarray, patients: Sequence[str], *, k: int, classes: Sequence[str], seed: int
) -> np.ndarray:
    """``k`` samples per class, each from a different patient and no patient used twice (across
    classes either), drawn with ``seed``; sorted indices. A class with fewer than ``k`` eligible
    patients → ``ValueError`` naming the class and the count."""
    if k < 1:
        raise ValueError(f"few-shot k must be >= 1, got {k}")
    pos = positives(labels, len(classes))
    uniq, inv = _patients(patients)
    rng = np.random.default_rng(seed)
    used = np.zeros(len(uniq), dtype=bool)
    chosen: list[int] = []
    for c, name in enumerate(classes):
        idx = np.nonzero(pos[:, c] & ~used[inv])[0]
        pats = np.unique(inv[idx])
        if len(pats) < k:
            n_samples = int(pos[:, c].sum())
            raise ValueError(
                f"few-shot: class {name!r} has {n_samples} sample(s) from {len(pats)} patient(s) not "
                f"already drawn for another class; k={k} needs {k}"
            )
        for p in rng.choice(pats, size=k, replace=False):
            cand = idx[inv[idx] == p]
            chosen.append(int(rng.choice(cand)))
            used[p] = True
    return np.sort(np.asarray(chosen, dtype=np.int64))


def fraction_indices(
    labels: np.ndarray, patients: Sequence[str], *, fraction: float, classes: Sequence[str], seed: int
) -> np.ndarray:
    """Every sample of ``fraction`` of the patients (at least one), drawn with ``seed``; sorted
    indices. ``fraction=1`` is everything. A class left with no sample → ``ValueError`` naming it."""
    if not 0 < fraction <= 1:
        raise ValueError(f"label fraction must be in (0, 1], got {fraction}")
    uniq, inv = _patients(patients)
    if fraction >= 1:
        return np.arange(len(inv))
    rng = np.random.default_rng(seed)
    n = max(1, round(fraction * len(uniq)))
    keep = np.zeros(len(uniq), dtype=bool)
    keep[rng.permutation(len(uniq))[:n]] = True
    idx = np.nonzero(keep[inv])[0]
    counts = positives(np.asarray(labels)[idx], len(classes)).sum(0)
    empty = [str(classes[c]) for c in range(len(classes)) if counts[c] == 0]
    if empty:
        raise ValueError(
            f"label fraction {fraction} (seed {seed}: {n} of {len(uniq)} patients, {len(idx)} samples) leaves "
            f"class(es) {empty} with no sample; use a larger fraction"
        )
    return idx
