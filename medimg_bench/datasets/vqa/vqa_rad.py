"""The ``vqa_rad`` dataset. VQA-RAD (Lau et al. 2018). ``split``: ``test`` = rows whose ``phrase_type`` is
``test_freeform``/``test_para`` (451 questions), ``train`` = the rest, ``all``.
``answer_type`` CLOSED/OPEN → closed/open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from medimg_bench.datasets.vqa.base import VQADataset, _closed_open_item, _finish, _miccai19
from medimg_bench.datasets.vqa.readers import (
    _load_json,
    _RowErrors,
    _text,
)
from medimg_bench.registry import register_dataset

__all__ = ["vqa_rad"]


# -- VQA-RAD ------------------------------------------------------------------------------------


@register_dataset("vqa_rad", tags=("vqa", "radiology"))
def vqa_rad(
    root: str | Path,
    split: str = "test",
    *,
    json_file: str = "VQA_RAD Dataset Public.json",
    image_dir: str = "VQA_RAD Image Folder",
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """VQA-RAD (Lau et al. 2018). ``split``: ``test`` = rows whose ``phrase_type`` is
    ``test_freeform``/``test_para`` (451 questions), ``train`` = the rest, ``all``.
    ``answer_type`` CLOSED/OPEN → closed/open.

    The MICCAI19-MedVQA layout most MedVQA code distributes (``data_RAD/trainset.json`` and
    ``testset.json`` with qid, image_name, image_organ, answer, answer_type, question_type,
    question, phrase_type, images in ``data_RAD/images/``) is chosen automatically when the
    official JSON is absent and ``root`` (or ``root/data_RAD``) holds it."""
    root = Path(root)
    path = root / json_file
    if split not in ("train", "test", "all"):
        raise ValueError(f"vqa_rad: split must be train, test or all, got {split!r}")
    if not path.exists():
        miccai = next((d for d in (root / "data_RAD", root) if (d / "testset.json").exists()), None)
        if miccai is not None:
            return _miccai19(miccai, split, "vqa_rad", on_error, transform)
    data = _load_json(path)
    errors = _RowErrors("vqa_rad", on_error)
    records = []
    for n, item in enumerate(data):
        phrase = _text(item.get("phrase_type")) or ""
        is_test = phrase.startswith("test")
        if (split == "test" and not is_test) or (split == "train" and is_test):
            continue
        parsed = _closed_open_item(
            item, n, image_key="image_name", expected_types="CLOSED/OPEN", path=path, errors=errors
        )
        if parsed is None:
            continue
        image, fields = parsed
        records.append(
            {
                "id": str(item.get("qid", n)),
                "image_path": f"{image_dir}/{image}",
                "patient_id": image,
                **fields,
                "phrase_type": phrase,
                "question_type": _text(item.get("question_type")),
                "organ": _text(item.get("image_organ")),
                "modality": "radiology",
                "split": "test" if is_test else "train",
            }
        )
    frame = _finish(records, errors, "vqa_rad", path)
    return VQADataset(
        frame,
        root=root,
        meta_columns=("answer_type_original", "phrase_type", "question_type", "organ"),
        transform=transform,
        name="vqa_rad",
    )
