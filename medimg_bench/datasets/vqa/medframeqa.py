"""The ``medframeqa`` dataset. MedFrameQA (Yu et al. 2025), Hugging Face parquet release ``data/test-*.parquet``:
``question_id``, ``question``, ``options`` (list), ``answer``, ``image`` (list of 2–5
images), ``video_id``, ``system``, ``organ``, ``modality``. ``image`` is a list of tensors;
``patient_id`` is the source video. Letter prefixes on options are removed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from medimg_bench.datasets.vqa.base import (
    LETTERS,
    VQADataset,
    answer_letter,
    finish,
    strip_letter,
)
from medimg_bench.datasets.vqa.readers import (
    ParquetImages,
    RowErrors,
    parquet_rows,
    text_or_none,
)
from medimg_bench.registry import register_dataset

__all__ = ["medframeqa"]


# -- MedFrameQA ---------------------------------------------------------------------------------


@register_dataset("medframeqa", tags=("vqa", "mcq", "multi_image"))
def medframeqa(
    root: str | Path,
    split: str = "test",
    *,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """MedFrameQA (Yu et al. 2025), Hugging Face parquet release ``data/test-*.parquet``:
    ``question_id``, ``question``, ``options`` (list), ``answer``, ``image`` (list of 2–5
    images), ``video_id``, ``system``, ``organ``, ``modality``. ``image`` is a list of tensors;
    ``patient_id`` is the source video. Letter prefixes on options are removed."""
    root = Path(root)
    files = sorted((root / "data").glob(f"{split}-*.parquet"))
    if not files:
        raise FileNotFoundError(f"medframeqa: no data/{split}-*.parquet under {str(root)!r}")
    errors = RowErrors("medframeqa", on_error)
    records = []
    for rec in parquet_rows(files, root, "image"):
        label = f"{rec['row_number']} (question_id {rec.get('question_id')})"
        raw = rec.get("options") or []
        options = [strip_letter(str(o), LETTERS[i]) for i, o in enumerate(raw)]
        answer = text_or_none(rec.get("answer"))
        if not options or answer is None or not text_or_none(rec.get("question")):
            errors(rec["parquet_file"], label, "missing question, options or answer")
            continue
        letter = answer_letter(answer, options)
        if letter is None:
            errors(rec["parquet_file"], label, f"answer {answer!r} matches none of {len(options)} options")
            continue
        records.append(
            {
                "id": str(rec.get("question_id") or rec["row_number"]),
                "patient_id": str(rec.get("video_id") or rec["row_number"]),
                "question": str(rec["question"]).strip(),
                "options": options,
                "answer": letter,
                "answer_type": "mcq",
                "answer_text": options[LETTERS.index(letter)],
                "modality": text_or_none(rec.get("modality")),
                "system": text_or_none(rec.get("system")),
                "organ": text_or_none(rec.get("organ")),
                "split": split,
                **{k: rec[k] for k in ("parquet_file", "row_group", "row_offset", "row_number")},
            }
        )
    frame = finish(records, errors, "medframeqa", root / "data")
    return VQADataset(
        frame,
        root=root,
        multi_image=True,
        blob_reader=ParquetImages(root, "image"),
        meta_columns=("answer_text", "system", "organ"),
        transform=transform,
        name="medframeqa",
    )
