"""Surgical video datasets: Cholec80, PitVis-2023 and generic frame folders.

Every dataset is a manifest with one row per sample. A sample is one frame (``C×H×W``) or a clip
of ``clip_length`` frames (``T×C×H×W``) with per-frame labels. Frames are decoded lazily with
PyAV (optional extra ``video``) or read from frame image files. Pixel values are float32 in
``[0, 1]`` (8-bit RGB divided by 255). ``meta['patient_id']`` is the video id, so patient-level
splits never cut a video; ``meta`` also has ``video_id``, ``frame_index`` (index in the source
video), ``timestamp`` (seconds from the start of the video) and ``fps`` (of the source video).
"""

from __future__ import annotations

from medimg_bench.datasets.video.cholec80 import (
    CHOLEC80_FPS,
    CHOLEC80_PHASES,
    CHOLEC80_SPLITS,
    CHOLEC80_TOOLS,
    cholec80,
)
from medimg_bench.datasets.video.frame_folders import video_frames
from medimg_bench.datasets.video.frames import VideoFrameDataset, read_video_frames, video_info
from medimg_bench.datasets.video.pitvis import PITVIS_COLUMNS, pitvis

__all__ = [
    "CHOLEC80_FPS",
    "CHOLEC80_PHASES",
    "CHOLEC80_SPLITS",
    "CHOLEC80_TOOLS",
    "PITVIS_COLUMNS",
    "VideoFrameDataset",
    "cholec80",
    "pitvis",
    "read_video_frames",
    "video_frames",
    "video_info",
]
