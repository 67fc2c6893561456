"""Surgical video datasets: Cholec80, PitVis-2023 and generic frame folders.

Every dataset is a manifest with one row per sample. A sample is one frame (``C×H×W``) or a clip
of ``clip_length`` frames (``T×C×H×W``) with per-frame labels. Frames are decoded lazily with
PyAV (optional extra ``video``) or read from frame image files. Pixel values are float32 in
``[0, 1]`` (8-bit RGB divided by 255). ``meta['patient_id']`` is the video id, so patient-level
splits never cut a video; ``meta`` also has ``video_id``, ``frame_index`` (index in the source
video), ``timestamp`` (seconds from the start of the video) and ``fps`` (of the source video).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.io import ImageReadError
from medimg_bench.registry import register_dataset

__all__ = [
    "CHOLEC80_PHASES",
    "CHOLEC80_TOOLS",
    "CHOLEC80_SPLITS",
    "VideoFrameDataset",
    "read_video_frames",
    "cholec80",
    "pitvis",
    "video_frames",
]

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

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        clip = bool(row.get("clip", False))
        indices = list(row["frame_index"]) if clip else [int(row["frame_index"])]
        video_path = row.get("video_path")
        if isinstance(video_path, str) and video_path:
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


def _frames_to_rows(
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


def _check_clip_options(clip_length: int | None, clip_stride: int | None) -> None:
    if clip_length is not None and int(clip_length) < 1:
        raise ValueError(f"clip_length must be >= 1 or None, got {clip_length}")
    if clip_stride is not None and int(clip_stride) < 1:
        raise ValueError(f"clip_stride must be >= 1 or None, got {clip_stride}")


def _frame_step(video_fps: float, fps: float | None, where: str) -> float:
    if fps is None:
        return 1.0
    if fps <= 0 or fps > video_fps:
        raise ValueError(f"{where}: fps must be in (0, {video_fps}], got {fps}")
    return video_fps / fps


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
    _check_clip_options(clip_length, clip_stride)
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
    step = _frame_step(CHOLEC80_FPS, fps, "cholec80")
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
        rows += _frames_to_rows(
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
    _check_clip_options(clip_length, clip_stride)
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
        _read_id_map(root / "map_instruments.csv") if (root / "map_instruments.csv").exists() else {}
    )
    n_inst = num_instruments or max([k for k in inst_map if k > 0], default=19)
    tool_classes = [inst_map.get(i, f"instrument_{i}") for i in range(1, n_inst + 1)]
    rows: list[dict[str, Any]] = []
    for ann in ann_files:
        num = int(re.sub(r"\D", "", ann.stem))
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
        vid = f"video_{num:02d}"
        times = table["int_time"].astype(int).to_numpy()
        tools_rows = []
        for r, (a, b) in enumerate(zip(table["int_instrument1"], table["int_instrument2"])):
            hot = [0.0] * n_inst
            for k in (int(a), int(b)):
                if k > n_inst:
                    raise ValueError(f"pitvis: {str(ann)!r} row {r + 2}: instrument {k} > {n_inst}")
                if k > 0:
                    hot[k - 1] = 1.0
            tools_rows.append(hot)
        frames = pd.DataFrame(
            {
                "timestamp": times.astype(float),
                "label": np.where(table["int_step"].to_numpy() < 0, 0, table["int_step"].to_numpy()),
                "tools": tools_rows,
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
        rows += _frames_to_rows(
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
    _check_clip_options(clip_length, clip_stride)
    csv_path = root / csv
    if not csv_path.exists():
        raise FileNotFoundError(f"video_frames: {str(csv_path)!r} does not exist")
    table = pd.read_csv(csv_path, dtype={video_column: str, frame_column: str})
    for col in (video_column, frame_column, label_column):
        if col not in table.columns:
            raise ValueError(f"video_frames: {str(csv_path)!r} has no column {col!r}")
    table["_line"] = np.arange(len(table)) + 2
    if split is not None and split != "all" and split_column in table.columns:
        table = table[table[split_column].astype(str) == split]
    raw = table[label_column]
    if classes is None:
        if pd.api.types.is_numeric_dtype(raw):
            raise ValueError("video_frames: integer labels need classes=[...] to name them")
        classes = sorted(raw.dropna().astype(str).unique())
    lookup = {c: i for i, c in enumerate(classes)}
    labels, bad = [], []
    for line, value in zip(table["_line"], raw):
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
    table = table.assign(label=labels, frame_path=table[frame_column].astype(str))
    if bad:
        log.warning("video_frames: skipped %d row(s) with unknown labels in %s", len(bad), csv_path)
        table = table[table["label"] >= 0]
    rows: list[dict[str, Any]] = []
    for vid, group in table.groupby(video_column, sort=True):
        group = group.copy()
        if time_column:
            group = group.sort_values(time_column, kind="stable")
            group["timestamp"] = group[time_column].astype(float)
        else:
            group["timestamp"] = np.arange(len(group)) / float(fps)
        group["frame_index"] = np.arange(len(group))
        rows += _frames_to_rows(
            group[["frame_index", "timestamp", "label", "frame_path"]],
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
