"""Per-frame phase predictions from a CSV or Parquet table (``task=phase_recognition``).

One row per frame: the video (column ``video``, ``video_id``...: the loader's ``video_id``,
``video41`` for Cholec80, ``video_03`` for PitVis), the frame's position as ``frame`` (the loader's
``frame_index``: the source video's frame number, e.g. 25 = second 1 of a 25 fps Cholec80 video)
or ``time`` (seconds from the video's start, matched to the millisecond: PitVis's ``int_time``),
and the prediction as either a phase column (``phase``, ``pred_phase``...: a class name or a class
number) or one score column per class. Every column is found by name with the one column matcher
(:mod:`medimg_bench.datasets.columns`): score columns are matched to the dataset's classes by name
in any order, case and score affix (``prob_Preparation``), never by file order unless
``classes`` lists them; class numbers are 0- or 1-based by their values
(:func:`~medimg_bench.datasets.columns.index_base`: ambiguous values are refused naming
``model.options.index_base``). A frame the table lacks fails that sample with the video,
position and file named; the run reads no pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.columns import column_key, index_base, match_class_columns
from medimg_bench.models.predictions.lookup import Lookup, skip_pixels

__all__ = ["FramePredictions", "looks_like_frame_table", "FRAME_COLUMNS"]

#: the names of each positional column, in order of preference (compared up to case and punctuation)
FRAME_COLUMNS: dict[str, tuple[str, ...]] = {
    "video": ("video", "video_id", "video_name", "vid"),
    "frame": ("frame", "frame_index", "frame_idx", "frame_id", "frame_number", "frame_no"),
    "time": ("time", "timestamp", "int_time", "time_s", "seconds"),
    "phase": ("phase", "pred_phase", "phase_pred", "predicted_phase", "phase_prediction", "prediction", "pred"),
}


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


def _named(columns: Sequence[str], role: str) -> list[str]:
    keys = {column_key(n) for n in FRAME_COLUMNS[role]}
    return [c for c in columns if column_key(c) in keys]


def looks_like_frame_table(path: Path) -> bool:
    """True for a table with a video column and a frame or time column (by name)."""
    cols = [str(c) for c in (pd.read_parquet(path).columns if path.suffix == ".parquet"
                             else pd.read_csv(path, nrows=0).columns)]
    return bool(_named(cols, "video")) and bool(_named(cols, "frame") or _named(cols, "time"))


def _frame_columns(columns: Sequence[str], where: str) -> tuple[str, str, str, str | None]:
    """``(video column, position column, "frame" or "time", phase column or None)``; two columns
    that could be the same one are refused listing them."""
    found = {}
    for role in FRAME_COLUMNS:
        hits = _named(columns, role)
        if len(hits) > 1:
            raise ValueError(f"{where}: several {role} columns {hits}: which is meant is ambiguous; "
                             "keep one (or rename the others)")
        found[role] = hits[0] if hits else None
    by = "frame" if found["frame"] else "time"
    if found["video"] is None or found[by] is None:
        raise ValueError(f"{where}: per-frame predictions need a video column ({list(FRAME_COLUMNS['video'])}) and "
                         f"a frame ({list(FRAME_COLUMNS['frame'])}) or time ({list(FRAME_COLUMNS['time'])}) "
                         f"column; columns are {list(columns)}")
    return found["video"], found[by], by, found["phase"]


def _key(video: str, pos: float) -> tuple[str, int]:
    return video, int(round(pos))


def _read_frames(path: Path) -> tuple[pd.DataFrame, Any]:
    """The table and the name of each row for messages (``file line N`` / ``row N``)."""
    if path.is_dir():  # <video>-phase.txt files, as the MATLAB evaluation reads them
        table, rows = read_phase_txt_folder(path)
        return table, rows.__getitem__
    if path.suffix == ".parquet":
        table = pd.read_parquet(path)
    else:
        header = [str(c) for c in pd.read_csv(path, nrows=0).columns]
        table = pd.read_csv(path, dtype={c: str for c in _named(header, "video")})
    table.columns = [str(c) for c in table.columns]
    return table, lambda i: f"row {i + 2}"


class FramePredictions(Lookup):
    """``predict(batch)`` -> ``{"probs"}`` (score columns) or ``{"labels"}`` (a phase column),
    looked up by ``meta['video_id']`` and ``frame_index`` (or ``timestamp``). ``classes``: the
    score columns, in class order (else matched to the dataset's classes by name);
    ``index_base``: ``auto`` (0- or 1-based phase numbers by their values), ``0`` or ``1``."""

    task = "phase_recognition"

    def __init__(self, path: Path, *, classes: Sequence[str] | None = None, num_classes: int | None = None,
                 index_base: int | str = "auto") -> None:
        super().__init__(path)
        table, self._row = _read_frames(path)
        where = f"predictions {str(path)!r}"
        video, position, by, phase = _frame_columns(list(table.columns), where)
        pos = pd.to_numeric(table[position], errors="coerce").to_numpy(dtype=np.float64)
        if not np.isfinite(pos).all():
            raise ValueError(f"{where}: {self._row(int(np.flatnonzero(~np.isfinite(pos))[0]))}: {by} is not a number")
        self.by, self._scale = by, 1000.0 if by == "time" else 1.0
        keys = [_key(str(v), p * self._scale) for v, p in zip(table[video], pos)]
        if len(set(keys)) != len(keys):
            seen: set[tuple[str, int]] = set()
            dup = next(k for k in keys if k in seen or seen.add(k))  # type: ignore[func-returns-value]
            raise ValueError(f"{where}: video {dup[0]!r} has two rows at {by} {dup[1] / self._scale:g}")
        self.given = [str(c) for c in classes] if classes else None
        self.classes: list[str] | None = None
        self._where, self._num_classes, self._keys, self.index_base = where, num_classes, keys, index_base
        self.scores: dict[tuple[str, int], Any] = {}
        self._pending: pd.Series | pd.DataFrame
        if phase is not None:
            self.kind, self._pending = "labels", table[phase]
        else:
            self.kind = "probs"
            self._pending = table.drop(columns=[video, position])
            if self.given:
                absent = [c for c in self.given if c not in self._pending.columns]
                if absent:
                    raise ValueError(f"{where}: no column(s) {absent} for the classes (option model.options.classes) "
                                     f"and no phase column; columns are {list(table.columns)}")
        if self.kind == "probs" and self.given:
            self._resolve(None, num_classes)
        elif self.kind == "labels" and (self.given or (num_classes is not None and self._numeric())):
            self._resolve(self.given, num_classes)

    def _numeric(self) -> bool:
        return bool(self._pending.astype(str).str.strip().str.lstrip("-").str.isdigit().all())

    def _resolve(self, classes: list[str] | None, num_classes: int | None) -> None:
        """Scores or labels per frame, once the class names (or count) are known."""
        if self.kind == "labels":
            self.classes = classes
            self.scores = dict(zip(self._keys, self._phase_labels(self._pending, num_classes)))
            return
        candidates = self.given or [str(c) for c in self._pending.columns]
        if classes is not None:
            cols = match_class_columns(candidates, classes, where=self._where, what="score columns",
                                       positional=self.given is not None,
                                       hint="columns without class names are taken in order only when "
                                            "model.options.classes lists them")
        elif self.given:
            cols = list(self.given)
        else:
            return  # named score columns wait for the dataset's class names
        if num_classes is not None and len(cols) != num_classes:
            raise ValueError(f"{self._where}: {len(cols)} score columns {cols} but the dataset has {num_classes} "
                             "classes; set model.options.classes or give a phase column")
        values = self._pending[cols].to_numpy(dtype=np.float32)
        if not np.isfinite(values).all():
            raise ValueError(f"{self._where}: {self._row(int(np.flatnonzero(~np.isfinite(values).all(1))[0]))}: "
                             "NaN or inf score")
        self.classes = list(classes) if classes is not None else cols
        self.scores = dict(zip(self._keys, values))

    def _phase_labels(self, column: pd.Series, num_classes: int | None) -> np.ndarray:
        """Class indices: a class name, or a class number 0- or 1-based (:func:`index_base`)."""
        names = {str(c): i for i, c in enumerate(self.classes or [])}
        text = [str(v).strip() for v in column]
        numbers = [s for s in text if s not in names]
        k = num_classes if num_classes is not None else (len(names) or None)
        bad = next((r for r, s in enumerate(text) if s not in names and not s.lstrip("-").isdigit()), None)
        if bad is None and numbers and k is None:
            raise ValueError(f"{self._where}: phase numbers but no class count: set model.options.classes "
                             "or num_classes")
        if bad is None and numbers:
            base = index_base((int(s) for s in numbers), k, where=self._where, given=self.index_base)
            bad = next((r for r, s in enumerate(text) if s not in names and not 0 <= int(s) - base < k), None)
        if bad is not None:
            known = f"a class name {list(names)[:8]} or " if names else ""
            raise ValueError(f"{self._where}: {self._row(bad)}: phase {column.iloc[bad]!r} is not {known}a class "
                             f"number ({k if k is not None else 'K'} classes)")
        return np.asarray([names[s] if s in names else int(s) - base for s in text], dtype=np.int64)

    def bind_dataset(self, dataset: Any) -> None:
        """Phases and score columns resolved against ``dataset.classes`` (by name); the dataset
        reads no pixels."""
        names = [str(c) for c in (getattr(dataset, "classes", None) or [])]
        if names:
            self._resolve(names, self._num_classes or len(names))
        skip_pixels(dataset)

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Frames are matched by video and position, not id: nothing to check by id."""
        return 0

    def unknown_ids(self, ids: Sequence[Any]) -> list[str]:
        """Frames are matched by video and position, not id: no stored row is an unknown id (the
        rows are keyed ``(video, frame)``, which no sample id equals)."""
        return []

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
        if not self.scores:
            raise ValueError(f"{self._where}: the class names are not known (phases or score columns by name): "
                             "bind the dataset or set model.options.classes")
        meta = batch.get("meta") or [{}] * len(batch["id"])
        rows = [self._lookup(m, str(sid)) for m, sid in zip(meta, batch["id"])]
        if self.kind == "labels":
            return {"labels": torch.as_tensor(np.asarray(rows, dtype=np.int64), device=self.device)}
        return {"probs": torch.from_numpy(np.stack(rows)).to(self.device)}
