"""Per-frame phase predictions from a CSV or Parquet table (``task=phase_recognition``).

One row per frame: ``video`` (the loader's ``video_id``: ``video41`` for Cholec80, ``video_03``
for PitVis), the frame's position as ``frame`` (the loader's ``frame_index``: the source video's
frame number, e.g. 25 = second 1 of a 25 fps Cholec80 video) or ``time`` (seconds from the
video's start, matched to the millisecond: PitVis's ``int_time``), and the prediction as either
``phase`` (a class name or a 0-based class index) or one score column per class (named as the
dataset's classes: matched by name; else picked with ``classes``, else every other column in
file order). A frame the table lacks fails that sample with
the video, position and file named; the run then reads no pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.models.predictions.lookup import _Lookup

__all__ = ["FramePredictions", "looks_like_frame_table"]


def phase_txt_files(root: Path) -> list[Path]:
    """``<video>-phase.txt`` files directly in ``root`` (the Cholec80 MATLAB evaluation's layout)."""
    return sorted(root.glob("*-phase.txt")) if root.is_dir() else []


def read_phase_txt_folder(root: Path) -> tuple[pd.DataFrame, list[str]]:
    """The ``video, frame, phase`` rows of every ``<video>-phase.txt`` in ``root`` (tab- or
    space-separated ``frame phase`` lines, an optional header line as ``Frame\tPhase``), and
    where each row comes from (``file line N``)."""
    rows: list[tuple[str, str, str]] = []
    where: list[str] = []
    for f in phase_txt_files(root):
        video = f.name[: -len("-phase.txt")]
        for n, line in enumerate(f.read_text().splitlines(), start=1):
            parts = line.split()
            if not parts or (n == 1 and not parts[0].lstrip("-").replace(".", "", 1).isdigit()):
                continue  # blank line, or the header
            if len(parts) != 2:
                raise ValueError(f"predictions {str(f)!r} line {n}: expected 'frame phase', got {line!r}")
            rows.append((video, parts[0], parts[1]))
            where.append(f"{f.name} line {n}")
    if not rows:
        raise ValueError(f"predictions {str(root)!r}: no frame rows in its *-phase.txt files")
    return pd.DataFrame(rows, columns=["video", "frame", "phase"]), where


def looks_like_frame_table(path: Path) -> bool:
    """True for a table with a ``video`` column and a ``frame`` or ``time`` column."""
    cols = set(pd.read_parquet(path).columns if path.suffix == ".parquet" else pd.read_csv(path, nrows=0).columns)
    return "video" in cols and bool(cols & {"frame", "time"})


def _key(video: str, pos: float) -> tuple[str, int]:
    return video, int(round(pos))


class FramePredictions(_Lookup):
    """``predict(batch)`` -> ``{"probs"}`` (score columns) or ``{"labels"}`` (a ``phase`` column),
    looked up by ``meta['video_id']`` and ``frame_index`` (or ``timestamp``)."""

    task = "phase_recognition"

    def __init__(self, path: Path, *, classes: Sequence[str] | None = None, num_classes: int | None = None) -> None:
        super().__init__(path)
        if path.is_dir():  # <video>-phase.txt files, as the MATLAB evaluation reads them
            table, rows = read_phase_txt_folder(path)
            self._row = rows.__getitem__
        else:
            table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype={"video": str})
            self._row = lambda i: f"row {i + 2}"
        where = f"predictions {str(path)!r}"
        by = "frame" if "frame" in table.columns else "time"
        if "video" not in table.columns or by not in table.columns:
            raise ValueError(f"{where}: per-frame predictions need a 'video' and a 'frame' or 'time' column; "
                             f"columns are {list(table.columns)}")
        pos = pd.to_numeric(table[by], errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(pos).all():
            raise ValueError(f"{where}: {self._row(int(np.flatnonzero(~np.isfinite(pos))[0]))}: {by} is not a number")
        self.by = by
        scale = 1000.0 if by == "time" else 1.0
        keys = [_key(str(v), p * scale) for v, p in zip(table["video"], pos)]
        if len(set(keys)) != len(keys):
            seen: set[tuple[str, int]] = set()
            dup = next(k for k in keys if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise ValueError(f"{where}: video {dup[0]!r} has two rows at {by} {dup[1] / scale:g}")
        self.classes = list(classes) if classes else None
        self._where, self._num_classes, self._keys = where, num_classes, keys
        self._pending: pd.Series | None = None
        if "phase" in table.columns:
            self.kind = "labels"
            numeric = table["phase"].astype(str).str.strip().str.lstrip("-").str.isdigit().all()
            if not (self.classes or numeric):  # names: resolved against the dataset's classes
                self._pending, self.scores, self._scale = table["phase"], {}, scale
                return
            values = self._phase_labels(table["phase"], where, num_classes)
        else:
            cols = self.classes or [c for c in table.columns if c not in ("video", "frame", "time")]
            missing = [c for c in cols if c not in table.columns]
            if missing:
                raise ValueError(f"{where}: no column(s) {missing} for the classes (and no 'phase' column)")
            if num_classes is not None and len(cols) != num_classes:
                raise ValueError(f"{where}: {len(cols)} score columns {cols} but the dataset has {num_classes} "
                                 "classes; set model.options.classes or give a 'phase' column")
            values = table[cols].to_numpy(dtype=np.float32)
            if not np.isfinite(values).all():
                raise ValueError(f"{where}: {self._row(int(np.flatnonzero(~np.isfinite(values).all(1))[0]))}: "
                                 "NaN or inf score")
            self.kind = "probs"
            self._score_table = table.drop(columns=[c for c in ("video", "frame", "time") if c in table.columns])
        self.scores = dict(zip(keys, values))
        self._scale = scale

    def _phase_labels(self, column: pd.Series, where: str, num_classes: int | None) -> np.ndarray:
        names = {str(c): i for i, c in enumerate(self.classes or [])}
        out = np.empty(len(column), dtype=np.int64)
        for r, v in enumerate(column):
            s = str(v).strip()
            if s in names:
                out[r] = names[s]
            elif s.lstrip("-").isdigit() and (num_classes is None or 0 <= int(s) < num_classes):
                out[r] = int(s)
            else:
                known = f"a class name {list(names)[:8]} or " if names else ""
                raise ValueError(f"{where}: {self._row(r)}: phase {v!r} is not {known}an index in "
                                 f"[0, {num_classes if num_classes is not None else 'K'})")
        return out

    def bind_dataset(self, dataset: Any) -> None:
        """Phases given by name resolved against ``dataset.classes``; score columns named as all
        the dataset's classes taken in its order (else file order, or ``classes``); the dataset
        skips decoding frames."""
        names = [str(c) for c in (getattr(dataset, "classes", None) or [])]
        if self.kind == "probs" and self.classes is None and names and set(names) <= set(self._score_table.columns):
            values = self._score_table[names].to_numpy(dtype=np.float32)
            self.scores, self.classes = dict(zip(self._keys, values)), names
        if self._pending is not None:
            self.classes = list(getattr(dataset, "classes", None) or [])
            n = self._num_classes or len(self.classes) or None
            self.scores = dict(zip(self._keys, self._phase_labels(self._pending, self._where, n)))
            self._pending = None
        if hasattr(dataset, "labels_only"):
            dataset.labels_only = True

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Frames are matched by video and position, not id: nothing to check by id."""
        return 0

    def _lookup(self, meta: Any, sid: str) -> Any:
        video = str(meta.get("video_id"))
        pos = meta.get("frame_index") if self.by == "frame" else meta.get("timestamp")
        if pos is None or isinstance(pos, (list, tuple)):
            raise ValueError(f"sample {sid!r}: no single {'frame_index' if self.by == 'frame' else 'timestamp'} in its meta")
        key = _key(video, float(pos) * self._scale)
        if key not in self.scores:
            known = sorted({v for v, _ in self.scores})
            hint = "" if video in known else f" (the file's videos: {known[:6]})"
            raise KeyError(f"no prediction for video {video!r} at {self.by} {float(pos):g} (sample {sid!r}) "
                           f"in {str(self.source)!r}{hint}")
        return self.scores[key]

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        if self._pending is not None:
            raise ValueError(f"{self._where}: phases given by name but no class list: set model.options.classes")
        meta = batch.get("meta") or [{}] * len(batch["id"])
        rows = [self._lookup(m, str(sid)) for m, sid in zip(meta, batch["id"])]
        if self.kind == "labels":
            return {"labels": torch.as_tensor(np.asarray(rows, dtype=np.int64), device=self.device)}
        return {"probs": torch.from_numpy(np.stack(rows)).to(self.device)}
