"""Phase metrics fed one frame at a time (``task=phase_recognition``): frames are assembled into
per-video sequences, each video is scored, and the engine aggregates and bootstraps over videos.

``update(preds, targets, meta, ids=frame_ids)``: ``preds`` ``(B, K)`` scores (arg-maxed) or
``(B,)`` labels, ``targets`` ``(B,)`` labels, ``meta[i]`` with ``video_id`` and ``frame_index``
(else ``timestamp``) — what the video loaders put in each sample. Frames may come in any order
and from any batch or rank; a video's frames are sorted by frame index (two frames of one video
with the same index are an error naming both). Without ``meta`` the batch's frames are one video
(``"video"``) in the order given.

The per-sample tables have one row per *video* (ids = video ids), so the engine's summary is the
mean over videos with a bootstrap that resamples whole videos: the per-video CI each challenge
implies. For per-phase tables (``cholec80_phase``) the per-phase value is the mean over the
videos where the phase occurs and the headline value the mean of those — ``Main.m``'s order.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.phase_challenges import (
    CHOLEC80_NUM_PHASES,
    PITVIS_EXCLUDED,
    cholec80_matlab_video,
    matlab_window,
    pitvis_video,
)
from medimg_bench.metrics.video import PHASE_SUMMARY_NAMES, frame_labels, video_rows, video_stats
from medimg_bench.registry import register_metric

__all__ = ["FramePhaseMetric", "Cholec80Phase", "PitVisPhase", "PhaseFrames"]


class FramePhaseMetric(Metric):
    """Base: keeps per-frame video, position, prediction and target; subclasses score videos."""

    per_sample = True
    input_kind = "phase_frames"
    higher_is_better = True
    concat_updates = True
    columns: tuple[str, ...] = ()

    def __init__(self, *, num_classes: int | None = None, class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=class_names)
        self.num_classes = num_classes
        self.add_state("videos", [], dist_reduce_fx="cat")
        self.add_state("positions", [], dist_reduce_fx="cat")
        self.add_state("frame_preds", [], dist_reduce_fx="cat")
        self.add_state("frame_targets", [], dist_reduce_fx="cat")
        self.add_state("times", [], dist_reduce_fx="cat")

    def _frame_labels(self, preds: Any, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        p = frame_labels(preds, name=f"{self.name}: pred")
        t = frame_labels(targets, name=f"{self.name}: target")
        k = self.num_classes
        shape = tuple(getattr(preds, "shape", np.shape(preds)))
        if k is not None and len(shape) == 2 and shape[1] != k:
            raise ValueError(f"{self.name}: scores have {shape[1]} columns, expected {k} phases")
        if p.shape != t.shape:
            raise ValueError(f"{self.name}: pred and target lengths differ: {p.size} vs {t.size} frames")
        if t.size == 0:
            raise ValueError(f"{self.name}: no frames in the batch (empty input)")
        if k is not None:
            for n, a in (("pred", p), ("target", t)):
                if a.min() < 0 or a.max() >= k:
                    raise ValueError(f"{self.name}: {n} has labels outside [0, {k}): not a class")
        return p, t

    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:
        p, t = self._frame_labels(preds, targets)
        n = p.size
        if meta is None:
            start = sum(int(x.shape[0]) for x in self.positions)
            videos = ["video"] * n
            pos, times = np.arange(start, start + n, dtype=np.float64), np.full(n, np.nan)
        else:
            if len(meta) != n:
                raise ValueError(f"{self.name}: {len(meta)} meta entries for {n} frames")
            videos, pos, times = _meta_columns(meta, ids, self.name)
        self._add_ids(ids, n)
        self.videos.extend(videos)
        self.positions.append(torch.from_numpy(pos))
        self.times.append(torch.from_numpy(times))
        self.frame_preds.append(torch.from_numpy(p))
        self.frame_targets.append(torch.from_numpy(t))

    def sequences(self) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
        """``(video_id, preds, targets, times)`` per video (sorted ids), frames in order."""
        if not self.ids:
            raise ValueError(f"{self.name}: no frames seen (compute() before update())")
        names, code = np.unique(np.asarray(self.videos, dtype=str), return_inverse=True)
        pos = _cat(self.positions, torch.float64)
        order = np.lexsort((pos, code))
        code, pos = code[order], pos[order]
        dup = np.flatnonzero((code[1:] == code[:-1]) & (pos[1:] == pos[:-1]))
        if dup.size:
            a, b = order[dup[0]], order[dup[0] + 1]
            raise ValueError(f"{self.name}: video {names[code[dup[0]]]!r} has two frames at position "
                             f"{pos[dup[0]]:g} (samples {self.ids[a]!r} and {self.ids[b]!r})")
        p = _cat(self.frame_preds, torch.int64)[order]
        t = _cat(self.frame_targets, torch.int64)[order]
        times = _cat(self.times, torch.float64)[order]
        cuts = np.flatnonzero(code[1:] != code[:-1]) + 1
        return [(str(names[c[0]]), a, b, q) for c, a, b, q in
                zip(np.split(code, cuts), np.split(p, cuts), np.split(t, cuts), np.split(times, cuts))]

    def video_tables(self) -> tuple[list[str], dict[str, np.ndarray]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        """Per column: the video ids and an ``(N_videos, C)`` float64 tensor (NaN = undefined)."""
        vids, tables = self.video_tables()
        return {c: (vids, torch.from_numpy(np.asarray(tables[c], dtype=np.float64).reshape(len(vids), -1)))
                for c in self.columns}

    def values(self) -> tuple[list[str], torch.Tensor]:
        return self.metric_values()[self.columns[0]]

    def compute(self) -> torch.Tensor:
        """Mean over videos of the first column, per class ``(C,)``."""
        return self.values()[1].nanmean(0)

    def summary_notes(self) -> dict[str, Any]:
        """``summary.json["phase_videos"]``: videos and frames scored (the run's ``n_samples``
        counts the frames plus one per-video row each)."""
        n = len(set(self.videos)) if self.ids else 0
        return {"phase_videos": {"n_videos": n, "n_frames": len(self.ids)}}


def _cat(state: list[torch.Tensor], dtype: torch.dtype) -> np.ndarray:
    return torch.cat([x.to("cpu", dtype) for x in state]).numpy()


def _meta_columns(meta: Sequence[Any], ids: Sequence[str] | None, name: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Video ids, positions (``frame_index``, else ``timestamp``) and times (NaN if absent)."""
    n = len(meta)
    videos: list[str] = []
    pos, times = np.empty(n), np.full(n, np.nan)
    for i, m in enumerate(meta):
        if not isinstance(m, dict) or m.get("video_id") is None:
            raise ValueError(f"{name}: frame {ids[i] if ids is not None else i!s} has no meta['video_id']")
        videos.append(str(m["video_id"]))
        f, t = m.get("frame_index"), m.get("timestamp")
        if isinstance(f, (list, tuple)) or isinstance(t, (list, tuple)):
            raise ValueError(f"{name}: a clip sample (frame_index is a list); phase metrics take single frames")
        if f is None and t is None:
            raise ValueError(f"{name}: meta has neither 'frame_index' nor 'timestamp' (frame order unknown)")
        pos[i] = float(f if f is not None else t)
        if t is not None:
            times[i] = float(t)
    return videos, pos, times


@register_metric("cholec80_phase", tags=("video", "phase", "cholec80"))
class Cholec80Phase(FramePhaseMetric):
    """Cholec80's MATLAB evaluation (:mod:`medimg_bench.metrics.phase_challenges`) per video:
    per-phase Jaccard, precision, recall ``(N, 7)`` (clipped at 1 as ``Main.m``) and accuracy
    ``(N, 1)``. Columns ``cholec80_<name>`` (``_relaxed`` appended with ``relaxed=True``).
    ``fps``: rate of the evaluated frames; ``None`` takes each video's from its frame times
    (``meta['timestamp']``, 1 / median step)."""

    name = "cholec80_phase"

    def __init__(self, *, relaxed: bool = True, fps: float | None = None, num_classes: int | None = None,
                 class_names: Sequence[str] | None = None) -> None:
        if num_classes not in (None, CHOLEC80_NUM_PHASES):
            raise ValueError(f"cholec80_phase: Evaluate.m scores 7 phases, the dataset has {num_classes}")
        super().__init__(num_classes=CHOLEC80_NUM_PHASES, class_names=class_names)
        if fps is not None:
            matlab_window(fps, relaxed)  # a bad rate fails here, not at the end of the run
        self.relaxed, self.fps = bool(relaxed), fps
        suffix = "_relaxed" if relaxed else ""
        self.columns = tuple(f"cholec80_{k}{suffix}" for k in ("jaccard", "precision", "recall", "accuracy"))

    def _fps_of(self, vid: str, times: np.ndarray) -> float:
        if self.fps is not None or not self.relaxed:
            return float(self.fps or 1.0)
        step = np.diff(times)
        if times.size < 2 or not np.isfinite(step).all():
            raise ValueError(f"cholec80_phase: video {vid!r}: no frame times to infer the fps from; set fps")
        return float(round(1.0 / np.median(step), 6))

    def video_tables(self) -> tuple[list[str], dict[str, np.ndarray]]:
        seqs = self.sequences()
        rows = [cholec80_matlab_video(p, t, fps=self._fps_of(vid, times), relaxed=self.relaxed)
                for vid, p, t, times in seqs]
        tables = {c: (np.minimum(np.stack([r[k] for r in rows]), 1.0) if k != "accuracy"
                      else np.asarray([r[k] for r in rows]))
                  for c, k in zip(self.columns, ("jaccard", "precision", "recall", "accuracy"))}
        return [s[0] for s in seqs], tables


@register_metric("pitvis_phase", tags=("video", "phase", "pitvis"))
class PitVisPhase(FramePhaseMetric):
    """PitVis-2023's step evaluation per video: ``pitvis_f1`` (macro F1), ``pitvis_edit`` and
    ``pitvis_score`` = (F1 + edit) / 2, each ``(N, 1)``; frames whose target is in ``exclude``
    (loader labels: 0 = background, 11, 13) are removed first."""

    name = "pitvis_phase"
    columns = ("pitvis_score", "pitvis_f1", "pitvis_edit")

    def __init__(self, *, exclude: Sequence[int] = PITVIS_EXCLUDED, num_classes: int | None = None,
                 class_names: Sequence[str] | None = None) -> None:
        super().__init__(num_classes=num_classes, class_names=None)
        self.exclude = tuple(int(x) for x in exclude)

    def video_tables(self) -> tuple[list[str], dict[str, np.ndarray]]:
        seqs = self.sequences()
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            rows = [pitvis_video(p, t, exclude=self.exclude) for _, p, t, _ in seqs]
        return [s[0] for s in seqs], {f"pitvis_{k}": np.asarray([r[k] for r in rows]) for k in ("score", "f1", "edit")}


@register_metric("phase_frames", tags=("video", "phase"))
class PhaseFrames(FramePhaseMetric):
    """The generic per-video definitions of :func:`medimg_bench.metrics.video.phase_metrics`
    (accuracy, macro precision / recall / Jaccard / F1 over the phases present, edit score), one
    row per video in columns ``phase_<name>``; ``relaxed_seconds`` with ``fps`` as there."""

    name = "phase_frames"

    def __init__(self, *, num_classes: int | None = None, fps: float | None = None,
                 relaxed_seconds: float | None = None, class_names: Sequence[str] | None = None) -> None:
        super().__init__(num_classes=num_classes, class_names=None)
        from medimg_bench.metrics.video import window_frames as video_window

        self.window = video_window(fps, relaxed_seconds)
        self.columns = tuple(f"phase_{k}" for k in PHASE_SUMMARY_NAMES)

    def video_tables(self) -> tuple[list[str], dict[str, np.ndarray]]:
        seqs = self.sequences()
        k = self.num_classes or int(max(max(p.max(), t.max()) for _, p, t, _ in seqs)) + 1
        cms, edits = video_stats([s[1] for s in seqs], [s[2] for s in seqs], num_classes=k,
                                  window=self.window, ignore_index=None)
        rows = video_rows(cms, edits)
        return [s[0] for s in seqs], {c: rows[:, j] for j, c in enumerate(self.columns)}
