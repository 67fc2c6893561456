"""The ``gmai_mmbench`` dataset. GMAI-MMBench (Chen et al. 2024): ``GMAI-MMBench_VAL.tsv`` / ``GMAI-MMBench_TEST.tsv``
(VLMEvalKit format: ``index``, ``question``, option columns ``A``..``E``, ``answer``,
base64 ``image``; an ``image`` cell holding another row's index reuses that row's image).
TEST has no answers: its samples have ``answer=None`` (score them on the official server);
a warning says so."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from medimg_bench.datasets.vqa.base import LETTERS, VQADataset, finish
from medimg_bench.datasets.vqa.readers import (
    Base64Images,
    RowErrors,
)
from medimg_bench.registry import register_dataset

__all__ = ["gmai_mmbench"]

log = logging.getLogger(__name__)


# -- GMAI-MMBench -------------------------------------------------------------------------------


@register_dataset("gmai_mmbench", tags=("vqa", "mcq"))
def gmai_mmbench(
    root: str | Path,
    split: str = "val",
    *,
    tsv: str | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """GMAI-MMBench (Chen et al. 2024): ``GMAI-MMBench_VAL.tsv`` / ``GMAI-MMBench_TEST.tsv``
    (VLMEvalKit format: ``index``, ``question``, option columns ``A``..``E``, ``answer``,
    base64 ``image``; an ``image`` cell holding another row's index reuses that row's image).
    TEST has no answers: its samples have ``answer=None`` (score them on the official server);
    a warning says so."""
    root = Path(root)
    path = root / (tsv or f"GMAI-MMBench_{split.upper()}.tsv")
    if not path.exists():
        raise FileNotFoundError(f"gmai_mmbench: {str(path)!r} does not exist")
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    for col in ("index", "question", "image"):
        if col not in table.columns:
            raise ValueError(f"gmai_mmbench: {str(path)!r} has no column {col!r}")
    has_answer = "answer" in table.columns and (table["answer"].str.strip() != "").any()
    if not has_answer:
        log.warning(
            "gmai_mmbench: %s has no answers (the TEST split withholds them); samples get "
            "answer=None — submit predictions to the official evaluation server",
            path,
        )
    letters = [c for c in LETTERS if c in table.columns]
    images = dict(zip(table["index"].astype(str), table["image"]))
    extra_cols = [
        c for c in table.columns if c not in {"index", "question", "image", "answer", *letters}
    ]
    errors = RowErrors("gmai_mmbench", on_error)
    records = []
    for n, rec in enumerate(table.to_dict("records")):
        label = f"{n} (index {rec['index']})"
        options = [rec[c].strip() for c in letters if rec[c].strip()]
        if not options or not rec["question"].strip():
            errors(path, label, "missing question or options")
            continue
        ref = rec["index"]
        image = rec["image"].strip()
        if len(image) <= 64 and image in images and image != ref:
            ref = image  # VLMEvalKit stores repeated images as the index of the first row
        elif not image:
            errors(path, label, "empty image cell")
            continue
        answer = rec.get("answer", "").strip() if has_answer else ""
        if has_answer and answer not in LETTERS[: len(options)]:
            errors(path, label, f"answer {answer!r} is not one of {list(LETTERS[: len(options)])}")
            continue
        item = {
            "id": str(rec["index"]),
            "image_ref": ref,
            "patient_id": ref,
            "question": rec["question"].strip(),
            "options": options,
            "answer": answer or None,
            "answer_type": "mcq",
            "answer_text": options[LETTERS.index(answer)] if answer else None,
            "split": split,
        }
        item.update({c: rec[c] for c in extra_cols})
        records.append(item)
    frame = finish(records, errors, "gmai_mmbench", path)
    if "modality" not in frame.columns:
        frame["modality"] = None
    return VQADataset(
        frame,
        root=root,
        blob_reader=Base64Images(images, path),
        meta_columns=("answer_text", *[c for c in extra_cols if c != "modality"]),
        transform=transform,
        name="gmai_mmbench",
    )
