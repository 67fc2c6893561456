"""VQA or report answers from a JSONL file, served through the generative protocol."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.predictions.lookup import _warn_unknown
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

__all__ = ["AnswersFromFile"]


class AnswersFromFile(GenerativeAdapter):
    """Answers (text) by sample id from a JSONL file, served as generated responses."""

    backend = "predictions"

    def __init__(self, path: Path, *, text_column: str = "text", id_column: str = "id") -> None:
        super().__init__(name="predictions")
        self.source = path
        self.answers: dict[str, str] = {}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"predictions {str(path)!r} line {n}: not JSON ({exc})") from exc
            if id_column not in rec or text_column not in rec:
                raise ValueError(f"predictions {str(path)!r} line {n}: needs {id_column!r} and {text_column!r}")
            self.answers[str(rec[id_column])] = str(rec[text_column])

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        return _warn_unknown(set(self.answers), ids, self.source)

    def identity(self) -> dict[str, Any]:
        st = self.source.stat()
        return {"source": str(self.source), "size": st.st_size, "mtime": int(st.st_mtime)}

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
