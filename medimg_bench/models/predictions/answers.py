"""VQA or report answers from a JSONL file, served through the generative protocol; every line is
checked when the file is loaded (:func:`.checks.checked_answers`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.predictions.checks import ROTATION_ID, checked_answers, read_answer_lines
from medimg_bench.models.predictions.lookup import _warn_unknown
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

__all__ = ["AnswersFromFile"]

log = logging.getLogger(__name__)

CIRCULAR_REFUSAL = (
    "task.options.circular=true, but stored answers cannot be rotated: CircularEval asks the model "
    "again with the options in every rotation, and a file holds what the model said once. Store one "
    "answer per rotation (ids '<id>#rot<k>', k = 1 .. n-1, the options listed from the (k+1)-th "
    "original option on) or set task.options.circular=false")


class AnswersFromFile(GenerativeAdapter):
    """Answers (text) by sample id from a JSONL file, served as generated responses.

    ``circular``: the task runs CircularEval; refused unless the file holds answers for the
    rotations (ids ``<id>#rot<k>``). ``on_blank``: ``error`` (default) refuses a null, empty or
    ``"None"``-like answer naming the line; ``keep`` scores it as the text it is."""

    backend = "predictions"

    def __init__(self, path: Path, *, text_column: str = "text", id_column: str = "id",
                 circular: bool = False, on_blank: str = "error") -> None:
        super().__init__(name="predictions")
        self.source = path
        rows = read_answer_lines(path, id_column=id_column, text_column=text_column)
        self.answers: dict[str, str] = checked_answers(rows, path, on_blank=on_blank)
        self.rotated = {sid for sid in self.answers if "#rot" in sid and ROTATION_ID.match(sid)}
        if circular and not self.rotated:
            raise ValueError(f"predictions {str(path)!r}: {CIRCULAR_REFUSAL}")
        if self.rotated and not circular:
            log.warning("predictions %s: %d answer(s) for option rotations (<id>#rot<k>) are not used: "
                        "task.options.circular is false", path, len(self.rotated))

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        known = set(self.answers) - self.rotated | {ROTATION_ID.match(sid)["id"] for sid in self.rotated}
        return _warn_unknown(known, ids, self.source)

    def identity(self) -> dict[str, Any]:
        st = self.source.stat()
        return {"source": str(self.source), "size": st.st_size, "mtime": int(st.st_mtime)}

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
