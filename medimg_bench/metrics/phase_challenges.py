"""Surgical phase recognition as two challenges evaluate it, fed one frame at a time.

**Cholec80** (``cholec80_matlab_*``, metric ``cholec80_phase``): the MATLAB evaluation the
Cholec80 literature runs (M2CAI16's ``Evaluate.m`` "revised for cholec80", as shipped by TMRNet,
github.com/YuemingJin/TMRNet commit 6a0db47, ``code/eval/result/matlab-eval/Evaluate.m`` and
``Main.m``; TeCNO and Trans-SVNet ship the same files). Its rules, reproduced exactly:

* per video, ``diff = pred - gt``; for each ground-truth segment of phase ``k`` (1-based) and
  ``t = min(10 * fps, segment length)`` frames: in the segment's first ``t`` frames a ``diff``
  of -1 (phases 6, 7: also -2) is set to 0 ("late transition"); then, the script's indexing
  quirk, the frames of the segment's *last* ``t`` frames whose ``diff`` is +1 (phases 4-7: +1 or
  +2) give a mask that is applied to the segment's *first* ``t`` frames ("early transition":
  ``curDiff(curDiff(end-t+1:end)==1) = 0``). A prediction one phase ahead at the end of a segment
  is therefore *not* forgiven, unless the same offsets happen to sit at its start;
* a frame is correct where the relaxed ``diff`` is 0; accuracy = correct / frames;
* per phase present in the ground truth: ``tp`` = correct frames in the union of the frames
  predicted ``k`` and the frames labelled ``k`` (so a relaxed frame of another phase counts for
  both phases); Jaccard = ``tp / |union|``, precision = ``tp / #predicted k`` (``tp / 0`` is inf
  when ``tp > 0``, NaN when 0), recall = ``tp / #labelled k``; NaN for a phase absent from the
  video's ground truth;
* ``Main.m``: values above 100 % set to 100 % (precision and recall can exceed it, see above);
  per phase the mean over videos ignoring NaN; then Jaccard and recall = ``mean`` over the seven
  phases (NaN if a phase occurs in no video), precision = ``nanmean``; accuracy = mean over
  videos; the ± are standard deviations over phases (accuracy: over videos).

``relaxed=False`` is the same code with ``t = 0`` (``Evaluate.m`` with ``fps = 0``): plain
per-phase Jaccard/precision/recall (precision 0/0 = NaN, left out of its mean). Values here are
fractions (the script prints percentages). ``fps`` is the rate of the *evaluated* frames (TMRNet's
``Main.m`` sets 1 for 1-fps labels; the M2CAI original 25): ``10 * fps`` must be a whole number.

**PitVis-2023** (``pitvis_*``, metric ``pitvis_phase``): the organisers' ``evaluation_steps.py``
(github.com/dreets/pitvis commit b1cb307, ``helper_scripts/``), per video: frames whose ground
truth is background (step -1, label 0 here), 11 or 13 are removed; macro F1 over the labels that
occur in the remaining ground truth *or* predictions (scikit-learn ``f1_score(average="macro",
zero_division=1)``; a predicted background frame counts as a class with F1 0); edit score
``1 - Levenshtein(segments) / max(#segments)`` on the same cleaned lists; the challenge score is
``(F1 + edit) / 2``. The script scores one video; the mean over videos is this package's (the
repository does not hold the aggregation). A video with only removed frames (the script divides
by zero) is NaN here, with a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medimg_bench.metrics.video import frame_labels, levenshtein, segments

__all__ = [
    "CHOLEC80_NUM_PHASES",
    "PITVIS_EXCLUDED",
    "Cholec80Eval",
    "cholec80_matlab_video",
    "cholec80_matlab_eval",
    "pitvis_video",
    "pitvis_eval",
]

CHOLEC80_NUM_PHASES = 7
#: PitVis labels removed from scoring (the ``pitvis`` loader's labels: 0 = step -1, background)
PITVIS_EXCLUDED = (0, 11, 13)
# Evaluate.m's phase-specific tolerances, 0-based phases: (late-transition diffs, early ones)
_TOLERATED = {3: ((-1,), (1, 2)), 4: ((-1,), (1, 2)), 5: ((-1, -2), (1, 2)), 6: ((-1, -2), (1, 2))}
_GENERAL = ((-1,), (1,))


def _pair(pred: Any, target: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    p, t = frame_labels(pred, name=f"{name}: pred"), frame_labels(target, name=f"{name}: target")
    if p.shape != t.shape:
        raise ValueError(f"{name}: pred and target lengths differ: {p.size} vs {t.size} frames")
    if t.size == 0:
        raise ValueError(f"{name}: no frames")
    return p, t


def matlab_window(fps: float, relaxed: bool) -> int:
    if not relaxed:
        return 0
    if not (fps > 0 and math.isfinite(fps)):
        raise ValueError(f"cholec80: fps of the evaluated frames must be > 0, got {fps}")
    t = 10.0 * fps
    if abs(t - round(t)) > 1e-9:
        raise ValueError(f"cholec80: the 10 s window is {t} frames at fps={fps}; Evaluate.m needs a whole number")
    return int(round(t))


def _relaxed_correct(p: np.ndarray, t: np.ndarray, window: int) -> np.ndarray:
    """Frames whose relaxed ``diff`` is 0 (Evaluate.m's ``updatedDiff == 0``)."""
    diff = p - t
    if window == 0:
        return diff == 0
    out = diff.copy()
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    ends = np.r_[starts[1:], t.size]
    for s, e in zip(starts.tolist(), ends.tolist()):
        late, early = _TOLERATED.get(int(t[s]), _GENERAL)
        seg = diff[s:e].copy()
        n = min(window, e - s)
        head = seg[:n]
        head[np.isin(head, late)] = 0
        head[np.isin(seg[e - s - n :], early)] = 0  # the tail's mask lands on the head (the script's indexing)
        out[s:e] = seg
    return out == 0


def cholec80_matlab_video(
    pred: Any, target: Any, *, fps: float = 1.0, relaxed: bool = True
) -> dict[str, np.ndarray | float]:
    """One video as ``Evaluate.m`` returns it, as fractions: ``jaccard``, ``precision``,
    ``recall`` ``(7,)`` (NaN for phases absent from the target; precision may be inf; nothing
    clipped) and ``accuracy``. Labels 0..6 (Cholec80's phase order)."""
    p, t = _pair(pred, target, "cholec80 video")
    k = CHOLEC80_NUM_PHASES
    for n, a in (("pred", p), ("target", t)):
        if a.min() < 0 or a.max() >= k:
            raise ValueError(f"cholec80 video: {n} has labels outside 0..{k - 1} (Evaluate.m scores 7 phases)")
    ok = _relaxed_correct(p, t, matlab_window(fps, relaxed))
    n_gt, n_pred = np.bincount(t, minlength=k), np.bincount(p, minlength=k)
    both = np.bincount(t[p == t], minlength=k)
    union = n_gt + n_pred - both
    tp = np.bincount(t[ok], minlength=k) + np.bincount(p[ok & (p != t)], minlength=k)
    present = n_gt > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        jac = np.where(present, tp / np.maximum(union, 1), np.nan)
        prec = np.where(present, tp / n_pred.astype(np.float64), np.nan)
        rec = np.where(present, tp / np.maximum(n_gt, 1), np.nan)
    return {"jaccard": jac, "precision": prec, "recall": rec, "accuracy": float(ok.mean())}


@dataclass(frozen=True)
class Cholec80Eval:
    """``Main.m``'s results as fractions: per-video tables ``(N, 7)`` after its clipping,
    per-phase means ``(7,)``, the headline means and their standard deviations."""

    jaccard: float
    precision: float
    recall: float
    accuracy: float
    std: dict[str, float]
    per_phase: dict[str, np.ndarray]
    per_video: dict[str, np.ndarray]
    relaxed: bool
    window: int


def _std(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1)) if x.size > 1 else 0.0


def cholec80_matlab_eval(
    preds: Sequence[Any], targets: Sequence[Any], *, fps: float = 1.0, relaxed: bool = True
) -> Cholec80Eval:
    """Videos (one label array each, 0..6) scored and aggregated as ``Main.m`` does."""
    if len(preds) != len(targets):
        raise ValueError(f"cholec80: pred and target lengths differ: {len(preds)} vs {len(targets)} videos")
    if not len(targets):
        raise ValueError("cholec80: no videos")
    rows = [cholec80_matlab_video(p, t, fps=fps, relaxed=relaxed) for p, t in zip(preds, targets)]
    tables = {k: np.minimum(np.stack([r[k] for r in rows]), 1.0) for k in ("jaccard", "precision", "recall")}
    acc = np.asarray([r["accuracy"] for r in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per_phase = {k: np.nanmean(v, 0) for k, v in tables.items()}
        prec_ok = per_phase["precision"][~np.isnan(per_phase["precision"])]
        return Cholec80Eval(
            jaccard=float(np.mean(per_phase["jaccard"])),
            precision=float(np.nanmean(per_phase["precision"])),
            recall=float(np.mean(per_phase["recall"])),
            accuracy=float(acc.mean()),
            std={"jaccard": _std(per_phase["jaccard"]), "precision": _std(prec_ok),
                 "recall": _std(per_phase["recall"]), "accuracy": _std(acc)},
            per_phase=per_phase,
            per_video={**tables, "accuracy": acc},
            relaxed=relaxed,
            window=matlab_window(fps, relaxed),
        )


def pitvis_video(pred: Any, target: Any, *, exclude: Sequence[int] = PITVIS_EXCLUDED) -> dict[str, float]:
    """``{"f1", "edit", "score"}`` of one video as ``evaluation_steps.py`` computes them
    (fractions; NaN when every frame's target is excluded)."""
    p, t = _pair(pred, target, "pitvis video")
    keep = ~np.isin(t, np.asarray(exclude, dtype=np.int64))
    p, t = p[keep], t[keep]
    if t.size == 0:
        warnings.warn("pitvis: a video has only excluded (background / 11 / 13) frames: NaN", stacklevel=2)
        return {"f1": math.nan, "edit": math.nan, "score": math.nan}
    labels, inv = np.unique(np.r_[t, p], return_inverse=True)
    ti, pi = inv[: t.size], inv[t.size :]
    k = labels.size
    tp = np.bincount(ti[pi == ti], minlength=k)
    f1 = float(np.mean(2 * tp / (np.bincount(ti, minlength=k) + np.bincount(pi, minlength=k))))
    sp, st = segments(p), segments(t)
    edit = 1.0 - levenshtein(sp, st) / max(sp.size, st.size)
    return {"f1": f1, "edit": edit, "score": (f1 + edit) / 2}


def pitvis_eval(
    preds: Sequence[Any], targets: Sequence[Any], *, exclude: Sequence[int] = PITVIS_EXCLUDED
) -> dict[str, Any]:
    """Per-video ``f1``/``edit``/``score`` ``(N,)`` and their means over videos (NaN videos left out)."""
    if len(preds) != len(targets):
        raise ValueError(f"pitvis: pred and target lengths differ: {len(preds)} vs {len(targets)} videos")
    if not len(targets):
        raise ValueError("pitvis: no videos")
    rows = [pitvis_video(p, t, exclude=exclude) for p, t in zip(preds, targets)]
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for key in ("f1", "edit", "score"):
            v = np.asarray([r[key] for r in rows])
            out[key], out[f"{key}_per_video"] = float(np.nanmean(v)), v
    return out
