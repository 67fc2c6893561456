"""Classification scores from a CSV or Parquet table (one column per class)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.models.predictions.lookup import _Lookup

__all__ = ["ScoresFromFile"]


class ScoresFromFile(_Lookup):
    """Class scores from a table: ``predict(batch) -> {"probs", "logits"}`` (logits = scores)."""

    task = "classification"

    def __init__(self, path: Path, *, classes: Sequence[str] | None, id_column: str = "id",
                 num_classes: int | None = None) -> None:
        import pandas as pd

        super().__init__(path)
        table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype={id_column: str})
        if id_column not in table.columns:
            raise ValueError(f"predictions {str(path)!r}: no {id_column!r} column; columns are {list(table.columns)}")
        cols = list(classes) if classes else [c for c in table.columns if c != id_column]
        missing = [c for c in cols if c not in table.columns]
        if missing:
            raise ValueError(f"predictions {str(path)!r}: no column(s) {missing} for the classes")
        if num_classes is not None and len(cols) != num_classes:
            raise ValueError(f"predictions {str(path)!r}: {len(cols)} score columns {cols} but the "
                             f"dataset has {num_classes} classes; set model.options.classes")
        dup = table[id_column].astype(str).duplicated()
        if dup.any():
            raise ValueError(f"predictions {str(path)!r}: duplicate id {table[id_column][dup].iloc[0]!r}")
        values = table[cols].to_numpy(dtype=np.float32)
        self.classes = cols
        self.scores = {str(i): values[k] for k, i in enumerate(table[id_column].astype(str))}

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        rows = []
        for sid in batch["id"]:
            if str(sid) not in self.scores:
                raise self._missing(str(sid))
            rows.append(self.scores[str(sid)])
        probs = torch.from_numpy(np.stack(rows)).to(self.device)
        return {"probs": probs, "logits": probs}
