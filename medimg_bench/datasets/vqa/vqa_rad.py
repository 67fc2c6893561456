"""The ``vqa_rad`` dataset. VQA-RAD (Lau et al. 2018). ``split``: ``test`` = rows whose ``phrase_type`` is
``test_freeform``/``test_para`` (451 questions), ``train`` = the rest, ``all``.
``answer_type`` CLOSED/OPEN → closed/open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from medimg_bench.datasets.vqa.base import (
    RAD_META,
    VQADataset,
    closed_open_rows,
    finish,
    miccai19,
    rad_record,
)
from medimg_bench.datasets.vqa.readers import RowErrors, load_json, text_or_none
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
            return miccai19(miccai, split, "vqa_rad", on_error, transform)
    data = load_json(path)
    errors = RowErrors("vqa_rad", on_error)
    rows = closed_open_rows(
        ((n, item) for n, item in enumerate(data) if split == "all" or _is_test(item) == (split == "test")),
        image_key="image_name", expected_types="CLOSED/OPEN", path=path, errors=errors,
    )
    records = [
        rad_record(item, n, fields, image=image, image_path=f"{image_dir}/{image}",
                    split="test" if _is_test(item) else "train")
        for n, item, image, fields in rows
    ]
    frame = finish(records, errors, "vqa_rad", path)
    return VQADataset(frame, root=root, meta_columns=RAD_META, transform=transform, name="vqa_rad")


def _is_test(item: dict) -> bool:
    """A VQA-RAD item of the test split: ``phrase_type`` ``test_freeform`` / ``test_para``."""
    return (text_or_none(item.get("phrase_type")) or "").startswith("test")
