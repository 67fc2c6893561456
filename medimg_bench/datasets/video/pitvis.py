"""The ``pitvis`` dataset. PitVis-2023 step recognition, one sample per annotated second (1 fps)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.video.frames import (
    VideoFrameDataset,
    check_clip_options,
    frames_to_rows,
    video_info,
)
from medimg_bench.registry import register_dataset

__all__ = ["pitvis"]


# -- PitVis-2023 ------------------------------------------------------------------------------

PITVIS_COLUMNS = ("int_video", "int_time", "int_step", "int_instrument1", "int_instrument2")


def _read_id_map(path: Path) -> dict[int, str]:
    """``{int id: name}`` of a PitVis ``map_*.csv`` (first column int, second the name); the
    first name wins where one id has several (-1 in map_steps.csv has three)."""
    table = pd.read_csv(path)
    out: dict[int, str] = {}
    for key, value in zip(table.iloc[:, 0], table.iloc[:, 1]):
        out.setdefault(int(key), str(value).strip())
    return out


@register_dataset("pitvis", tags=("video", "surgical", "phase", "classification"))
def pitvis(
    root: str | Path,
    split: str = "train",
    *,
    videos: Sequence[int] | None = None,
    frame_template: str | None = None,
    clip_length: int | None = None,
    clip_stride: int | None = None,
    num_instruments: int | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> VideoFrameDataset:
    """PitVis-2023 step recognition, one sample per annotated second (1 fps).

    Layout under ``root`` (the UCL RDR release, doi:10.5522/04/26531686): ``video_NN.mp4`` and
    ``annotations_NN.csv`` (``int_video,int_time,int_step,int_instrument1,int_instrument2``, one
    row per second), optional ``map_steps.csv`` / ``map_instruments.csv``. Only the 25 training
    videos are public, so ``split`` is a tag (use ``videos`` or a patient-level split to hold
    videos out). ``frame_template`` (e.g. ``"frames/video_{video:02d}/{time:05d}.png"``) reads
    pre-extracted frames instead of decoding; ``time`` is ``int_time`` in seconds. Labels: 0 =
    background (step -1), 1–14 = steps. ``sample['tools']``: instrument multi-hot over ids
    1..``num_instruments`` (from map_instruments.csv, else 19); ids 0/-1/-2 mean none.
    """
    root = Path(root)
    check_clip_options(clip_length, clip_stride)
    ann_files = sorted(root.glob("annotations_*.csv"))
    if videos is not None:
        wanted = {int(v) for v in videos}
        ann_files = [f for f in ann_files if int(re.sub(r"\D", "", f.stem) or -1) in wanted]
    if not ann_files:
        raise FileNotFoundError(f"pitvis: no annotations_NN.csv under {str(root)!r}")
    steps_map = _read_id_map(root / "map_steps.csv") if (root / "map_steps.csv").exists() else {}
    n_steps = max([k for k in steps_map if k > 0], default=14)
    classes = ["background"] + [steps_map.get(i, f"step_{i}") for i in range(1, n_steps + 1)]
    inst_map = (
        _read_id_map(root / "map_instruments.csv")
        if (root / "map_instruments.csv").exists()
        else {}
    )
    n_inst = num_instruments or max([k for k in inst_map if k > 0], default=19)
    tool_classes = [inst_map.get(i, f"instrument_{i}") for i in range(1, n_inst + 1)]
    rows: list[dict[str, Any]] = []
    for ann in ann_files:
        num = int(re.sub(r"\D", "", ann.stem))
        table = _read_annotations(ann, n_steps)
        vid = f"video_{num:02d}"
        times = table["int_time"].astype(int).to_numpy()
        frames = pd.DataFrame(
            {
                "timestamp": times.astype(float),
                "label": np.where(
                    table["int_step"].to_numpy() < 0, 0, table["int_step"].to_numpy()
                ),
                "tools": _instrument_multi_hot(table, ann, n_inst),
            }
        )
        if frame_template:
            frames["frame_index"] = times
            frames["frame_path"] = [frame_template.format(video=num, time=int(t)) for t in times]
            extra: dict[str, Any] = {"fps": 1.0, "split": split}
        else:
            video_rel = f"video_{num:02d}.mp4"
            info = video_info(root / video_rel)  # fps differs between videos (24 or 25)
            frames["frame_index"] = np.round(times * info["fps"]).astype(int)
            extra = {"video_path": video_rel, "fps": info["fps"], "split": split}
        rows += frames_to_rows(
            frames, video_id=vid, clip_length=clip_length, clip_stride=clip_stride, extra=extra
        )
    return VideoFrameDataset(
        pd.DataFrame(rows),
        root=root,
        classes=classes,
        tool_classes=tool_classes,
        transform=transform,
        name="pitvis",
    )


def _read_annotations(ann: Path, n_steps: int) -> pd.DataFrame:
    """One video's ``annotations_NN.csv``, its columns and step ids checked."""
    table = pd.read_csv(ann)
    missing = [c for c in PITVIS_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"pitvis: {str(ann)!r} lacks columns {missing}")
    bad = ~table["int_step"].isin([-1, *range(1, n_steps + 1)])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(
            f"pitvis: {str(ann)!r} row {i + 2}: step {table['int_step'].iat[i]} outside -1, 1..{n_steps}"
        )
    return table


def _instrument_multi_hot(table: pd.DataFrame, ann: Path, n_inst: int) -> list[list[float]]:
    """Per row, the multi-hot of its two instrument ids over 1..``n_inst`` (ids <= 0: none)."""
    tools_rows = []
    for r, (a, b) in enumerate(zip(table["int_instrument1"], table["int_instrument2"])):
        hot = [0.0] * n_inst
        for k in (int(a), int(b)):
            if k > n_inst:
                raise ValueError(f"pitvis: {str(ann)!r} row {r + 2}: instrument {k} > {n_inst}")
            if k > 0:
                hot[k - 1] = 1.0
        tools_rows.append(hot)
    return tools_rows
