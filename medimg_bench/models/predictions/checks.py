"""Every stored prediction is checked before it is scored: answers (types, blanks, duplicates,
rotations), class scores (numbers, probabilities vs logits, multi-class sums) and label maps
(integer values). A refusal is a ``ValueError`` naming the file and the line (or row, column,
sample) — raised when the predictions are loaded, never after the evaluation."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "BLANK_TEXTS", "ROTATION_ID", "SUM_TOLERANCE", "check_csv_header", "check_label_values",
    "check_probabilities", "checked_answers", "object_rows", "read_answer_lines", "read_jsonl_objects",
    "score_matrix", "scores_to_probs",
]

#: answers that are a missing value written as text (``str(None)``, pandas' NaN, JSON null)
BLANK_TEXTS = frozenset({"", "none", "null", "nan", "na", "n/a", "undefined"})
_LONGEST_BLANK = max(map(len, BLANK_TEXTS))
#: ``<sample id>#rot<k>``: the stored answer for rotation ``k`` of a multiple-choice question
ROTATION_ID = re.compile(r"^(?P<id>.+)#rot(?P<k>\d+)$")
#: multi-class probabilities must sum to 1 within this (as the calibration metrics require)
SUM_TOLERANCE = 1e-3


def _where(path: Path) -> str:
    return f"predictions {str(path)!r}"


# -- answers ----------------------------------------------------------------------------------------
def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        raise ValueError(f"key(s) {sorted({k for k in keys if keys.count(k) > 1})} given twice in one object")
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_object_pairs)  # one decoder: json.loads makes one per call


def read_jsonl_objects(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each non-blank line of a JSONL file. Refused, naming the
    line: invalid UTF-8 or JSON, a line that is not an object, a key given twice in one object."""
    try:
        content = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise ValueError(f"{_where(path)} line {line}: not UTF-8 text ({exc.reason})") from exc
    out = []
    for n, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = _DECODER.decode(line)
        except ValueError as exc:  # JSONDecodeError is a ValueError, and so is a repeated key
            raise ValueError(f"{_where(path)} line {n}: not a JSON object ({exc})") from exc
        if not isinstance(rec, dict):
            raise ValueError(f"{_where(path)} line {n}: expected a JSON object, got {type(rec).__name__}")
        out.append((n, rec))
    return out


def object_rows(objects: Sequence[tuple[int, dict[str, Any]]], path: Path, *, id_column: str,
                text_column: str) -> list[tuple[int, Any, Any]]:
    """``(line, id, text)`` of each object, as stored; an object without either key is refused
    naming its line."""
    rows = []
    for n, rec in objects:
        absent = [k for k in (id_column, text_column) if k not in rec]
        if absent:
            raise ValueError(f"{_where(path)} line {n}: no {absent} key(s) (keys: {sorted(rec)}); "
                             "set model.options.id_column / text_column")
        rows.append((n, rec[id_column], rec[text_column]))
    return rows


def read_answer_lines(path: Path, *, id_column: str = "id", text_column: str = "text"
                      ) -> list[tuple[int, Any, Any]]:
    """``(line number, id, text)`` of each non-blank line of a JSONL answers file, as stored (no
    conversion): :func:`read_jsonl_objects` then :func:`object_rows`."""
    return object_rows(read_jsonl_objects(path), path, id_column=id_column, text_column=text_column)


def check_csv_header(path: Path) -> None:
    """Refuse a CSV header that names a column twice (pandas would read the second as ``name.1``)."""
    import csv

    with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        header = next(csv.reader(f), [])
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise ValueError(f"{_where(path)} line 1: column(s) {dup} named twice; columns are {header}")


def _checked_id(value: Any, where: Callable[[], str]) -> str:
    if type(value) is str:  # the common case first
        sid = value
    elif isinstance(value, bool) or not isinstance(value, (str, int, np.integer)):
        raise ValueError(f"{where()}: the id must be a string or an integer, got {type(value).__name__} {value!r}")
    else:
        sid = str(value)
    if not sid.strip():
        raise ValueError(f"{where()}: the id is empty")
    return sid


def _checked_text(value: Any, where: Callable[[], str], on_blank: str) -> str:
    if value is None:
        if on_blank == "keep":
            return ""
        raise ValueError(f"{where()}: the answer is null (no answer); write the model's text, or set "
                         "model.options.on_blank=keep to score it as an empty answer")
    if not isinstance(value, str):
        raise ValueError(f"{where()}: the answer must be a string, got {type(value).__name__} {value!r}")
    stripped = value.strip()
    if len(stripped) <= _LONGEST_BLANK and stripped.lower() in BLANK_TEXTS and on_blank != "keep":
        raise ValueError(f"{where()}: the answer {value!r} is blank or a missing value written as text; "
                         "set model.options.on_blank=keep if the model really answered this")
    return value


def checked_answers(rows: Iterable[tuple[int, Any, Any]], path: Path, *, on_blank: str = "error",
                    line_word: str = "line") -> dict[str, str]:
    """``{id: text}`` from ``(line, id, text)`` rows, every row checked: the id a non-empty string
    or integer, the text a string that is not blank (``on_blank="keep"`` keeps blanks and null as
    they are), no id twice (``<id>#rot0`` is ``<id>``). Errors name the file and the line."""
    if on_blank not in ("error", "keep"):
        raise ValueError(f"{_where(path)}: on_blank must be 'error' or 'keep', got {on_blank!r}")
    answers: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for n, raw_id, raw_text in rows:
        def where(n: int = n) -> str:
            return f"{_where(path)} {line_word} {n}"

        sid = _checked_id(raw_id, where)
        if "#rot" in sid and (m := ROTATION_ID.match(sid)) and int(m["k"]) == 0:
            sid = m["id"]
        text = _checked_text(raw_text, where, on_blank)
        if sid in answers:
            raise ValueError(f"{where()}: duplicate id {sid!r} (first on {line_word} {first_line[sid]}); "
                             "one answer per id")
        answers[sid], first_line[sid] = text, n
    if not answers:
        raise ValueError(f"{_where(path)}: no answers in the file")
    return answers


# -- class scores ------------------------------------------------------------------------------------
def _row_name(i: int, ids: Sequence[str], lines: Sequence[int] | None) -> str:
    return f"line {lines[i]} (id {ids[i]!r})" if lines is not None else f"row {i} (id {ids[i]!r})"


def score_matrix(table: Any, columns: Sequence[str], ids: Sequence[str], path: Path, *,
                 lines: Sequence[int] | None = None) -> np.ndarray:
    """The score columns as a ``float32`` matrix (what the metrics see), refused naming the file,
    the column and the row: a value that is not a number, a blank, NaN or an infinity."""
    import pandas as pd

    out = np.empty((len(table), len(columns)), dtype=np.float32)
    for j, col in enumerate(columns):
        raw = table[col]
        if pd.api.types.is_bool_dtype(raw):
            raise ValueError(f"{_where(path)}: column {col!r} holds true/false values, not scores")
        numeric = pd.api.types.is_numeric_dtype(raw)
        num = raw if numeric else pd.to_numeric(raw, errors="coerce")
        values = num.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            v = raw.iloc[i]
            what = "blank" if pd.isna(v) else repr(float(v)) if numeric else repr(str(v))
            raise ValueError(f"{_where(path)} {_row_name(i, ids, lines)}, column {col!r}: {what} is not a "
                             f"finite number ({int(bad.sum())} such value(s) in the column)")
        out[:, j] = values
    return out


def check_probabilities(values: np.ndarray, columns: Sequence[str], ids: Sequence[str], path: Path, *,
                        multilabel: bool | None, lines: Sequence[int] | None = None) -> None:
    """Refuse scores that are not probabilities: a value outside [0, 1] (logits, percentages),
    or, for a multi-class task, a row that does not sum to 1 (within :data:`SUM_TOLERANCE`)."""
    out = (values < 0) | (values > 1)
    if out.any():
        i, j = (int(x[0]) for x in np.nonzero(out))
        raise ValueError(
            f"{_where(path)} {_row_name(i, ids, lines)}, column {columns[j]!r}: {float(values[i, j])!r} is "
            f"outside [0, 1] ({int(out.sum())} value(s) in all); scores are read as probabilities: if they "
            "are logits set model.options.scores=logits (sigmoid for multi-label tasks, softmax for multi-class)")
    if multilabel is False and values.shape[1] > 1:
        total = values.astype(np.float64).sum(1)
        off = np.abs(total - 1) > SUM_TOLERANCE
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise ValueError(
                f"{_where(path)} {_row_name(i, ids, lines)}: the class probabilities sum to {total[i]:.6g} "
                f"({int(off.sum())} row(s) off by more than {SUM_TOLERANCE}); a multi-class task needs "
                "probabilities that sum to 1, or model.options.scores=logits (softmax)")


def scores_to_probs(values: np.ndarray, *, multilabel: bool) -> np.ndarray:
    """Probabilities from logits: sigmoid per class (multi-label) or softmax per row (multi-class)."""
    x = values.astype(np.float64)
    if multilabel:
        p = np.empty_like(x)
        pos = x >= 0  # two branches: neither overflows
        p[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
        e = np.exp(x[~pos])
        p[~pos] = e / (1.0 + e)
    else:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
    return p.astype(np.float32)


# -- label maps ----------------------------------------------------------------------------------------
def check_label_values(array: Any, path: Path | str, *, sample_id: str,
                       num_classes: int | None = None) -> np.ndarray:
    """A label map as ``int64`` by the one mask decoder's rule
    (:func:`medimg_bench.datasets.masks.check_label_map`): refused naming the file and the sample
    when a value is not a whole number (0.6 would otherwise be cast to 0), negative, or, when
    ``num_classes`` is known, not below it."""
    from medimg_bench.datasets.masks import check_label_map

    try:
        return check_label_map(array, path, num_classes=num_classes, what="label map")
    except ValueError as exc:
        raise ValueError(f"{exc} (sample {sample_id!r})") from None
