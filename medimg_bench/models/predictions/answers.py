"""VQA answers or generated reports from a CSV, Parquet or JSONL file, served through the
generative protocol."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.predictions.lookup import _warn_unknown
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

__all__ = ["AnswersFromFile", "ID_COLUMNS", "TEXT_COLUMNS", "looks_like_text_table"]


#: column names that report-generation repositories use for the id and the text, tried in order
ID_COLUMNS = ("id", "dicom_id", "study_id", "image_id", "sample_id", "uid", "question_id")
TEXT_COLUMNS = ("text", "report", "prediction", "generated", "pred", "answer", "findings", "output")


def _read_table(path: Path) -> Any:
    """A CSV, Parquet or JSONL file as a DataFrame of strings (errors name the file and line)."""
    import pandas as pd

    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if path.suffix in (".jsonl", ".json"):
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"predictions {str(path)!r} line {n}: not JSON ({exc})") from exc
            if not isinstance(rec, dict):
                raise ValueError(f"predictions {str(path)!r} line {n}: expected an object")
            rows.append(rec)
        return pd.DataFrame(rows)
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


class AnswersFromFile(GenerativeAdapter):
    """Answers or generated reports (text) by sample id from a CSV, Parquet or JSONL file, served
    as generated responses. The id and text columns are found by the names report-generation
    repositories use (:data:`ID_COLUMNS`, :data:`TEXT_COLUMNS`: ``dicom_id,report``,
    ``study_id,report``, ``id,text``...) unless given. Duplicate ids are an error naming them."""

    backend = "predictions"

    def __init__(self, path: Path, *, text_column: str | None = None, id_column: str | None = None) -> None:
        super().__init__(name="predictions")
        self.source = path
        table = _read_table(path)
        id_col = _pick(list(table.columns), id_column, ID_COLUMNS, "id", path)
        text_col = _pick(list(table.columns), text_column, TEXT_COLUMNS, "text", path)
        ids = table[id_col].astype(str)
        dup = ids[ids.duplicated()]
        if len(dup):
            raise ValueError(f"predictions {str(path)!r}: {len(dup)} duplicate id(s) in column {id_col!r}, "
                             f"e.g. {sorted(set(dup))[:5]}")
        texts = table[text_col]
        if texts.isna().any():
            raise ValueError(f"predictions {str(path)!r}: no text for id(s) {list(ids[texts.isna()])[:5]}")
        self.id_column, self.text_column = id_col, text_col
        self.answers: dict[str, str] = dict(zip(ids, texts.astype(str)))

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        return _warn_unknown(set(self.answers), ids, self.source)

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
            sid = r.sample_id.split("#rot")[0]
            if sid in self.answers:
                out.append(GenerationResponse(text=self.answers[sid], prompt=r.user))
            else:
                out.append(GenerationResponse(
                    error=f"no prediction for sample {sid!r} in {str(self.source)!r}", prompt=r.user))
        return out
