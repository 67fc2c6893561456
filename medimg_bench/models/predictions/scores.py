"""Classification scores from a CSV or Parquet table (an id column and one column per class), the
columns found by name with the one column matcher (:mod:`medimg_bench.datasets.columns`: the id
column among ``id``, ``Image Index``, ``image_id``...; the score columns matched to the dataset's
classes up to case, punctuation and ``prob_`` / ``_prob`` / ``score_``... affixes) and checked when
loaded (:mod:`.checks`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.datasets.columns import match_class_columns, match_id_column
from medimg_bench.models.predictions.checks import (
    check_csv_header,
    check_probabilities,
    score_matrix,
    scores_to_probs,
)
from medimg_bench.models.predictions.lookup import Lookup, match_stored_ids, skip_pixels

__all__ = ["ScoresFromFile", "SCORE_KINDS"]

#: what the score columns hold (``model.options.scores``)
SCORE_KINDS = ("probabilities", "logits")


def _read_scores_table(path: Path, id_column: str | None) -> tuple[Any, list[str], list[int] | None, str]:
    """The table, its ids as strings, (CSV) the line of each row and the id column (``id_column``,
    else found by name: :func:`~medimg_bench.datasets.columns.match_id_column`); ids checked:
    present, not blank, not twice."""
    import pandas as pd

    where = f"predictions {str(path)!r}"
    try:
        if path.suffix == ".parquet":
            table = pd.read_parquet(path)
        else:
            check_csv_header(path)
            header = [str(c) for c in pd.read_csv(path, nrows=0).columns]
            id_column = match_id_column(header, where=where, given=id_column)
            table = pd.read_csv(path, dtype={id_column: str})
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith(where):
            raise
        raise ValueError(f"{where}: cannot read the table: {exc}") from exc
    table.columns = [str(c) for c in table.columns]
    id_column = match_id_column(list(table.columns), where=where, given=id_column)
    lines = list(range(2, len(table) + 2)) if path.suffix != ".parquet" else None
    raw = table[id_column]
    blank = raw.isna() | (raw.astype(str).str.strip() == "")
    if blank.any():
        i = int(np.flatnonzero(blank.to_numpy())[0])
        row = f"line {lines[i]}" if lines else f"row {i}"
        raise ValueError(f"{where} {row}: blank id ({int(blank.sum())} row(s) without an id)")
    as_str = raw.astype(str)
    ids = as_str.tolist()
    dup = as_str.duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        j = ids.index(ids[i])
        here, first = (f"line {lines[i]}", f"line {lines[j]}") if lines else (f"row {i}", f"row {j}")
        raise ValueError(f"{where} {here}: duplicate id {ids[i]!r} (first on {first}); one row per id")
    if not ids:
        raise ValueError(f"{where}: no rows")
    return table, ids, lines, id_column


class ScoresFromFile(Lookup):
    """Class scores from a table: ``predict(batch) -> {"probs", "logits"}``.

    The id column is ``id_column``, else found by name (``id``, ``Image Index``, ``image_id``...);
    an id may carry the image's file suffix (``00000010_000.png`` is sample ``00000010_000``).
    Score columns are matched to the dataset's classes (given by ``dataset_classes`` or
    :meth:`bind_dataset`) by name, in any order, up to case, punctuation and score affixes
    (``prob_Effusion``); a table whose columns carry no class names is taken in the order of
    ``classes`` (the columns to use), and only then. ``scores``:
    ``probabilities`` (default; a value outside [0, 1] is refused, and so is a multi-class row that
    does not sum to 1) or ``logits`` (sigmoid for a multi-label task, softmax for a multi-class one,
    by ``multilabel``: the task's flag, else the dataset's). Every value is checked when the
    columns are matched, before any sample is scored."""

    task = "classification"

    def __init__(self, path: Path, *, classes: Sequence[str] | None = None, id_column: str | None = None,
                 num_classes: int | None = None, scores: str = "probabilities", multilabel: bool | None = None,
                 dataset_classes: Sequence[str] | None = None) -> None:
        super().__init__(path)
        if scores not in SCORE_KINDS:
            raise ValueError(f"predictions: scores must be one of {list(SCORE_KINDS)}, got {scores!r} "
                             "(option model.options.scores)")
        self.table, self.ids, self.lines, id_column = _read_scores_table(path, id_column)
        self.given = [str(c) for c in classes] if classes else None
        if self.given:
            absent = [c for c in self.given if c not in self.table.columns]
            if absent:
                raise ValueError(f"predictions {str(path)!r}: no column(s) {absent} (option model.options.classes); "
                                 f"columns are {list(self.table.columns)}")
        self.id_column, self.kind, self.multilabel, self.num_classes = id_column, scores, multilabel, num_classes
        self.classes: list[str] | None = None  # the class names, once known
        self.columns: list[str] | None = None  # the column of each class
        self.scores: dict[str, np.ndarray] | None = None  # id -> probabilities
        self._raw: dict[str, np.ndarray] | None = None  # id -> the stored values (logits)
        self._unresolved = "the dataset's class names are not known"
        if dataset_classes:
            self._resolve(list(dataset_classes))
        elif self.given:
            self._resolve(None)

    def bind_dataset(self, dataset: Any) -> None:
        """Match the score columns to ``dataset.classes``, check every value (load time), key
        ids named by image file by sample id; the dataset reads no pixels."""
        if self.multilabel is None and getattr(dataset, "multilabel", None) is not None:
            self.multilabel = bool(dataset.multilabel)
        classes = getattr(dataset, "classes", None)
        if classes or self.given:
            self._resolve(list(classes) if classes else None)
        ids = getattr(dataset, "ids", None)
        if ids is not None:
            self._rekey(match_stored_ids(self.ids, ids, where=f"predictions {str(self.source)!r}"))
        skip_pixels(dataset)

    def _rekey(self, to_sample: dict[str, str]) -> None:
        """Stored ids that name a sample by its image file (``<id>.png``) keyed by the sample id."""
        if all(k == v for k, v in to_sample.items()):
            return
        self.ids = [to_sample.get(i, i) for i in self.ids]
        for attr in ("scores", "_raw"):
            table = getattr(self, attr)
            if table is not None:
                setattr(self, attr, {to_sample.get(k, k): v for k, v in table.items()})

    def _resolve(self, classes: list[str] | None) -> None:
        where = f"predictions {str(self.source)!r}"
        candidates = self.given or [c for c in self.table.columns if c != self.id_column]
        if classes is None:
            cols = list(candidates)
        else:
            cols = match_class_columns(
                candidates, classes, where=where, what="score columns", positional=self.given is not None,
                hint="columns without class names are taken in order only when model.options.classes lists them")
        if self.num_classes is not None and len(cols) != self.num_classes:
            raise ValueError(f"{where}: {len(cols)} score columns {cols} but the dataset has {self.num_classes} "
                             "classes; set model.options.classes")
        values = score_matrix(self.table, cols, self.ids, self.source, lines=self.lines)
        self.columns, self.classes = cols, list(classes) if classes is not None else cols
        self.scores = self._raw = None
        if self.kind == "logits":
            self._raw = dict(zip(self.ids, values))
            if self.multilabel is None:
                self._unresolved = ("scores=logits needs the task's multilabel flag (sigmoid or softmax): "
                                    "set model.options.multilabel")
                if classes is not None:
                    raise ValueError(f"{where}: {self._unresolved}")
                return
            values = scores_to_probs(values, multilabel=self.multilabel)
        else:
            check_probabilities(values, cols, self.ids, self.source, multilabel=self.multilabel, lines=self.lines)
        self.scores = dict(zip(self.ids, values))

    def _known_ids(self) -> set[str]:
        return set(self.ids)

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        if self.scores is None:
            raise ValueError(f"predictions {str(self.source)!r}: {self._unresolved}; build the model with "
                             "medimg_bench.builders.build_model, call bind_dataset(dataset), or give "
                             "dataset_classes / classes")
        rows = []
        for sid in batch["id"]:
            if str(sid) not in self.scores:
                raise self._missing(str(sid))
            rows.append(self.scores[str(sid)])
        probs = torch.from_numpy(np.stack(rows)).to(self.device)
        if self._raw is None:
            return {"probs": probs, "logits": probs}
        logits = torch.from_numpy(np.stack([self._raw[str(s)] for s in batch["id"]])).to(self.device)
        return {"probs": probs, "logits": logits}
