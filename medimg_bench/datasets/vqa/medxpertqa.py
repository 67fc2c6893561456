"""The ``medxpertqa_mm`` dataset. MedXpertQA multimodal subset (Zuo et al. 2025): ``MM/test.jsonl`` / ``MM/dev.jsonl``
with ``id``, ``question``, ``options`` (dict letter → text), ``label`` (letter), ``images``
(file names in ``images/``). ``image`` is a list (questions have one or more images).
``strip_choices`` removes the ``Answer Choices: (A) ...`` tail that the release appends to
the question (the options are in ``options``); the original is ``meta['question_original']``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from medimg_bench.datasets.vqa.base import LETTERS, VQADataset, finish
from medimg_bench.datasets.vqa.readers import (
    RowErrors,
    load_jsonl,
    text_or_none,
)
from medimg_bench.registry import register_dataset

__all__ = ["medxpertqa_mm"]


# -- MedXpertQA MM ------------------------------------------------------------------------------

_CHOICES_TAIL = re.compile(r"\s*Answer Choices:\s*\(A\).*\Z", re.S)


@register_dataset("medxpertqa_mm", tags=("vqa", "mcq", "multi_image"))
def medxpertqa_mm(
    root: str | Path,
    split: str = "test",
    *,
    strip_choices: bool = True,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """MedXpertQA multimodal subset (Zuo et al. 2025): ``MM/test.jsonl`` / ``MM/dev.jsonl``
    with ``id``, ``question``, ``options`` (dict letter → text), ``label`` (letter), ``images``
    (file names in ``images/``). ``image`` is a list (questions have one or more images).
    ``strip_choices`` removes the ``Answer Choices: (A) ...`` tail that the release appends to
    the question (the options are in ``options``); the original is ``meta['question_original']``."""
    root = Path(root)
    name = {"val": "dev", "validation": "dev"}.get(split, split)
    path = root / "MM" / f"{name}.jsonl"
    errors = RowErrors("medxpertqa_mm", on_error)
    records = []
    for n, item in enumerate(load_jsonl(path)):
        label = f"{n} (id {item.get('id')})"
        opts = item.get("options")
        images = item.get("images") or []
        if not isinstance(opts, dict) or not opts or not images or not text_or_none(item.get("question")):
            errors(path, label, "missing question, options dict or images")
            continue
        keys = sorted(opts)
        if keys != list(LETTERS[: len(keys)]):
            errors(path, label, f"option keys {keys} are not consecutive letters from A")
            continue
        answer = (text_or_none(item.get("label")) or "").upper()
        if answer not in keys:
            errors(path, label, f"label {item.get('label')!r} is not one of {keys}")
            continue
        question = str(item["question"]).strip()
        records.append(
            {
                "id": str(item.get("id", n)),
                "image_path": [f"images/{i}" for i in images],
                "patient_id": str(item.get("id", n)),
                "question": _CHOICES_TAIL.sub("", question) if strip_choices else question,
                "question_original": question,
                "options": [str(opts[k]).strip() for k in keys],
                "answer": answer,
                "answer_type": "mcq",
                "answer_text": str(opts[answer]).strip(),
                "medical_task": text_or_none(item.get("medical_task")),
                "body_system": text_or_none(item.get("body_system")),
                "question_type": text_or_none(item.get("question_type")),
                "split": split,
            }
        )
    frame = finish(records, errors, "medxpertqa_mm", path)
    return VQADataset(
        frame,
        root=root,
        multi_image=True,
        meta_columns=("answer_text", "question_original", "medical_task", "body_system", "question_type"),
        transform=transform,
        name="medxpertqa_mm",
    )
