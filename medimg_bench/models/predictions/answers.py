"""VQA answers or generated reports from a CSV, Parquet or JSONL file, served through the
generative protocol; the id and text columns found by name with the one column matcher
(:mod:`medimg_bench.datasets.columns`), every row checked when the file is loaded
(:func:`.checks.checked_answers`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.datasets.columns import (
    ID_NAMES,
    NEUTRAL_TEXT_NAMES,
    OUTPUT_TEXT_NAMES,
    column_key,
    equals_reference,
    find_column,
    match_id_column,
    match_text_column,
)
from medimg_bench.models.predictions.checks import (
    ROTATION_ID,
    check_csv_header,
    checked_answers,
    object_rows,
    read_jsonl_objects,
)
from medimg_bench.models.predictions.lookup import match_stored_ids, skip_pixels, warn_unknown
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

__all__ = ["AnswersFromFile", "looks_like_text_table"]

log = logging.getLogger(__name__)

#: the dataset's reference text, by task: the manifest column a stored text is compared with
REFERENCE_COLUMNS = ("report", "answer")

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


def _columns(columns: Sequence[str], id_column: str | None, text_column: str | None, path: Path
             ) -> tuple[str, str]:
    """The id and text columns: given, else by name (:func:`match_id_column`, :func:`match_text_column`)."""
    where = f"predictions {str(path)!r}"
    id_col = match_id_column(columns, where=where, given=id_column)
    return id_col, match_text_column(columns, where=where, given=text_column, exclude=(id_col,))


def looks_like_text_table(path: Path) -> bool:
    """True when a table has an id column and a text column by the names above (a CSV is read
    by its header only)."""
    import pandas as pd

    try:
        cols = list(pd.read_csv(path, nrows=0).columns) if path.suffix == ".csv" else list(_read_table(path).columns)
    except (OSError, ValueError):
        return False
    where = f"predictions {str(path)!r}"
    texts = {column_key(n) for n in (*OUTPUT_TEXT_NAMES, *NEUTRAL_TEXT_NAMES)}
    id_col = find_column(cols, ID_NAMES, where=where, what="id", required=False)
    return id_col is not None and any(column_key(c) in texts for c in cols if c != id_col)


def _answer_rows(path: Path, id_column: str | None, text_column: str | None
                 ) -> tuple[list[tuple[int, Any, Any]], str, str, str]:
    """``(rows as (line, id, text), "line" or "row", id column, text column)``, values as stored:
    JSONL and CSV rows by file line (a CSV's header is line 1), Parquet rows by index."""
    if path.suffix in (".jsonl", ".json"):
        objects = read_jsonl_objects(path)
        if not objects:
            raise ValueError(f"predictions {str(path)!r}: no answers in the file")
        keys = list(dict.fromkeys(k for _, rec in objects for k in rec))
        id_col, text_col = _columns(keys, id_column, text_column, path)
        return object_rows(objects, path, id_column=id_col, text_column=text_col), "line", id_col, text_col
    if path.suffix == ".csv":
        check_csv_header(path)
    table = _read_table(path)
    id_col, text_col = _columns([str(c) for c in table.columns], id_column, text_column, path)
    first, word = (2, "line") if path.suffix == ".csv" else (0, "row")
    ids = [None if _missing(v) else v for v in table[id_col].tolist()]
    texts = [None if _missing(v) else v for v in table[text_col].tolist()]
    return [(first + i, a, t) for i, (a, t) in enumerate(zip(ids, texts))], word, id_col, text_col


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)  # Parquet null / NaN


class AnswersFromFile(GenerativeAdapter):
    """Answers or generated reports (text) by sample id from a CSV, Parquet or JSONL file, served
    as generated responses. The id and text columns are found by name unless given
    (:func:`~medimg_bench.datasets.columns.match_id_column`,
    :func:`~medimg_bench.datasets.columns.match_text_column`: ``dicom_id,report``,
    ``id,report,generated`` → ``generated``; two columns that could be the model's text are
    refused). A text column found by name that equals the dataset's reference for most rows is
    refused when the dataset is bound (it is the reference, not the model). Every row is checked
    (a refusal names the line): the id a non-empty string or integer given once, the text a
    string that is not blank.

    ``on_blank``: ``error`` (default) refuses a null, empty or ``"None"``-like answer; ``keep``
    scores it as the text it is (null as empty). ``circular``: the task runs CircularEval;
    refused unless the file holds answers for the rotations (ids ``<id>#rot<k>``)."""

    backend = "predictions"
    needs_pixels = False  # stored answers: the dataset is told so (``bind_dataset``)

    def __init__(self, path: Path, *, text_column: str | None = None, id_column: str | None = None,
                 circular: bool = False, on_blank: str = "error") -> None:
        super().__init__(name="predictions")
        self.source = path
        rows, word, self.id_column, self.text_column = _answer_rows(path, id_column, text_column)
        self._text_given = text_column is not None
        self.answers: dict[str, str] = checked_answers(rows, path, on_blank=on_blank, line_word=word)
        self.rotated = {sid for sid in self.answers if "#rot" in sid and ROTATION_ID.match(sid)}
        if circular and not self.rotated:
            raise ValueError(f"predictions {str(path)!r}: {CIRCULAR_REFUSAL}")
        if self.rotated and not circular:
            log.warning("predictions %s: %d answer(s) for option rotations (<id>#rot<k>) are not used: "
                        "task.options.circular is false", path, len(self.rotated))

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        return warn_unknown(self._stored_ids(), ids, self.source)

    def _stored_ids(self) -> set[str]:
        return set(self.answers) - self.rotated | {ROTATION_ID.match(sid)["id"] for sid in self.rotated}

    def unknown_ids(self, ids: Sequence[Any]) -> list[str]:
        """The stored ids the dataset (``ids``) does not have, sorted: counted as exclusions."""
        return sorted(self._stored_ids() - {str(i) for i in ids})

    def bind_dataset(self, dataset: Any) -> None:
        """Key answers named by an image file (``<id>.png``) by sample id, refuse a text column
        found by name that is the dataset's reference, and tell the dataset it need read no
        pixels (stored answers need none)."""
        where = f"predictions {str(self.source)!r}"
        ids = getattr(dataset, "ids", None)
        if ids is not None:
            to_sample = match_stored_ids(list(self.answers), ids, where=where)
            self.answers = {to_sample.get(k, k): v for k, v in self.answers.items()}
        if not self._text_given:
            self._refuse_reference(dataset, where)
        skip_pixels(dataset)

    def _refuse_reference(self, dataset: Any, where: str) -> None:
        manifest = getattr(dataset, "manifest", None)
        col = next((c for c in REFERENCE_COLUMNS if manifest is not None and c in manifest.columns), None)
        if col is None:
            return
        refs = dict(zip(manifest["id"].astype(str), manifest[col]))
        equal, compared = equals_reference(self.answers, refs)
        if compared and equal * 2 > compared:
            raise ValueError(
                f"{where}: column {self.text_column!r} equals the dataset's reference {col!r} for {equal} of "
                f"{compared} samples (those with a reference of 4 words or more): it holds the reference, not "
                f"the model's text; name the model's column with model.options.text_column")

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
