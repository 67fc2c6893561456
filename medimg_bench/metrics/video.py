"""Surgical phase recognition (Cholec80, M2CAI16, PitVis): frame and segment metrics per video.

Per video and phase (``TP``/``FP``/``FN`` counted over frames): precision ``TP / (TP + FP)``
(0 when the phase is never predicted), recall ``TP / (TP + FN)``, Jaccard
``TP / (TP + FP + FN)`` and F1 ``2 TP / (2 TP + FP + FN)``. A phase absent from a video's ground
truth gets NaN for all four in that video (the Cholec80 evaluation skips it), so it does not
enter that video's macro average. Videos are scored separately and then averaged
(``average="video"``, the Cholec80 protocol); ``average="frames"`` pools all frames first (one
confusion matrix for the dataset, what a frame-level scikit-learn call gives).

Edit score (Lea et al. 2017, MS-TCN): ``1 - Levenshtein(segments(pred), segments(target)) /
max(#segments)``, where ``segments`` collapses runs of equal labels; a fraction in [0, 1]
(MS-TCN prints it × 100). It is always averaged per video.

Relaxed boundaries (M2CAI16 / Cholec80 "relaxed" metrics): within ``relaxed_seconds`` after a
ground-truth phase transition, predicting the previous phase counts as correct, and within
``relaxed_seconds`` before a transition predicting the next phase does. The window in frames is
``round(relaxed_seconds * fps)`` with the fps of the *evaluated* frames. Pitfall: the official
script hard-codes 10 s × 25 fps = 250 frames; applied to labels sub-sampled at 1 fps, the
window silently becomes 250 s and inflates every relaxed score. Pass the real fps here.
The official script's phase-specific rules (e.g. tolerating either neighbour for some Cholec80
phases) are not reproduced: only the adjacent ground-truth segments are tolerated.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = [
    "PHASE_SUMMARY_NAMES",
    "PhaseMetrics",
    "frame_accuracy",
    "edit_score",
    "relax_boundaries",
    "phase_confusion",
    "phase_metrics",
    "PhaseMetricsState",
]

PHASE_SUMMARY_NAMES = ("accuracy", "precision", "recall", "jaccard", "f1", "edit")


def frame_labels(x: Any, *, name: str) -> np.ndarray:
    """Per-frame labels ``(T,)``; ``(T, K)`` scores are arg-maxed."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim == 2:
        if not np.isfinite(a).all():
            raise ValueError(f"{name}: scores have NaN or inf values")
        a = a.argmax(1)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected per-frame labels (T,) or scores (T, K), got shape {a.shape}")
    if a.dtype.kind == "f":
        if not np.isfinite(a).all() or (a != np.round(a)).any():
            raise ValueError(f"{name}: labels must be integers (got NaN, inf or fractional values)")
    elif a.dtype.kind not in "iub":
        raise ValueError(f"{name}: labels must be integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def _video_pair(
    pred: Any, target: Any, *, num_classes: int | None, ignore_index: int | None, name: str
) -> tuple[np.ndarray, np.ndarray]:
    p = frame_labels(pred, name=f"{name}: pred")
    t = frame_labels(target, name=f"{name}: target")
    if p.shape[0] != t.shape[0]:
        raise ValueError(f"{name}: pred and target lengths differ: {p.shape[0]} vs {t.shape[0]} frames")
    if ignore_index is not None:
        keep = t != ignore_index
        p, t = p[keep], t[keep]
    if t.shape[0] == 0:
        raise ValueError(f"{name}: no labelled frames")
    if num_classes is not None:
        for n, a in (("pred", p), ("target", t)):
            if a.min() < 0 or a.max() >= num_classes:
                raise ValueError(f"{name}: {n} has labels outside [0, {num_classes}): {sorted(set(a[(a < 0) | (a >= num_classes)].tolist()))[:5]}")
    return p, t


def segments(labels: np.ndarray) -> np.ndarray:
    if labels.size == 0:
        return labels
    starts = np.r_[True, labels[1:] != labels[:-1]]
    return labels[starts]


def levenshtein(a: np.ndarray, b: np.ndarray) -> int:
    """Edit distance (unit costs), one NumPy row per element of ``a``.

    The insertion chain ``new[j] = min(new[j - 1] + 1, ...)`` is a running minimum of
    ``tmp[j] - j`` shifted back by ``j``.
    """
    m = b.size
    j = np.arange(m + 1)
    row = j.copy()
    for i in range(1, a.size + 1):
        tmp = np.empty(m + 1, dtype=np.int64)
        tmp[0] = i
        tmp[1:] = np.minimum(row[1:] + 1, row[:-1] + (b != a[i - 1]))
        row = np.minimum.accumulate(tmp - j) + j
    return int(row[m])


def edit_score(pred: Any, target: Any, *, ignore_index: int | None = None) -> float:
    """Segmental edit score of one video, in [0, 1] (MS-TCN's value / 100)."""
    p, t = _video_pair(pred, target, num_classes=None, ignore_index=ignore_index, name="video")
    sp, st = segments(p), segments(t)
    return 1.0 - levenshtein(sp, st) / max(sp.size, st.size)


def frame_accuracy(pred: Any, target: Any, *, ignore_index: int | None = None) -> float:
    """Fraction of frames whose predicted phase is right, one video."""
    p, t = _video_pair(pred, target, num_classes=None, ignore_index=ignore_index, name="video")
    return float((p == t).mean())


def relax_boundaries(pred: Any, target: Any, *, window: int) -> np.ndarray:
    """``pred`` with tolerated boundary errors replaced by the target (see the module docstring).

    ``window``: frames after/before each ground-truth transition where predicting the previous /
    next phase counts as correct.
    """
    p, t = _video_pair(pred, target, num_classes=None, ignore_index=None, name="video")
    if window <= 0:
        return p
    n = t.size
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    ends = np.r_[starts[1:], n]
    seg_of = np.repeat(np.arange(starts.size), ends - starts)
    seg_labels = t[starts]
    prev_label = np.r_[-1, seg_labels[:-1]][seg_of]
    next_label = np.r_[seg_labels[1:], -1][seg_of]
    idx = np.arange(n)
    since_start = idx - starts[seg_of]
    until_end = ends[seg_of] - 1 - idx
    ok = ((since_start < window) & (p == prev_label)) | ((until_end < window) & (p == next_label))
    return np.where(ok, t, p)


def phase_confusion(pred: Any, target: Any, *, num_classes: int) -> np.ndarray:
    """Confusion matrix ``(K, K)`` of one video, rows = target phase, columns = prediction."""
    p, t = _video_pair(pred, target, num_classes=num_classes, ignore_index=None, name="video")
    return np.bincount(t * num_classes + p, minlength=num_classes**2).reshape(num_classes, num_classes)


def _scores_from_confusion(cm: np.ndarray) -> dict[str, np.ndarray]:
    """Per-phase precision/recall/jaccard/f1 ``(..., K)`` and accuracy ``(...)`` from ``(..., K, K)``."""
    cm = cm.astype(np.float64)
    tp = np.diagonal(cm, axis1=-2, axis2=-1)
    support = cm.sum(-1)
    predicted = cm.sum(-2)
    fp, fn = predicted - tp, support - tp
    present = support > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "precision": np.where(predicted > 0, tp / predicted, 0.0),
            "recall": tp / support,
            "jaccard": tp / (tp + fp + fn),
            "f1": 2 * tp / (2 * tp + fp + fn),
        }
        for k in out:
            out[k] = np.where(present, out[k], np.nan)
        out["accuracy"] = tp.sum(-1) / cm.sum((-2, -1))
    return out


@dataclass(frozen=True)
class PhaseMetrics:
    """Phase recognition summary; macro values are fractions in [0, 1].

    ``per_phase``: name -> ``(K,)`` (mean over videos where the phase occurs, or pooled);
    ``per_video``: ``(N, 6)`` rows of ``PHASE_SUMMARY_NAMES`` for each video.
    """

    accuracy: float
    precision: float
    recall: float
    jaccard: float
    f1: float
    edit: float
    per_phase: dict[str, np.ndarray]
    per_video: np.ndarray
    average: str
    relaxed_window: int


def video_rows(cms: np.ndarray, edits: np.ndarray) -> np.ndarray:
    s = _scores_from_confusion(cms)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        macro = [np.nanmean(s[k], -1) for k in ("precision", "recall", "jaccard", "f1")]
    return np.stack([s["accuracy"], *macro, edits], 1)


def video_stats(
    preds: Sequence[Any], targets: Sequence[Any], *, num_classes: int, window: int, ignore_index: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Confusion matrices ``(N, K, K)`` (after relaxing boundaries) and edit scores ``(N,)``."""
    if len(preds) != len(targets):
        raise ValueError(f"pred and target lengths differ: {len(preds)} vs {len(targets)} videos")
    if len(targets) == 0:
        raise ValueError("no videos")
    cms, edits = [], []
    for v, (p, t) in enumerate(zip(preds, targets)):
        pv, tv = _video_pair(p, t, num_classes=num_classes, ignore_index=ignore_index, name=f"video {v}")
        sp, st = segments(pv), segments(tv)
        edits.append(1.0 - levenshtein(sp, st) / max(sp.size, st.size))
        pr = relax_boundaries(pv, tv, window=window) if window else pv
        cms.append(np.bincount(tv * num_classes + pr, minlength=num_classes**2).reshape(num_classes, num_classes))
    return np.stack(cms), np.asarray(edits, dtype=np.float64)


def _summarize(cm: np.ndarray, edits: np.ndarray, *, average: str, window: int) -> PhaseMetrics:
    if average not in ("video", "frames"):
        raise ValueError(f"average must be 'video' or 'frames', got {average!r}")
    per_video = video_rows(cm, edits)
    keys = ("precision", "recall", "jaccard", "f1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if average == "video":
            s = _scores_from_confusion(cm)
            per_phase = {k: np.nanmean(s[k], 0) for k in keys}
            summary = np.nanmean(per_video, 0)
        else:
            s = _scores_from_confusion(cm.sum(0))
            per_phase = {k: s[k] for k in keys}
            summary = np.r_[s["accuracy"], [np.nanmean(per_phase[k]) for k in keys], edits.mean()]
    return PhaseMetrics(
        *(float(x) for x in summary),
        per_phase=per_phase,
        per_video=per_video,
        average=average,
        relaxed_window=window,
    )


def window_frames(fps: float | None, relaxed_seconds: float | None) -> int:
    if relaxed_seconds is None:
        return 0
    if fps is None or fps <= 0:
        raise ValueError("relaxed_seconds needs the frame rate fps (> 0) of the evaluated frames")
    if relaxed_seconds < 0:
        raise ValueError(f"relaxed_seconds must be >= 0, got {relaxed_seconds}")
    return int(round(relaxed_seconds * fps))


def phase_metrics(
    preds: Sequence[Any],
    targets: Sequence[Any],
    *,
    num_classes: int,
    average: str = "video",
    fps: float | None = None,
    relaxed_seconds: float | None = None,
    ignore_index: int | None = None,
) -> PhaseMetrics:
    """Accuracy, macro precision/recall/Jaccard/F1 and edit score over videos.

    ``preds``/``targets``: one per-frame label array ``(T_v,)`` (or score array ``(T_v, K)``) per
    video. ``average="video"``: each video's values (macro over the phases it contains), then the
    mean over videos (per-phase values: mean over the videos containing the phase);
    ``"frames"``: one pooled confusion matrix. ``relaxed_seconds`` with ``fps`` (of the evaluated
    frames) enables relaxed boundaries; frames whose target is ``ignore_index`` are dropped.
    """
    if average not in ("video", "frames"):
        raise ValueError(f"average must be 'video' or 'frames', got {average!r}")
    window = window_frames(fps, relaxed_seconds)
    cm, edits = video_stats(preds, targets, num_classes=num_classes, window=window, ignore_index=ignore_index)
    return _summarize(cm, edits, average=average, window=window)


@register_metric("phase_metrics", tags=("video", "phase"))
class PhaseMetricsState(Metric):
    """Stateful phase metrics, one sample per video (per-sample values: ``PHASE_SUMMARY_NAMES``).

    ``update(preds, targets, meta, ids=video_ids)``: a sequence of per-video label arrays (or a
    ``(B, T)`` tensor). Each video's confusion matrix and edit score are kept, one item per id, so
    the distributed gather counts each video once. ``compute`` is the mean over videos;
    :meth:`summary` gives the full :class:`PhaseMetrics` (per phase, pooled with ``"frames"``).
    """

    name = "phase_metrics"
    per_sample = True
    input_kind = "phases"
    higher_is_better = True
    value_range = (0.0, 1.0)

    def __init__(
        self,
        *,
        num_classes: int,
        fps: float | None = None,
        relaxed_seconds: float | None = None,
        ignore_index: int | None = None,
        class_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(class_names=class_names or PHASE_SUMMARY_NAMES)
        self.num_classes = num_classes
        self.fps = fps
        self.relaxed_seconds = relaxed_seconds
        self.ignore_index = ignore_index
        self.window = window_frames(fps, relaxed_seconds)
        self.add_state("confusions", [], dist_reduce_fx="cat")
        self.add_state("edits", [], dist_reduce_fx="cat")

    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:
        cm, edits = video_stats(
            list(preds), list(targets), num_classes=self.num_classes,
            window=self.window, ignore_index=self.ignore_index,
        )
        self._add_ids(ids, cm.shape[0])
        self.confusions.extend(torch.from_numpy(c) for c in cm)
        self.edits.extend(torch.tensor(e, dtype=torch.float64) for e in edits)

    def values(self) -> tuple[list[str], torch.Tensor]:
        if not self.confusions:
            return [], torch.empty(0, len(PHASE_SUMMARY_NAMES), dtype=torch.float64)
        cm = torch.stack(self.confusions).numpy()
        edits = torch.stack(self.edits).numpy()
        return list(self.ids), torch.from_numpy(video_rows(cm, edits))

    def compute(self) -> torch.Tensor:
        """Mean over videos of ``PHASE_SUMMARY_NAMES`` (each video's macro values)."""
        if not self.confusions:
            raise ValueError("phase_metrics: compute() called before any update() (no videos)")
        return self.values()[1].nanmean(0)

    def summary(self, *, average: str = "video") -> PhaseMetrics:
        """The full :class:`PhaseMetrics` of the videos seen (``"frames"``: pooled frames)."""
        if not self.confusions:
            raise ValueError("phase_metrics: no videos seen")
        cm = torch.stack(self.confusions).numpy()
        edits = torch.stack(self.edits).numpy()
        return _summarize(cm, edits, average=average, window=self.window)
