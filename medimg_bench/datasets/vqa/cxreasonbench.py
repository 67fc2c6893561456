"""The ``cxreasonbench`` dataset: CXReasonBench (Lee et al., NeurIPS 2025 D&B; PhysioNet
``chexstruct-cxreasonbench``, credentialed), the **initial diagnostic question** of each case, in
the layout its evaluation code reads (ttumyche/CXReasonBench commit 72357fe,
``evaluation/evaluate_reasoning.py``):

    ROOT/dx_by_dicoms.json                             {diagnostic_task: [dicom_id, ...]}
    ROOT/qa/<task>/path1/init/basic/<dicom_id>.json    {"question", "answer", "img_path": [...]}
    MIMIC_ROOT/<img_path>                              MIMIC-CXR-JPG ``files/`` (relative paths)

``root`` is the unzipped ``CXReasonBench`` folder, ``mimic_root`` the MIMIC-CXR-JPG ``files``
folder (the ``img_path`` entries are relative to it; default ``root``). Each sample is one (task, dicom) pair: ``question`` as released (its options are in
the text, e.g. "(a) Yes (b) No"), ``answer`` the reference option text, ``answer_type`` ``open``
— the benchmark grades replies with an LLM judge, ``scoring.judge.rubric=cxreasonbench_init``
(docs/vlm.md) — and ``meta["diagnostic_task"]`` for per-task accuracy
(``subgroups=[diagnostic_task]``); ``patient_id`` is the dicom id. ``tasks=[...]`` keeps some of
the 12 diagnostic tasks.

Not built: the later stages of a case (criteria, body-part grounding, measurement, final
decision; path 2's guidance), which the harness asks in one conversation, each depending on the
judged answer to the previous one — a multi-turn protocol our VQA task does not run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from medimg_bench.datasets.vqa.base import VQADataset, _finish
from medimg_bench.datasets.vqa.readers import _RowErrors, _text
from medimg_bench.registry import register_dataset

__all__ = ["cxreasonbench"]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cxreasonbench: cannot read {str(path)!r}: {exc}") from exc


def _case(root: Path, task: str, dicom: str, errors: _RowErrors) -> dict[str, Any] | None:
    path = root / "qa" / task / "path1" / "init" / "basic" / f"{dicom}.json"
    label = f"{task}/{dicom}"
    if not path.is_file():
        errors(path, label, "the initial question file is missing")
        return None
    item = _read_json(path)
    question = _text(item.get("question")) if isinstance(item, dict) else None
    answer = _text(item.get("answer")) if isinstance(item, dict) else None
    images = item.get("img_path") if isinstance(item, dict) else None
    images = [images] if isinstance(images, str) else [p for p in (images or []) if p]
    if not question or answer is None or not images:
        errors(path, label, "missing question, answer or img_path")
        return None
    return {"id": f"{task}/{dicom}", "patient_id": str(dicom), "image_path": [str(p) for p in images],
            "question": question, "options": None, "answer": answer, "answer_type": "open",
            "diagnostic_task": task, "stage": "init", "qa_file": str(path.relative_to(root))}


@register_dataset("cxreasonbench", tags=("vqa", "open", "multi_image", "cxr", "reasoning"))
def cxreasonbench(
    root: str | Path,
    split: str = "test",
    *,
    mimic_root: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """CXReasonBench's initial questions (module docstring); images from ``mimic_root`` (the
    MIMIC-CXR-JPG ``files`` folder; default ``root``). ``split`` is ``test`` (the benchmark has
    no other). Returns a multi-image :class:`VQADataset`."""
    root = Path(root)
    if split != "test":
        raise ValueError(f"cxreasonbench: the benchmark has only split 'test', got {split!r}")
    index = root / "dx_by_dicoms.json"
    if not index.is_file():
        raise FileNotFoundError(f"cxreasonbench: no dx_by_dicoms.json under {str(root)!r} "
                                "(the unzipped CXReasonBench folder of PhysioNet chexstruct-cxreasonbench)")
    by_task = _read_json(index)
    if not isinstance(by_task, dict):
        raise ValueError(f"cxreasonbench: {str(index)!r} must map each diagnostic task to a list of dicom ids")
    if tasks is not None:
        unknown = sorted(set(tasks) - set(by_task))
        if unknown:
            raise ValueError(f"cxreasonbench: unknown task(s) {unknown}; in {index.name}: {sorted(by_task)}")
    errors = _RowErrors("cxreasonbench", on_error)
    records = [r for task in by_task if tasks is None or task in tasks
               for dicom in by_task[task] if (r := _case(root, task, str(dicom), errors))]
    frame = _finish(records, errors, "cxreasonbench", root / "qa")
    images_root = Path(mimic_root) if mimic_root is not None else root
    return VQADataset(frame, root=images_root, multi_image=True, meta_columns=("diagnostic_task", "stage"),
                      transform=transform, name="cxreasonbench")
