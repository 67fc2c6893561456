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

``stages=True`` adds each case's later stages (criteria, custom criteria, body-part grounding,
measurement, final decision; path 2's guidance) as the harness reads them
(:mod:`~medimg_bench.datasets.vqa.cxreasonbench_stages`): ``meta["stages"]`` and the images they
show, ``meta["stage_images"]``, from ``segmask_root`` (default ``ROOT/segmask_bodypart``) and
``pnt_root`` (default ``ROOT/pnt_on_cxr``). ``task=cxreasonbench_reasoning`` runs them as one
conversation per case (docs/vlm.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from medimg_bench.datasets.vqa.base import VQADataset, finish
from medimg_bench.datasets.vqa.cxreasonbench_stages import (
    CXReasonBenchDataset,
    read_stages,
    stage_images_needed,
)
from medimg_bench.datasets.vqa.readers import RowErrors, text_or_none
from medimg_bench.registry import register_dataset

__all__ = ["cxreasonbench"]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cxreasonbench: cannot read {str(path)!r}: {exc}") from exc


def _case(root: Path, task: str, dicom: str, errors: RowErrors, stages: tuple[Path, Path] | None = None
          ) -> dict[str, Any] | None:
    path = root / "qa" / task / "path1" / "init" / "basic" / f"{dicom}.json"
    label = f"{task}/{dicom}"
    if not path.is_file():
        errors(path, label, "the initial question file is missing")
        return None
    item = _read_json(path)
    question = text_or_none(item.get("question")) if isinstance(item, dict) else None
    answer = text_or_none(item.get("answer")) if isinstance(item, dict) else None
    images = item.get("img_path") if isinstance(item, dict) else None
    images = [images] if isinstance(images, str) else [p for p in (images or []) if p]
    if not question or answer is None or not images:
        errors(path, label, "missing question, answer or img_path")
        return None
    record = {"id": f"{task}/{dicom}", "patient_id": str(dicom), "image_path": [str(p) for p in images],
              "question": question, "options": None, "answer": answer, "answer_type": "open",
              "diagnostic_task": task, "stage": "init", "qa_file": str(path.relative_to(root))}
    if stages is None:
        return record
    later = read_stages(root, task, dicom, errors)
    if later is None:
        return None
    later = {"path1/init": {"file": record["qa_file"], "content": item}, **later}
    bases = {"segmask": stages[0], "pnt": stages[1]}
    record["stages"] = json.dumps(later, sort_keys=True)
    record["stage_image_paths"] = [str((bases[k] / e.lstrip("/")).resolve()) for k, e in stage_images_needed(later)]
    return record


@register_dataset("cxreasonbench", tags=("vqa", "open", "multi_image", "cxr", "reasoning"))
def cxreasonbench(
    root: str | Path,
    split: str = "test",
    *,
    mimic_root: str | Path | None = None,
    tasks: Sequence[str] | None = None,
    stages: bool = False,
    segmask_root: str | Path | None = None,
    pnt_root: str | Path | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """CXReasonBench's initial questions (module docstring); images from ``mimic_root`` (the
    MIMIC-CXR-JPG ``files`` folder; default ``root``). ``split`` is ``test`` (the benchmark has
    no other). ``stages=True``: each case also carries its later stages and their images
    (``segmask_root``, ``pnt_root``). Returns a multi-image :class:`VQADataset`."""
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
    errors = RowErrors("cxreasonbench", on_error)
    bases = ((Path(segmask_root) if segmask_root is not None else root / "segmask_bodypart"),
             (Path(pnt_root) if pnt_root is not None else root / "pnt_on_cxr")) if stages else None
    records = [r for task in by_task if tasks is None or task in tasks
               for dicom in by_task[task] if (r := _case(root, task, str(dicom), errors, bases))]
    frame = finish(records, errors, "cxreasonbench", root / "qa")
    images_root = Path(mimic_root) if mimic_root is not None else root
    if bases is not None:
        return CXReasonBenchDataset(frame, segmask_root=bases[0], pnt_root=bases[1], root=images_root,
                                    multi_image=True, meta_columns=("diagnostic_task", "stage"),
                                    transform=transform, name="cxreasonbench")
    return VQADataset(frame, root=images_root, multi_image=True, meta_columns=("diagnostic_task", "stage"),
                      transform=transform, name="cxreasonbench")
