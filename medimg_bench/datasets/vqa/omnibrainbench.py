"""The ``omnibrainbench`` dataset. OmniBrainBench (Peng et al. 2025, CVPR 2026), the layout its
evaluation code reads (CUHK-AIM-Group/OmniBrainBench commit 88427de,
``utils/OmniBrainBench/OmniBrainBench.py`` ``load_data``; data on Hugging Face
``FrankPN/OmniBrainBench``):

    ROOT/closed-ended-qa_6823.json   ROOT/closed-ended-qa_6823/<image_path>
    ROOT/open-ended-qa_2704.json     ROOT/open-ended-qa_2704/<image_path>

Each JSON is a list of items with ``question``, ``answer``, ``image_path`` (one path or a list,
relative to the folder named like the JSON), ``task_label`` (one of the 15 clinical tasks) and
``clinical_phase``; closed items have ``options`` (five texts, lettered A–E by the harness).
``split="closed"`` (6,823 multiple-choice questions) or ``"open"`` (2,704 open questions); the
counts in the file names are not enforced (a subset works). Every sample is a list of images
(``multi_image``); ``patient_id`` is the first image's path, so questions on one image stay
together in the bootstrap.

Official scoring: multiple choice by MedEvalKit's ``judge_multi_choice`` — ``scoring=lmms_eval``
(its ``mcq`` rule is that routine) — and open answers by exact match or, as the paper reports,
an LLM judge under MedEvalKit's compare prompt — ``scoring.judge.rubric=medevalkit`` (docs/vlm.md).
Accuracy per ``task_label`` and per ``clinical_phase`` (the harness's "task type metrics" and
"clinical phase type metrics"): ``subgroups=[task_label,clinical_phase]``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from medimg_bench.datasets.vqa.base import (
    LETTERS,
    VQADataset,
    finish,
    mcq_fields,
    strip_letter,
)
from medimg_bench.datasets.vqa.readers import RowErrors, json_list, only_file, text_or_none
from medimg_bench.registry import register_dataset

__all__ = ["omnibrainbench"]

_FILES = {"closed": "closed-ended-qa_*.json", "open": "open-ended-qa_*.json"}


def _json_file(root: Path, split: str) -> Path:
    if split not in _FILES:
        raise ValueError(f"omnibrainbench: split must be 'closed' or 'open', got {split!r}")
    found = sorted(p for p in root.glob(_FILES[split]) if p.is_file())
    missing = f"no {_FILES[split]} under {str(root)!r} (the Hugging Face release FrankPN/OmniBrainBench)"
    return only_file(found, root, name="omnibrainbench", missing=missing, what=split)


def _item(item: Any, n: int, split: str, folder: str, path: Path, errors: RowErrors) -> dict[str, Any] | None:
    label = f"{n} (id {item.get('id') if isinstance(item, dict) else None})"
    if not isinstance(item, dict):
        errors(path, label, f"an item must be an object, got {type(item).__name__}")
        return None
    question, answer = text_or_none(item.get("question")), text_or_none(item.get("answer"))
    images = item.get("image_path")
    images = [images] if isinstance(images, str) else [p for p in (images or []) if p]
    if not question or answer is None or not images:
        errors(path, label, "missing question, answer or image_path")
        return None
    record: dict[str, Any] = {
        "id": str(item.get("id", n)), "patient_id": f"{folder}/{images[0]}",
        "image_path": [f"{folder}/{p}" for p in images], "question": question,
        "task_label": text_or_none(item.get("task_label")), "clinical_phase": text_or_none(item.get("clinical_phase")),
        "modality": text_or_none(item.get("modality")), "split": split, "json_row": n,
    }
    if split == "open":
        return {**record, "options": None, "answer": answer, "answer_type": "open"}
    raw = item.get("options")
    if not isinstance(raw, list) or not raw or len(raw) > len(LETTERS):
        errors(path, label, f"options must be a non-empty list, got {raw!r}")
        return None
    mcq = mcq_fields(answer, [strip_letter(str(o), LETTERS[i]) for i, o in enumerate(raw)])
    if isinstance(mcq, str):
        errors(path, label, mcq)
        return None
    return {**record, **mcq}


@register_dataset("omnibrainbench", tags=("vqa", "mcq", "open", "multi_image", "brain"))
def omnibrainbench(
    root: str | Path,
    split: str = "closed",
    *,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """OmniBrainBench in its release layout (module docstring): ``split`` ``closed`` (multiple
    choice) or ``open``. Returns a multi-image :class:`VQADataset` whose manifest has
    ``task_label`` and ``clinical_phase`` for the per-category accuracies."""
    root = Path(root)
    path = _json_file(root, split)
    items = json_list(path, "omnibrainbench", "questions")
    errors = RowErrors("omnibrainbench", on_error)
    folder = path.stem
    records = [r for n, item in enumerate(items) if (r := _item(item, n, split, folder, path, errors))]
    frame = finish(records, errors, "omnibrainbench", path)
    return VQADataset(
        frame, root=root, multi_image=True,
        meta_columns=("task_label", "clinical_phase", "answer_text", "modality"),
        transform=transform, name="omnibrainbench",
    )
