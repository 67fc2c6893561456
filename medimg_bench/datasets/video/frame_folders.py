"""The ``video_frames`` dataset. Frame folders with a per-frame CSV: one row per frame image."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.video.frames import (
    VideoFrameDataset,
    check_clip_options,
    frames_to_rows,
)
from medimg_bench.registry import register_dataset

__all__ = ["video_frames"]

log = logging.getLogger(__name__)


# -- generic frame folders ----------------------------------------------------------------------


@register_dataset("video_frames", tags=("video", "classification"))
def video_frames(
    root: str | Path,
    split: str | None = None,
    *,
    csv: str = "labels.csv",
    video_column: str = "video",
    frame_column: str = "frame",
    label_column: str = "label",
    time_column: str | None = None,
    split_column: str = "split",
    classes: Sequence[str] | None = None,
    fps: float = 1.0,
    clip_length: int | None = None,
    clip_stride: int | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VideoFrameDataset:
    """Frame folders with a per-frame CSV: one row per frame image.

    ``csv`` (relative to ``root``) has ``video_column`` (video id), ``frame_column`` (image path
    relative to ``root``), ``label_column`` (class name, or int index into ``classes``) and
    optionally ``time_column`` (seconds; else row order / ``fps``) and ``split_column`` (rows are
    kept where it equals ``split``). Frames are ordered by time within each video; clips are
    ``clip_length`` consecutive rows every ``clip_stride`` rows. A label outside ``classes`` is an
    error naming the CSV line, or with ``on_error="skip"`` the row is dropped (count logged).
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"video_frames: on_error must be 'raise' or 'skip', got {on_error!r}")
    root = Path(root)
    check_clip_options(clip_length, clip_stride)
    csv_path = root / csv
    table = _read_frame_table(
        csv_path, split, (video_column, frame_column, label_column), split_column=split_column
    )
    raw = table[label_column]
    if classes is None:
        if pd.api.types.is_numeric_dtype(raw):
            raise ValueError("video_frames: integer labels need classes=[...] to name them")
        classes = sorted(raw.dropna().astype(str).unique())
    labels, bad = _label_indices(table["_line"], raw, classes, csv_path=csv_path, on_error=on_error)
    table = table.assign(label=labels, frame_path=table[frame_column].astype(str))
    if bad:
        log.warning("video_frames: skipped %d row(s) with unknown labels in %s", len(bad), csv_path)
        table = table[table["label"] >= 0]
    rows: list[dict[str, Any]] = []
    for vid, group in table.groupby(video_column, sort=True):
        rows += frames_to_rows(
            _timed_frames(group, time_column=time_column, fps=fps),
            video_id=str(vid),
            clip_length=clip_length,
            clip_stride=clip_stride,
            extra={"fps": float(fps), "split": split if split is not None else "all"},
        )
    if not rows:
        raise ValueError(f"video_frames: no frames in {str(csv_path)!r} for split {split!r}")
    return VideoFrameDataset(
        pd.DataFrame(rows), root=root, classes=classes, transform=transform, name="video_frames"
    )


def _read_frame_table(
    csv_path: Path, split: str | None, columns: Sequence[str], *, split_column: str
) -> pd.DataFrame:
    """The per-frame CSV with its 1-based file line in ``_line``, kept to ``split``'s rows."""
    video_column, frame_column = columns[0], columns[1]
    if not csv_path.exists():
        raise FileNotFoundError(f"video_frames: {str(csv_path)!r} does not exist")
    table = pd.read_csv(csv_path, dtype={video_column: str, frame_column: str})
    for col in columns:
        if col not in table.columns:
            raise ValueError(f"video_frames: {str(csv_path)!r} has no column {col!r}")
    table["_line"] = np.arange(len(table)) + 2
    if split is not None and split != "all" and split_column in table.columns:
        table = table[table[split_column].astype(str) == split]
    return table


def _label_indices(
    lines: pd.Series, raw: pd.Series, classes: Sequence[str], *, csv_path: Path, on_error: str
) -> tuple[list[int], list[int]]:
    """Class index per row (-1 where unknown and skipped) and the CSV lines skipped."""
    lookup = {c: i for i, c in enumerate(classes)}
    labels, bad = [], []
    for line, value in zip(lines, raw):
        if isinstance(value, str):
            idx = lookup.get(value)
        elif pd.notna(value) and float(value).is_integer() and 0 <= int(value) < len(classes):
            idx = int(value)
        else:
            idx = None
        if idx is None:
            message = f"video_frames: {str(csv_path)!r} line {line}: label {value!r} not in classes {list(classes)}"
            if on_error == "raise":
                raise ValueError(message)
            log.debug("skipping %s", message)
            bad.append(line)
            idx = -1
        labels.append(idx)
    return labels, bad


def _timed_frames(group: pd.DataFrame, *, time_column: str | None, fps: float) -> pd.DataFrame:
    """One video's frames in time order with ``frame_index`` and ``timestamp`` (seconds)."""
    group = group.copy()
    if time_column:
        group = group.sort_values(time_column, kind="stable")
        group["timestamp"] = group[time_column].astype(float)
    else:
        group["timestamp"] = np.arange(len(group)) / float(fps)
    group["frame_index"] = np.arange(len(group))
    return group[["frame_index", "timestamp", "label", "frame_path"]]
