"""The ``slake`` dataset. SLAKE 1.0 (Liu et al. 2021): ``train.json`` / ``validate.json`` / ``test.json`` and
``imgs/xmlabN/source.jpg``. ``language``: keep ``q_lang`` == it (None: both en and zh).
``answer_type`` OPEN/CLOSED kept as given (SLAKE's CLOSED includes non yes/no choices).
The MICCAI19-MedVQA layout (``trainset.json`` / ``testset.json`` + ``images/``, in ``root`` or
``root/data_SLAKE``) is chosen automatically when ``<split>.json`` is absent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from medimg_bench.datasets.vqa.base import VQADataset, closed_open_rows, finish, miccai19
from medimg_bench.datasets.vqa.readers import RowErrors, load_json, text_or_none
from medimg_bench.registry import register_dataset

__all__ = ["slake"]


# -- SLAKE --------------------------------------------------------------------------------------


@register_dataset("slake", tags=("vqa", "radiology"))
def slake(
    root: str | Path,
    split: str = "test",
    *,
    language: str | None = "en",
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """SLAKE 1.0 (Liu et al. 2021): ``train.json`` / ``validate.json`` / ``test.json`` and
    ``imgs/xmlabN/source.jpg``. ``language``: keep ``q_lang`` == it (None: both en and zh).
    ``answer_type`` OPEN/CLOSED kept as given (SLAKE's CLOSED includes non yes/no choices).
    The MICCAI19-MedVQA layout (``trainset.json`` / ``testset.json`` + ``images/``, in ``root`` or
    ``root/data_SLAKE``) is chosen automatically when ``<split>.json`` is absent."""
    root = Path(root)
    files = {"train": "train.json", "val": "validate.json", "validate": "validate.json", "test": "test.json"}
    if split not in files:
        raise ValueError(f"slake: split must be one of {list(files)}, got {split!r}")
    path = root / files[split]
    if not path.exists():
        miccai = next(
            (d for d in (root / "data_SLAKE", root) if (d / "testset.json").exists()), None
        )
        if miccai is not None and split in ("train", "test"):
            return miccai19(miccai, split, "slake", on_error, transform)
    errors = RowErrors("slake", on_error)
    records = []
    rows = closed_open_rows(
        ((n, item) for n, item in enumerate(load_json(path)) if language is None or item.get("q_lang") == language),
        image_key="img_name", expected_types="OPEN/CLOSED", path=path, errors=errors,
    )
    for n, item, image, fields in rows:
        records.append(
            {
                "id": str(item.get("qid", n)),
                "image_path": f"imgs/{image}",
                "patient_id": image.split("/")[0],
                **fields,
                "modality": text_or_none(item.get("modality")),
                "location": text_or_none(item.get("location")),
                "content_type": text_or_none(item.get("content_type")),
                "language": item.get("q_lang"),
                "split": split,
            }
        )
    frame = finish(records, errors, "slake", path)
    return VQADataset(
        frame,
        root=root,
        meta_columns=("answer_type_original", "location", "content_type", "language"),
        transform=transform,
        name="slake",
    )
