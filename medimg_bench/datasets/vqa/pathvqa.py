"""The ``pathvqa`` dataset. PathVQA (He et al. 2020) from the Hugging Face parquet release
(``data/{train,validation,test}-*.parquet``: ``image``, ``question``, ``answer``) or from a
``{split}.csv`` / ``{split}.jsonl`` with ``image`` (path under ``root``), ``question``,
``answer``. The original pickled ``.pkl`` files are not read (never unpickle). Yes/no answers
are ``closed``, the rest ``open`` (the paper's split)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.vqa.base import VQADataset, finish
from medimg_bench.datasets.vqa.readers import (
    ParquetImages,
    RowErrors,
    load_jsonl,
    parquet_rows,
    text_or_none,
)
from medimg_bench.registry import register_dataset

__all__ = ["pathvqa"]


# -- PathVQA ------------------------------------------------------------------------------------


@register_dataset("pathvqa", tags=("vqa", "pathology"))
def pathvqa(
    root: str | Path,
    split: str = "test",
    *,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """PathVQA (He et al. 2020) from the Hugging Face parquet release
    (``data/{train,validation,test}-*.parquet``: ``image``, ``question``, ``answer``) or from a
    ``{split}.csv`` / ``{split}.jsonl`` with ``image`` (path under ``root``), ``question``,
    ``answer``. The original pickled ``.pkl`` files are not read (never unpickle). Yes/no answers
    are ``closed``, the rest ``open`` (the paper's split)."""
    root = Path(root)
    hf_split = {"val": "validation", "validate": "validation"}.get(split, split)
    errors = RowErrors("pathvqa", on_error)
    parquet = sorted((root / "data").glob(f"{hf_split}-*.parquet"))
    table_files = [root / f"{split}.csv", root / f"{split}.jsonl"]
    records = []
    blob_reader = None
    if parquet:
        source: Path = root / "data"
        rows: Iterable[dict[str, Any]] = parquet_rows(parquet, root, "image")
        blob_reader = ParquetImages(root, "image")
    else:
        found = [f for f in table_files if f.exists()]
        if not found:
            raise FileNotFoundError(
                f"pathvqa: neither data/{hf_split}-*.parquet nor {split}.csv/.jsonl under {str(root)!r}"
            )
        source = found[0]
        rows = (
            pd.read_csv(source, dtype=str).to_dict("records")
            if source.suffix == ".csv"
            else load_jsonl(source)
        )
    for n, rec in enumerate(rows):
        question, answer = text_or_none(rec.get("question")), text_or_none(rec.get("answer"))
        where = rec.get("parquet_file", source)
        if not question or answer is None:
            errors(where, n, "missing question or answer")
            continue
        item = {
            "id": f"{hf_split}_{n:06d}",
            "question": question,
            "options": None,
            "answer": answer,
            "answer_type": "closed" if answer.lower() in ("yes", "no") else "open",
            "modality": "pathology",
            "split": split,
        }
        if blob_reader is not None:
            item.update({k: rec[k] for k in ("parquet_file", "row_group", "row_offset", "row_number")})
        else:
            image = text_or_none(rec.get("image"))
            if not image:
                errors(source, n, "missing image path")
                continue
            item["image_path"] = image
            item["patient_id"] = image
        records.append(item)
    frame = finish(records, errors, "pathvqa", source)
    return VQADataset(frame, root=root, blob_reader=blob_reader, transform=transform, name="pathvqa")
