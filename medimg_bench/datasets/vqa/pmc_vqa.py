"""The ``pmc_vqa`` dataset. PMC-VQA (Zhang et al. 2023): ``{split}_2.csv`` (version 2; else ``{split}.csv``, or
``csv=``) with ``Figure_path``, ``Question``, ``Answer``, ``Choice A``–``Choice D``,
``Answer_label``; figures in ``images/``. Option prefixes such as ``"A:"`` are removed;
``answer`` is the letter, the option text is ``meta['answer_text']``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from medimg_bench.datasets.vqa.base import LETTERS, VQADataset, finish, strip_letter
from medimg_bench.datasets.vqa.readers import (
    RowErrors,
    text_or_none,
)
from medimg_bench.registry import register_dataset

__all__ = ["pmc_vqa"]


# -- PMC-VQA ------------------------------------------------------------------------------------


@register_dataset("pmc_vqa", tags=("vqa", "mcq"))
def pmc_vqa(
    root: str | Path,
    split: str = "test",
    *,
    csv: str | None = None,
    image_dir: str = "images",
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """PMC-VQA (Zhang et al. 2023): ``{split}_2.csv`` (version 2; else ``{split}.csv``, or
    ``csv=``) with ``Figure_path``, ``Question``, ``Answer``, ``Choice A``–``Choice D``,
    ``Answer_label``; figures in ``images/``. Option prefixes such as ``"A:"`` are removed;
    ``answer`` is the letter, the option text is ``meta['answer_text']``."""
    root = Path(root)
    if csv is None:
        candidates = [root / f"{split}_2.csv", root / f"{split}.csv"]
        path = next((c for c in candidates if c.exists()), candidates[0])
    else:
        path = root / csv
    if not path.exists():
        raise FileNotFoundError(f"pmc_vqa: {str(path)!r} does not exist")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    need = ["Figure_path", "Question", "Answer_label"] + [f"Choice {c}" for c in "ABCD"]
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise ValueError(f"pmc_vqa: {str(path)!r} lacks columns {missing}")
    errors = RowErrors("pmc_vqa", on_error)
    records = []
    for n, rec in enumerate(table.to_dict("records")):
        line = n + 2  # header is line 1
        options = [strip_letter(rec[f"Choice {c}"], c) for c in "ABCD"]
        letter = (text_or_none(rec["Answer_label"]) or "").upper()
        if letter not in ("A", "B", "C", "D"):
            errors(path, f"line {line}", f"Answer_label {rec['Answer_label']!r} is not A-D")
            continue
        if not options[LETTERS.index(letter)]:
            errors(path, f"line {line}", f"answer {letter} points to an empty choice")
            continue
        if not text_or_none(rec["Figure_path"]) or not text_or_none(rec["Question"]):
            errors(path, f"line {line}", "missing Figure_path or Question")
            continue
        records.append(
            {
                "id": f"{path.stem}_{n:06d}",
                "image_path": f"{image_dir}/{rec['Figure_path'].strip()}",
                "patient_id": rec["Figure_path"].strip(),
                "question": rec["Question"].strip(),
                "options": options,
                "answer": letter,
                "answer_type": "mcq",
                "answer_text": options[LETTERS.index(letter)],
                "split": split,
            }
        )
    frame = finish(records, errors, "pmc_vqa", path)
    return VQADataset(frame, root=root, meta_columns=("answer_text",), transform=transform, name="pmc_vqa")
