"""The VQA dataset shared by the loaders, answer letters and the closed/open item rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.io import ImageReadError
from medimg_bench.datasets.vqa.readers import (
    RowErrors,
    decode_image,
    load_json,
    text_or_none,
)
from medimg_bench.sample import SampleError

__all__ = ["VQADataset"]
LETTERS = "ABCDEFGHIJ"


class VQADataset(ManifestDataset):
    """A VQA dataset over a manifest.

    Manifest columns: ``id``, ``question``, ``options`` (list or None), ``answer``,
    ``answer_type``, ``patient_id``; images either as ``image_path`` (a path, or a list of paths
    for multi-image rows, relative to ``root``) or provided by ``blob_reader(row) ->
    list[(bytes, where)]`` for datasets that embed images (base64 TSV, parquet). ``multi_image``:
    ``image`` is always a list. Other columns listed in ``meta_columns`` go to ``meta``.
    """

    task = "vqa"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None = None,
        multi_image: bool = False,
        blob_reader: Callable[[Mapping[str, Any]], list[tuple[bytes, str]]] | None = None,
        meta_columns: Sequence[str] = (),
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        cols = ["image_path"] if "image_path" in manifest.columns else []
        super().__init__(manifest, root=root, path_columns=cols, transform=transform, name=name)
        self.multi_image = multi_image
        self.blob_reader = blob_reader
        self.meta_columns = tuple(meta_columns)

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        sid = str(row["id"])
        paths: list[str] | None = None
        images: list[Any] | None = None
        if not self.pixels:  # the model reads no pixel (stored answers): question and answer only
            value = row.get("image_path")
            if isinstance(value, (str, list)) and value:
                paths = [str(self.resolve(p)) for p in (value if isinstance(value, list) else [value])]
        elif self.blob_reader is not None:
            images, paths = [], []
            for data, where in self.blob_reader(row):
                try:
                    images.append(decode_image(data, where=where))
                except ImageReadError as exc:
                    raise SampleError(exc.problem, sample_id=sid, path=where) from exc
                paths.append(where)
        else:
            value = row["image_path"]
            paths = [str(self.resolve(p)) for p in (value if isinstance(value, list) else [value])]
            images = [decode_image(p) for p in paths]
        meta = self.meta_for(row)
        for col in self.meta_columns:
            value = row.get(col)
            if value is not None and not (isinstance(value, float) and pd.isna(value)):
                meta[col] = value
        if paths:
            meta["path"] = paths if self.multi_image else paths[0]
        options = row.get("options")
        answer = row.get("answer")
        sample = {
            "id": sid,
            "question": str(row["question"]),
            "options": list(options) if isinstance(options, list | tuple) else None,
            "answer": None if answer is None or (isinstance(answer, float) and pd.isna(answer)) else str(answer),
            "answer_type": str(row["answer_type"]),
            "meta": meta,
        }
        if images is not None:
            sample["image"] = images if self.multi_image else images[0]
        return sample


# -- helpers ------------------------------------------------------------------------------------


def _unique_ids(ids: Sequence[str]) -> list[str]:
    """Ids made unique by suffixing repeats with ``_1``, ``_2``... (first keeps its id)."""
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        n = seen.get(i, 0)
        seen[i] = n + 1
        out.append(i if n == 0 else f"{i}_{n}")
    return out


_OPTION_PREFIX = re.compile(r"^\s*\(?([A-J])\s*[\.:)]\s*")


def strip_letter(option: str, letter: str) -> str:
    """Option text without a leading ``"A:"``, ``"A."``, ``"(A)"`` or ``"A)"`` for ``letter``."""
    m = _OPTION_PREFIX.match(option)
    return option[m.end() :].strip() if m and m.group(1) == letter else option.strip()


def answer_letter(answer: str, options: Sequence[str]) -> str | None:
    """The letter of ``answer`` among ``options``: a letter, a prefixed letter or option text."""
    a = answer.strip()
    m = re.fullmatch(r"\(?([A-J])\)?[\.:]?", a)
    if m and LETTERS.index(m.group(1)) < len(options):
        return m.group(1)
    m = _OPTION_PREFIX.match(a)
    if m and LETTERS.index(m.group(1)) < len(options):
        return m.group(1)
    for i, opt in enumerate(options):
        if opt.strip() == a:
            return LETTERS[i]
    for i, opt in enumerate(options):
        if opt.strip().lower() == a.lower():
            return LETTERS[i]
    return None


def mcq_fields(answer: Any, options: Sequence[str]) -> dict[str, Any] | str:
    """A multiple-choice record's ``options``, ``answer`` (its letter), ``answer_type`` and
    ``answer_text``; or the problem when ``answer`` is neither a letter nor one of ``options``."""
    letter = answer_letter(str(answer), options)
    if letter is None:
        return f"answer {answer!r} is neither a letter nor one of the {len(options)} options"
    return {"options": options, "answer": letter, "answer_type": "mcq",
            "answer_text": options[LETTERS.index(letter)]}


def _type_from_original(value: Any) -> str | None:
    t = text_or_none(value)
    return {"CLOSED": "closed", "OPEN": "open"}.get(t.upper()) if t else None


def _closed_open_item(
    item: Mapping[str, Any],
    n: int,
    *,
    image_key: str,
    expected_types: str,
    path: Path,
    errors: RowErrors,
) -> tuple[str, dict[str, Any]] | None:
    """Image name and the question fields of one VQA-RAD/SLAKE JSON item with a CLOSED/OPEN
    ``answer_type``; ``None`` (after reporting to ``errors``) when the item is unusable."""
    label = f"{n} (qid {item.get('qid')})"
    image, question = text_or_none(item.get(image_key)), text_or_none(item.get("question"))
    answer, atype = text_or_none(item.get("answer")), _type_from_original(item.get("answer_type"))
    if not image or not question or answer is None:
        errors(path, label, f"missing {image_key}, question or answer")
        return None
    if atype is None:
        errors(path, label, f"answer_type {item.get('answer_type')!r} is not {expected_types}")
        return None
    return image, {
        "question": question,
        "options": None,
        "answer": answer,
        "answer_type": atype,
        "answer_type_original": str(item.get("answer_type")).strip(),
    }


def closed_open_rows(
    items: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    image_key: str,
    expected_types: str,
    path: Path,
    errors: RowErrors,
) -> Iterator[tuple[int, Mapping[str, Any], str, dict[str, Any]]]:
    """``(n, item, image, question fields)`` of each usable ``(JSON row n, item)`` of ``items``
    (:func:`_closed_open_item`); the others are reported to ``errors``."""
    for n, item in items:
        parsed = _closed_open_item(
            item, n, image_key=image_key, expected_types=expected_types, path=path, errors=errors
        )
        if parsed is not None:
            yield n, item, *parsed


#: The manifest columns VQA-RAD-style records pass to the sample's meta.
RAD_META = ("answer_type_original", "phrase_type", "question_type", "organ")


def rad_record(
    item: Mapping[str, Any], n: int, fields: dict[str, Any], *, image: str, image_path: str, split: str
) -> dict[str, Any]:
    """One VQA-RAD-style question (the official JSON or the MICCAI19 layout): ids, image, the
    question ``fields``, ``phrase_type``, ``question_type``, ``organ``."""
    return {
        "id": str(item.get("qid", n)),
        "image_path": image_path,
        "patient_id": image,
        **fields,
        "phrase_type": text_or_none(item.get("phrase_type")) or "",
        "question_type": text_or_none(item.get("question_type")),
        "organ": text_or_none(item.get("image_organ")),
        "modality": "radiology",
        "split": split,
    }


def finish(
    records: list[dict[str, Any]], errors: RowErrors, name: str, where: str | Path
) -> pd.DataFrame:
    errors.finish()
    if not records:
        raise ValueError(f"{name}: no questions found in {str(where)!r}")
    frame = pd.DataFrame(records)
    frame["id"] = _unique_ids(frame["id"].astype(str).tolist())
    return frame


def miccai19(
    folder: Path, split: str, name: str, on_error: str, transform: Callable[[dict], dict] | None
) -> VQADataset:
    """The MICCAI19-MedVQA layout: ``trainset.json`` / ``testset.json`` + ``images/``; the split
    is the file (``all`` = both)."""
    files = {"train": ["trainset.json"], "test": ["testset.json"], "all": ["trainset.json", "testset.json"]}[split]
    errors = RowErrors(name, on_error)
    records = []
    for fname in files:
        path = folder / fname
        rows = closed_open_rows(
            enumerate(load_json(path)), image_key="image_name", expected_types="CLOSED/OPEN", path=path, errors=errors
        )
        part = "train" if fname.startswith("train") else "test"
        records += [rad_record(item, n, fields, image=image, image_path=f"images/{image}", split=part)
                    for n, item, image, fields in rows]
    frame = finish(records, errors, name, folder)
    return VQADataset(frame, root=folder, meta_columns=RAD_META, transform=transform, name=name)
