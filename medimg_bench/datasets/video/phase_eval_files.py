"""The ``phase_eval_files`` dataset: the per-frame phase files a MATLAB phase evaluation reads.

The layout of the Cholec80 / M2CAI16 evaluation scripts (``Main.m`` + ``ReadPhaseLabel.m``): a
folder of ground-truth ``<video>-phase.txt`` files (``frame<TAB or space>phase`` per line) and a
folder of predictions named alike (read by ``model=predictions``). Frames are samples with labels
and positions only (no pixels: ``dataset.pixels`` false), so ``task=phase_recognition`` scores the
predictions per video as the challenge does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.columns import index_base as index_base_of
from medimg_bench.datasets.video.cholec80 import CHOLEC80_FPS, CHOLEC80_PHASES
from medimg_bench.datasets.video.frames import VideoFrameDataset, frames_to_rows
from medimg_bench.registry import register_dataset

__all__ = ["FIRST_LINE_RULES", "phase_eval_files", "read_phase_file"]

#: ``auto``: the first line is a header when its first field is not a number; ``skip``: always
#: dropped, as ``ReadPhaseLabel.m`` does (a file without a header loses its first frame);
#: ``keep``: always data.
FIRST_LINE_RULES = ("auto", "skip", "keep")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_lines(path: Path, first_line: str) -> tuple[np.ndarray, list[str], list[int]]:
    """Frames, raw phase fields and their line numbers of one file (frames checked)."""
    if first_line not in FIRST_LINE_RULES:
        raise ValueError(f"phase_eval_files: first_line must be one of {FIRST_LINE_RULES}, got {first_line!r}")
    frames: list[int] = []
    phases: list[str] = []
    lines: list[int] = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if n == 1 and (first_line == "skip" or (first_line == "auto" and parts and not _is_number(parts[0]))):
            continue
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].lstrip("-").isdigit():
            raise ValueError(f"{str(path)!r} line {n}: expected 'frame phase' with an integer frame, got {line!r}")
        frames.append(int(parts[0]))
        phases.append(parts[1])
        lines.append(n)
    if not frames:
        raise ValueError(f"{str(path)!r}: no frame lines")
    f = np.asarray(frames)
    bad = np.flatnonzero(np.diff(f) <= 0)
    if bad.size:
        raise ValueError(f"{str(path)!r}: frame {f[bad[0] + 1]} follows frame {f[bad[0]]} (frames must increase)")
    return f, phases, lines


def _numbers(phases: list[str], names: dict[str, int]) -> list[int]:
    return [int(p) for p in phases if p not in names and p.lstrip("-").isdigit()]


def _labels(path: Path, phases: list[str], lines: list[int], names: dict[str, int], base: int) -> np.ndarray:
    k = len(names)
    out = np.empty(len(phases), dtype=np.int64)
    for i, (value, n) in enumerate(zip(phases, lines)):
        if value in names:
            out[i] = names[value]
        elif value.lstrip("-").isdigit() and base <= int(value) < k + base:
            out[i] = int(value) - base
        else:
            raise ValueError(f"{str(path)!r} line {n}: phase {value!r} is neither a phase name {list(names)[:7]} "
                             f"nor a number in {base}..{k - 1 + base}")
    return out


def read_phase_file(path: Path, *, classes: Sequence[str], first_line: str = "auto",
                    index_base: int | str = "auto") -> pd.DataFrame:
    """``frame_index`` / ``label`` (0-based) of one ``<video>-phase.txt`` (named phases, or
    numbers counting from ``index_base``: 0, 1 or ``auto`` from their values; any frame step).
    Raises ``ValueError`` naming the file and line of a bad row."""
    names = {str(c): i for i, c in enumerate(classes)}
    frames, phases, lines = _read_lines(path, first_line)
    base = index_base_of(_numbers(phases, names), len(names), where=str(path), given=index_base,
                         option="index_base")
    return pd.DataFrame({"frame_index": frames, "label": _labels(path, phases, lines, names, base)})


def _video_files(gt: Path, videos: Sequence[str | int] | None) -> list[Path]:
    files = sorted(gt.glob("*-phase.txt"))
    if not files:
        raise FileNotFoundError(f"phase_eval_files: no <video>-phase.txt files in {str(gt)!r}")
    if videos is None:
        return files
    want = [f"video{v}" if isinstance(v, int) else str(v) for v in videos]
    have = {f.name[: -len("-phase.txt")]: f for f in files}
    missing = [v for v in want if v not in have]
    if missing:
        raise FileNotFoundError(f"phase_eval_files: no {[f'{v}-phase.txt' for v in missing]} in {str(gt)!r}")
    return [have[v] for v in want]


@register_dataset("phase_eval_files", tags=("video", "surgical", "phase", "classification"))
def phase_eval_files(
    root: str | Path,
    split: str = "test",
    *,
    gt_dir: str = "gt-phase",
    videos: Sequence[str | int] | None = None,
    first_line: str = "auto",
    classes: Sequence[str] | None = None,
    index_base: int | str = "auto",
    video_fps: float = CHOLEC80_FPS,
    transform: Callable[[dict], dict] | None = None,
) -> VideoFrameDataset:
    """Frames of every ``<root>/<gt_dir>/<video>-phase.txt`` (or of ``videos``: ids or Cholec80
    numbers), one sample per line, labels only.

    ``first_line``: see :data:`FIRST_LINE_RULES` (``skip`` reproduces ``ReadPhaseLabel.m`` on files
    without a header). Phases: names from ``classes`` (default Cholec80's seven) or numbers
    counting from ``index_base`` (0, 1, or ``auto``: decided over all files by their values, an
    ambiguous set refused). ``frame_index`` is the file's frame number, ``timestamp`` = frame / ``video_fps``
    (the source video's rate, 25 for Cholec80), so a metric's ``fps: null`` finds the rate of the
    evaluated frames from the file's step (every 25th frame: 1 fps). ``split`` is a tag.
    """
    root = Path(root)
    names = list(classes) if classes else list(CHOLEC80_PHASES)
    if not video_fps > 0:
        raise ValueError(f"phase_eval_files: video_fps must be > 0, got {video_fps}")
    files = _video_files(root / gt_dir, videos)
    raw = [_read_lines(f, first_line) for f in files]
    lookup = {str(c): i for i, c in enumerate(names)}
    base = index_base_of([v for _, phases, _ in raw for v in _numbers(phases, lookup)], len(names),
                         where=f"phase_eval_files: {str(root / gt_dir)!r}", given=index_base,
                         option="dataset.options.index_base")
    rows: list[dict[str, Any]] = []
    for f, (frames, phases, lines) in zip(files, raw):
        table = pd.DataFrame({"frame_index": frames, "label": _labels(f, phases, lines, lookup, base)})
        table["timestamp"] = table["frame_index"] / float(video_fps)
        extra = {"fps": float(video_fps), "split": split, "video_path": f"{gt_dir}/{f.name}"}
        rows += frames_to_rows(table, video_id=f.name[: -len("-phase.txt")], clip_length=None,
                                clip_stride=None, extra=extra)
    ds = VideoFrameDataset(pd.DataFrame(rows), root=root, classes=names, transform=transform,
                           name="phase_eval_files")
    ds.skip_pixels()  # the files hold labels, no pixels
    return ds
