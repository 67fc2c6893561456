"""VQA answers or generated reports from a CSV, Parquet or JSONL file, served through the
generative protocol; every row is checked when the file is loaded (:func:`.checks.checked_answers`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.predictions.checks import (
    ROTATION_ID,
    check_csv_header,
    checked_answers,
    object_rows,
    read_jsonl_objects,
)
from medimg_bench.models.predictions.lookup import _warn_unknown
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

__all__ = ["AnswersFromFile", "ID_COLUMNS", "TEXT_COLUMNS", "looks_like_text_table"]

log = logging.getLogger(__name__)

#: column names that report-generation repositories use for the id and the text, tried in order
ID_COLUMNS = ("id", "dicom_id", "study_id", "image_id", "sample_id", "uid", "question_id")
TEXT_COLUMNS = ("text", "report", "prediction", "generated", "pred", "answer", "findings", "output")

CIRCULAR_REFUSAL = (
    "task.options.circular=true, but stored answers cannot be rotated: CircularEval asks the model "
    "again with the options in every rotation, and a file holds what the model said once. Store one "
    "answer per rotation (ids '<id>#rot<k>', k = 1 .. n-1, the options listed from the (k+1)-th "
    "original option on) or set task.options.circular=false")


def _read_table(path: Path) -> Any:
    """A CSV, Parquet or JSONL file as a DataFrame (CSV: strings, blanks kept as ``""``)."""
    import pandas as pd

    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if path.suffix in (".jsonl", ".json"):
        return pd.DataFrame([rec for _, rec in read_jsonl_objects(path)])
    raise ValueError(f"predictions {str(path)!r}: not a .csv, .parquet or .jsonl file")


def _pick(columns: Sequence[str], given: str | None, candidates: Sequence[str], what: str, path: Path) -> str:
    if given:
        if given not in columns:
            raise ValueError(f"predictions {str(path)!r}: no {what} column {given!r}; columns are {list(columns)}")
        return given
    found = next((c for c in candidates if c in columns), None)
    if found is None:
        raise ValueError(f"predictions {str(path)!r}: no {what} column found (tried {list(candidates)}); "
                         f"columns are {list(columns)}; set model.options.{what}_column")
    return found


def looks_like_text_table(path: Path) -> bool:
    """True when a table has an id column and a text column by the names above (a CSV is read
    by its header only)."""
    import pandas as pd

    try:
        cols = list(pd.read_csv(path, nrows=0).columns) if path.suffix == ".csv" else list(_read_table(path).columns)
    except (OSError, ValueError):
        return False
    return any(c in cols for c in ID_COLUMNS) and any(c in cols for c in TEXT_COLUMNS)


def _answer_rows(path: Path, id_column: str | None, text_column: str | None
                 ) -> tuple[list[tuple[int, Any, Any]], str, str, str]:
    """``(rows as (line, id, text), "line" or "row", id column, text column)``, values as stored:
    JSONL and CSV rows by file line (a CSV's header is line 1), Parquet rows by index."""
    if path.suffix in (".jsonl", ".json"):
        objects = read_jsonl_objects(path)
        if not objects:
            raise ValueError(f"predictions {str(path)!r}: no answers in the file")
        keys = list(dict.fromkeys(k for _, rec in objects for k in rec))
        id_col = _pick(keys, id_column, ID_COLUMNS, "id", path)
        text_col = _pick(keys, text_column, TEXT_COLUMNS, "text", path)
        return object_rows(objects, path, id_column=id_col, text_column=text_col), "line", id_col, text_col
    if path.suffix == ".csv":
        check_csv_header(path)
    table = _read_table(path)
    id_col = _pick(list(table.columns), id_column, ID_COLUMNS, "id", path)
    text_col = _pick(list(table.columns), text_column, TEXT_COLUMNS, "text", path)
    first, word = (2, "line") if path.suffix == ".csv" else (0, "row")
    ids = [None if _missing(v) else v for v in table[id_col].tolist()]
    texts = [None if _missing(v) else v for v in table[text_col].tolist()]
    return [(first + i, a, t) for i, (a, t) in enumerate(zip(ids, texts))], word, id_col, text_col


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)  # Parquet null / NaN


class AnswersFromFile(GenerativeAdapter):
    """Answers or generated reports (text) by sample id from a CSV, Parquet or JSONL file, served
    as generated responses. The id and text columns are found by the names report-generation
    repositories use (:data:`ID_COLUMNS`, :data:`TEXT_COLUMNS`: ``dicom_id,report``,
    ``study_id,report``, ``id,text``...) unless given. Every row is checked (a refusal names the
    line): the id a non-empty string or integer given once, the text a string that is not blank.

    ``on_blank``: ``error`` (default) refuses a null, empty or ``"None"``-like answer; ``keep``
    scores it as the text it is (null as empty). ``circular``: the task runs CircularEval;
    refused unless the file holds answers for the rotations (ids ``<id>#rot<k>``)."""

    backend = "predictions"

    def __init__(self, path: Path, *, text_column: str | None = None, id_column: str | None = None,
                 circular: bool = False, on_blank: str = "error") -> None:
        super().__init__(name="predictions")
        self.source = path
        rows, word, self.id_column, self.text_column = _answer_rows(path, id_column, text_column)
        self.answers: dict[str, str] = checked_answers(rows, path, on_blank=on_blank, line_word=word)
        self.rotated = {sid for sid in self.answers if "#rot" in sid and ROTATION_ID.match(sid)}
        if circular and not self.rotated:
            raise ValueError(f"predictions {str(path)!r}: {CIRCULAR_REFUSAL}")
        if self.rotated and not circular:
            log.warning("predictions %s: %d answer(s) for option rotations (<id>#rot<k>) are not used: "
                        "task.options.circular is false", path, len(self.rotated))

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        return _warn_unknown(self._stored_ids(), ids, self.source)

    def _stored_ids(self) -> set[str]:
        return set(self.answers) - self.rotated | {ROTATION_ID.match(sid)["id"] for sid in self.rotated}

    def unknown_ids(self, ids: Sequence[Any]) -> list[str]:
        """The stored ids the dataset (``ids``) does not have, sorted: counted as exclusions."""
        return sorted(self._stored_ids() - {str(i) for i in ids})

    def bind_dataset(self, dataset: Any) -> None:
        """Stored answers need no pixels: a dataset that can skip its images does."""
        if hasattr(dataset, "text_only"):
            dataset.text_only = True

    def identity(self) -> dict[str, Any]:
        from medimg_bench.models.predictions.lookup import file_digests

        return {"source": str(self.source), "files": file_digests(self.source)}

    def _generate(self, requests: Sequence[Any]) -> list[GenerationResponse]:
        out = []
        for r in requests:
            sid = r.sample_id
            if sid in self.answers:
                out.append(GenerationResponse(text=self.answers[sid], prompt=r.user))
                continue
            m = ROTATION_ID.match(sid)
            if m and not self.rotated:
                error = f"sample {m['id']!r}: {CIRCULAR_REFUSAL} ({str(self.source)!r})"
            elif m:
                error = f"no stored answer for rotation {m['k']} of sample {m['id']!r} in {str(self.source)!r}"
            else:
                error = f"no prediction for sample {sid!r} in {str(self.source)!r}"
            out.append(GenerationResponse(error=error, prompt=r.user))
        return out
