"""Annotation files of the surgical-video datasets in their published layouts, written for the
tests that build Cholec80 / PitVis folders (tests/datasets/test_video.py,
tests/tasks/test_phase_recognition.py, the compare suite's phase_recognition case)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

CHOLEC80_TOOLS = ("Grasper", "Bipolar", "Hook", "Scissors", "Clipper", "Irrigator", "SpecimenBag")
PITVIS_COLUMNS = "int_video,int_time,int_step,int_instrument1,int_instrument2"


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_cholec80_annotations(root: Path, video: int, phases: Sequence[str],
                               tools: Mapping[int, Sequence[int]]) -> None:
    """``phase_annotations/videoNN-phase.txt`` (``phases``: one phase name per 25-fps frame) and
    ``tool_annotations/videoNN-tool.txt`` (``tools``: frame → the seven 0/1 presence flags)."""
    _write_lines(root / "phase_annotations" / f"video{video:02d}-phase.txt",
                 ["Frame\tPhase", *(f"{i}\t{p}" for i, p in enumerate(phases))])
    _write_lines(root / "tool_annotations" / f"video{video:02d}-tool.txt",
                 ["\t".join(("Frame", *CHOLEC80_TOOLS)),
                  *("\t".join(str(v) for v in (frame, *flags)) for frame, flags in tools.items())])


def write_pitvis_annotations(root: Path, video: int, rows: Iterable[tuple[int, int, int, int]]) -> None:
    """``annotations_NN.csv``: a row a second, ``(time, step, instrument 1, instrument 2)``."""
    _write_lines(root / f"annotations_{video:02d}.csv",
                 [PITVIS_COLUMNS, *(f"{video},{t},{s},{i1},{i2}" for t, s, i1, i2 in rows)])


def write_pitvis_map_steps(root: Path, steps: Iterable[tuple[int, str]]) -> None:
    """``map_steps.csv``: step index → step name (several names may share -1)."""
    _write_lines(root / "map_steps.csv", ["int_step,str_step", *(f"{i},{name}" for i, name in steps)])
