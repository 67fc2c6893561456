"""Reading video frames (PyAV or image folders) and the frame / clip dataset shared by the video loaders."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.io import ImageReadError

__all__ = ["read_video_frames", "VideoFrameDataset"]


def _require_av() -> Any:
    try:
        import av
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "decoding video needs PyAV: pip install 'medimg-bench[video]' (or pip install av)"
        ) from exc
    return av


def video_info(path: str | Path) -> dict[str, float]:
    """``{'fps': frames per second, 'frames': frame count (0 if the container does not say),
    'duration': seconds}`` of the first video stream of ``path``."""
    av = _require_av()
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"video {str(p)!r} does not exist")
    try:
        with av.open(str(p)) as container:
            if not container.streams.video:
                raise ImageReadError(p, "no video stream")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            duration = float(stream.duration * stream.time_base) if stream.duration else 0.0
            return {"fps": float(rate) if rate else 0.0, "frames": int(stream.frames or 0), "duration": duration}
    except ImageReadError:
        raise
    except Exception as exc:  # PyAV raises its own error hierarchy (av.error.*)
        raise ImageReadError(p, f"not a readable video ({type(exc).__name__}: {exc})") from exc


def read_video_frames(path: str | Path, indices: Sequence[int]) -> tuple[np.ndarray, float]:
    """Decode the frames ``indices`` (0-based, in decode order) of ``path``.

    Returns ``(frames, fps)``: uint8 ``len(indices)×H×W×3`` RGB in the order asked (repeats
    allowed) and the stream's average frame rate. A frame's index is its presentation time × fps,
    so variable start offsets are handled; the reader seeks to the keyframe before the first
    index and decodes forward.
    """
    av = _require_av()
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"video {str(p)!r} does not exist")
    if len(indices) == 0:
        raise ValueError(f"no frame indices asked from {str(p)!r}")
    wanted = sorted({int(i) for i in indices})
    if wanted[0] < 0:
        raise ValueError(f"negative frame index {wanted[0]} asked from {str(p)!r}")
    got: dict[int, np.ndarray] = {}
    try:
        with av.open(str(p)) as container:
            if not container.streams.video:
                raise ImageReadError(p, "no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            if not rate:
                raise ImageReadError(p, "video stream has no frame rate")
            fps = float(rate)
            tb = float(stream.time_base)
            start = int(stream.start_time or 0)

            def decode_from(seek_pts: int) -> int | None:
                """Decode from the keyframe before ``seek_pts``; the first index seen."""
                container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
                first_seen = None
                for count, frame in enumerate(container.decode(stream)):
                    pts = frame.pts if frame.pts is not None else None
                    idx = round((pts - start) * tb * fps) if pts is not None else count
                    if first_seen is None:
                        first_seen = idx
                        if idx > wanted[0]:
                            return first_seen  # seek overshot: caller restarts from 0
                    if idx in wanted_set and idx not in got:
                        got[idx] = frame.to_ndarray(format="rgb24")
                    if idx >= wanted[-1]:
                        break
                return first_seen

            wanted_set = set(wanted)
            target = start + int(wanted[0] / fps / tb)
            first = decode_from(target)
            if first is not None and first > wanted[0] and target != start:
                got.clear()
                decode_from(start)
    except (ImageReadError, FileNotFoundError):
        raise
    except Exception as exc:  # av.error.* for corrupt containers/streams
        raise ImageReadError(p, f"video cannot be decoded ({type(exc).__name__}: {exc})") from exc
    missing = [i for i in wanted if i not in got]
    if missing:
        raise ImageReadError(
            p, f"frame(s) {missing[:5]}{'...' if len(missing) > 5 else ''} not in the video "
            f"(decoded up to index {max(got) if got else 'none'})"
        )
    return np.stack([got[int(i)] for i in indices]), fps


def _image_file_rgb(path: Path) -> np.ndarray:
    """H×W×3 uint8 RGB of a frame image file (grey and palette images are converted)."""
    from PIL import Image, UnidentifiedImageError

    if not path.exists():
        raise FileNotFoundError(f"frame {str(path)!r} does not exist")
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageReadError(path, f"not a readable image ({exc})") from exc


class VideoFrameDataset(ManifestDataset):
    """Frames or clips from videos or frame folders, one manifest row per sample.

    Manifest columns: ``id``, ``patient_id`` and ``video_id`` (the video), ``frame_index`` and
    ``timestamp`` (an int/float for a frame, a list for a clip), ``fps`` (source video), either
    ``video_path`` (decoded with PyAV) or ``frame_paths`` (list of image files), ``label`` (int or
    list of ints), optionally ``tools`` (multi-hot list, or list of lists;
    NaN = not annotated at that frame) and ``clip`` (bool).
    """

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None = None,
        classes: Sequence[str] | None = None,
        tool_classes: Sequence[str] | None = None,
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        cols = ["video_path"] if "video_path" in manifest.columns else []
        cols += ["frame_paths"] if "frame_paths" in manifest.columns else []
        super().__init__(
            manifest, root=root, path_columns=cols, classes=classes, transform=transform, name=name
        )
        self.tool_classes = list(tool_classes) if tool_classes is not None else None

    @property
    def labels_only(self) -> bool:
        """The older name of ``not self.pixels`` (labels and frame positions only)."""
        return not self.pixels

    @labels_only.setter
    def labels_only(self, value: bool) -> None:
        self.pixels = not value

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        clip = bool(row.get("clip", False))
        indices = list(row["frame_index"]) if clip else [int(row["frame_index"])]
        video_path = row.get("video_path")
        if not self.pixels:  # stored per-frame predictions: labels and positions only, 3×1×1 zeros
            frames = np.zeros((len(indices), 1, 1, 3), dtype=np.uint8)
            where = str(self.resolve(video_path)) if isinstance(video_path, str) and video_path else ""
        elif isinstance(video_path, str) and video_path:
            path = self.resolve(video_path)
            frames, _ = read_video_frames(path, indices)
            where = str(path)
        else:
            paths = [self.resolve(f) for f in row["frame_paths"]]
            frames = np.stack([_image_file_rgb(f) for f in paths])
            if len({f.shape for f in frames}) > 1:
                raise ImageReadError(paths[0], "frames of one clip have different sizes")
            where = str(paths[0])
        image = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float() / 255.0
        sample: dict[str, Any] = {"id": str(row["id"])}
        meta = {
            **self.meta_for(row),
            "video_id": str(row["video_id"]),
            "frame_index": indices if clip else indices[0],
            "timestamp": list(row["timestamp"]) if clip else float(row["timestamp"]),
            "fps": float(row["fps"]),
            "path": where,
        }
        if clip:
            sample["image"] = image
            sample["label"] = torch.as_tensor(list(row["label"]), dtype=torch.long)
        else:
            sample["image"] = image[0]
            sample["label"] = int(row["label"])
        tools = row.get("tools")
        if tools is not None and not (isinstance(tools, float) and pd.isna(tools)):
            sample["tools"] = torch.as_tensor(np.asarray(tools, dtype=np.float32))
        sample["meta"] = meta
        return sample


def frames_to_rows(
    frames: pd.DataFrame,
    *,
    video_id: str,
    clip_length: int | None,
    clip_stride: int | None,
    extra: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Manifest rows of one video from its per-frame table (columns ``frame_index``,
    ``timestamp``, ``label``, optional ``tools`` / ``frame_path``) in temporal order."""
    frames = frames.reset_index(drop=True)
    has_tools = "tools" in frames.columns
    has_paths = "frame_path" in frames.columns
    rows: list[dict[str, Any]] = []
    if not clip_length:
        for r in frames.itertuples(index=False):
            row = {
                "id": f"{video_id}_{int(r.frame_index):06d}",
                "video_id": video_id,
                "patient_id": video_id,
                "frame_index": int(r.frame_index),
                "timestamp": float(r.timestamp),
                "label": int(r.label),
                **extra,
            }
            if has_tools:
                row["tools"] = r.tools
            if has_paths:
                row["frame_paths"] = [r.frame_path]
            rows.append(row)
        return rows
    stride = clip_stride or clip_length
    n = len(frames)
    for start in range(0, n - clip_length + 1, stride):
        window = frames.iloc[start : start + clip_length]
        row = {
            "id": f"{video_id}_{int(window['frame_index'].iat[0]):06d}_clip{clip_length}",
            "video_id": video_id,
            "patient_id": video_id,
            "frame_index": [int(v) for v in window["frame_index"]],
            "timestamp": [float(v) for v in window["timestamp"]],
            "label": [int(v) for v in window["label"]],
            "clip": True,
            **extra,
        }
        if has_tools:
            row["tools"] = list(window["tools"])
        if has_paths:
            row["frame_paths"] = list(window["frame_path"])
        rows.append(row)
    return rows


def check_clip_options(clip_length: int | None, clip_stride: int | None) -> None:
    if clip_length is not None and int(clip_length) < 1:
        raise ValueError(f"clip_length must be >= 1 or None, got {clip_length}")
    if clip_stride is not None and int(clip_stride) < 1:
        raise ValueError(f"clip_stride must be >= 1 or None, got {clip_stride}")


def frame_step(video_fps: float, fps: float | None, where: str) -> float:
    if fps is None:
        return 1.0
    if fps <= 0 or fps > video_fps:
        raise ValueError(f"{where}: fps must be in (0, {video_fps}], got {fps}")
    return video_fps / fps
