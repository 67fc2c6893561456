"""The ``cholec80`` dataset. Cholec80 phase recognition: frames (or clips) sampled at ``fps`` with aligned labels."""

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
    frame_step,
    frames_to_rows,
)
from medimg_bench.registry import register_dataset

__all__ = ["CHOLEC80_PHASES", "CHOLEC80_TOOLS", "CHOLEC80_SPLITS", "cholec80"]

log = logging.getLogger(__name__)

CHOLEC80_PHASES = (
    "Preparation",
    "CalotTriangleDissection",
    "ClippingCutting",
    "GallbladderDissection",
    "GallbladderPackaging",
    "CleaningCoagulation",
    "GallbladderRetraction",
)
CHOLEC80_TOOLS = ("Grasper", "Bipolar", "Hook", "Scissors", "Clipper", "Irrigator", "SpecimenBag")
CHOLEC80_FPS = 25.0
# video numbers per split. "official": the dataset paper (Twinanda et al. 2017), 40 train / 40
# test. "tecno": the 32/8/40 train/val/test split used by TeCNO, Trans-SVNet and most later work.
CHOLEC80_SPLITS: dict[str, dict[str, tuple[int, ...]]] = {
    "official": {"train": tuple(range(1, 41)), "test": tuple(range(41, 81))},
    "tecno": {
        "train": tuple(range(1, 33)),
        "val": tuple(range(33, 41)),
        "test": tuple(range(41, 81)),
    },
}


# -- Cholec80 ---------------------------------------------------------------------------------


def _read_cholec80_phases(path: Path) -> pd.DataFrame:
    """Frame-by-frame phase table (``Frame``, ``Phase``) of one ``videoNN-phase.txt``."""
    if not path.exists():
        raise FileNotFoundError(f"phase annotation {str(path)!r} does not exist")
    table = pd.read_csv(path, sep="\t", dtype={"Phase": str})
    if list(table.columns[:2]) != ["Frame", "Phase"]:
        raise ValueError(f"{str(path)!r}: expected header 'Frame\\tPhase', got {list(table.columns)}")
    lookup = {p: i for i, p in enumerate(CHOLEC80_PHASES)}
    labels = table["Phase"].str.strip().map(lookup)
    bad = labels.isna()
    if bad.any():
        line = int(np.flatnonzero(bad.to_numpy())[0]) + 2  # +1 header, +1 one-based
        raise ValueError(
            f"{str(path)!r} line {line}: unknown phase {table['Phase'][bad].iloc[0]!r} "
            f"(expected one of {list(CHOLEC80_PHASES)})"
        )
    frames = table["Frame"].to_numpy()
    if len(frames) and not np.array_equal(frames, np.arange(frames[0], frames[0] + len(frames))):
        raise ValueError(f"{str(path)!r}: frame numbers are not consecutive")
    return pd.DataFrame({"frame_index": frames.astype(int), "label": labels.astype(int).to_numpy()})


def _read_cholec80_tools(path: Path) -> dict[int, list[float]]:
    """``{frame: multi-hot over CHOLEC80_TOOLS}`` of one ``videoNN-tool.txt`` (every 25th frame)."""
    table = pd.read_csv(path, sep="\t")
    missing = [c for c in ("Frame", *CHOLEC80_TOOLS) if c not in table.columns]
    if missing:
        raise ValueError(f"{str(path)!r}: missing tool columns {missing}")
    values = table[list(CHOLEC80_TOOLS)].to_numpy()
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"{str(path)!r}: tool annotations must be 0/1")
    return {int(f): [float(v) for v in vals] for f, vals in zip(table["Frame"], values)}


@register_dataset("cholec80", tags=("video", "surgical", "phase", "classification"))
def cholec80(
    root: str | Path,
    split: str = "test",
    *,
    split_scheme: str = "official",
    videos: Sequence[int] | None = None,
    fps: float | None = 1.0,
    clip_length: int | None = None,
    clip_stride: int | None = None,
    tools: bool = True,
    frame_template: str | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> VideoFrameDataset:
    """Cholec80 phase recognition: frames (or clips) sampled at ``fps`` with aligned labels.

    Layout under ``root``: ``videos/videoNN.mp4`` (25 fps), ``phase_annotations/videoNN-phase.txt``
    (one row per frame), ``tool_annotations/videoNN-tool.txt`` (every 25th frame). ``split``:
    ``train``/``val``/``test``/``all`` of ``split_scheme`` (``official`` = videos 1–40 train,
    41–80 test; ``tecno`` = 1–32 / 33–40 / 41–80); ``videos`` picks video numbers instead.
    Sampled frames are ``round(k * 25 / fps)``; ``tools`` adds ``sample['tools']`` (7 multi-hot,
    NaN on frames without a tool annotation, i.e. any frame not a multiple of 25).
    ``frame_template`` reads pre-extracted frames instead of decoding the mp4, e.g.
    ``"frames/video{video:02d}/{frame:06d}.png"`` (``video``: number, ``frame``: frame index,
    ``second``: ``frame // 25``); the sampled frames must exist as files.
    """
    root = Path(root)
    check_clip_options(clip_length, clip_stride)
    if videos is None:
        if split_scheme not in CHOLEC80_SPLITS:
            raise ValueError(f"cholec80: unknown split_scheme {split_scheme!r} ({list(CHOLEC80_SPLITS)})")
        scheme = CHOLEC80_SPLITS[split_scheme]
        if split == "all":
            videos = sorted({v for vs in scheme.values() for v in vs})
        elif split in scheme:
            videos = scheme[split]
        else:
            raise ValueError(f"cholec80: split {split!r} not in scheme {split_scheme!r} ({[*scheme, 'all']})")
    step = frame_step(CHOLEC80_FPS, fps, "cholec80")
    rows: list[dict[str, Any]] = []
    for num in videos:
        vid = f"video{int(num):02d}"
        video_rel = f"videos/{vid}.mp4"
        if frame_template is None and not (root / video_rel).exists():
            raise FileNotFoundError(f"cholec80: {str(root / video_rel)!r} does not exist")
        table = _read_cholec80_phases(root / "phase_annotations" / f"{vid}-phase.txt")
        n = len(table)
        picks = np.unique(np.round(np.arange(0, n, step)).astype(int))
        picks = picks[picks < n]
        frames = table.iloc[picks].copy()
        frames["timestamp"] = frames["frame_index"] / CHOLEC80_FPS
        tool_path = root / "tool_annotations" / f"{vid}-tool.txt"
        if tools and tool_path.exists():
            tool_map = _read_cholec80_tools(tool_path)
            nan = [float("nan")] * len(CHOLEC80_TOOLS)
            frames["tools"] = [tool_map.get(int(f), nan) for f in frames["frame_index"]]
        elif tools:
            log.warning("cholec80: %s missing; no tool labels for %s", tool_path, vid)
        extra: dict[str, Any] = {"fps": CHOLEC80_FPS, "split": split}
        if frame_template is None:
            extra["video_path"] = video_rel
        else:
            frames["frame_path"] = [
                frame_template.format(video=int(num), frame=int(f), second=int(f) // 25)
                for f in frames["frame_index"]
            ]
        rows += frames_to_rows(
            frames, video_id=vid, clip_length=clip_length, clip_stride=clip_stride, extra=extra
        )
    manifest = pd.DataFrame(rows)
    return VideoFrameDataset(
        manifest,
        root=root,
        classes=CHOLEC80_PHASES,
        tool_classes=CHOLEC80_TOOLS if tools else None,
        transform=transform,
        name="cholec80",
    )
