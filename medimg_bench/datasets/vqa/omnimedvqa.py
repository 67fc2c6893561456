"""The ``omnimedvqa`` dataset. OmniMedVQA (Hu et al. 2024): ``QA_information/<access>/<dataset>.json`` lists with
``question_id``, ``question``, ``option_A``..``option_D``, ``gt_answer`` (option text),
``image_path`` (relative to ``root``), ``modality_type``. The whole benchmark is a test set;
``datasets`` keeps the named source datasets (json file stems)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from medimg_bench.datasets.vqa.base import VQADataset, answer_letter, finish
from medimg_bench.datasets.vqa.readers import (
    RowErrors,
    load_json,
    text_or_none,
)
from medimg_bench.registry import register_dataset

__all__ = ["omnimedvqa"]


# -- OmniMedVQA ---------------------------------------------------------------------------------


@register_dataset("omnimedvqa", tags=("vqa", "mcq"))
def omnimedvqa(
    root: str | Path,
    split: str = "test",
    *,
    access: str = "Open-access",
    datasets: Sequence[str] | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """OmniMedVQA (Hu et al. 2024): ``QA_information/<access>/<dataset>.json`` lists with
    ``question_id``, ``question``, ``option_A``..``option_D``, ``gt_answer`` (option text),
    ``image_path`` (relative to ``root``), ``modality_type``. The whole benchmark is a test set;
    ``datasets`` keeps the named source datasets (json file stems)."""
    root = Path(root)
    folder = root / "QA_information" / access
    files = sorted(folder.glob("*.json"))
    if datasets is not None:
        files = [f for f in files if f.stem in set(datasets)]
    if not files:
        raise FileNotFoundError(f"omnimedvqa: no *.json under {str(folder)!r}")
    errors = RowErrors("omnimedvqa", on_error)
    records = []
    for f in files:
        for n, item in enumerate(load_json(f)):
            label = f"{n} (question_id {item.get('question_id')})"
            options = [o for o in (text_or_none(item.get(f"option_{c}")) for c in "ABCDEF") if o is not None]
            gt, image = text_or_none(item.get("gt_answer")), text_or_none(item.get("image_path"))
            if not options or gt is None or not image or not text_or_none(item.get("question")):
                errors(f, label, "missing question, options, gt_answer or image_path")
                continue
            letter = answer_letter(gt, options)
            if letter is None:
                errors(f, label, f"gt_answer {gt!r} is none of the options {options}")
                continue
            records.append(
                {
                    "id": str(item.get("question_id", f"{f.stem}_{n}")),
                    "image_path": image,
                    "patient_id": image,
                    "question": str(item["question"]).strip(),
                    "options": options,
                    "answer": letter,
                    "answer_type": "mcq",
                    "answer_text": gt,
                    "modality": text_or_none(item.get("modality_type")),
                    "source_dataset": text_or_none(item.get("dataset")) or f.stem,
                    "question_type": text_or_none(item.get("question_type")),
                    "split": split,
                }
            )
    frame = finish(records, errors, "omnimedvqa", folder)
    return VQADataset(
        frame,
        root=root,
        meta_columns=("answer_text", "source_dataset", "question_type"),
        transform=transform,
        name="omnimedvqa",
    )
