"""Medical visual question answering datasets, read from their released layouts.

Samples: ``id``, ``image`` (float ``C×H×W`` in ``[0, 1]``, or a list of them for multi-image
datasets), ``question``, ``options`` (list of option texts in letter order, or None),
``answer`` (the option letter for multiple choice, the answer text otherwise; None where the
release withholds answers), ``answer_type`` (``closed`` / ``open`` / ``mcq``) and ``meta``
(``patient_id`` = the image or source video, so splits keep questions on one image together;
``answer_type_original`` when the dataset's own type differs; ``answer_text`` for mcq).

Bad rows (unknown answer letter, missing fields) raise ``ValueError`` naming the file and row
at construction, or are skipped with a logged count with ``on_error="skip"``; unreadable images
raise :class:`~medimg_bench.sample.SampleError` naming the sample and file when loaded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets._vqa_io import (
    _Base64Images,
    _load_json,
    _load_jsonl,
    _parquet_rows,
    _ParquetImages,
    _RowErrors,
    _text,
    decode_image,
)
from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.io import ImageReadError
from medimg_bench.registry import register_dataset
from medimg_bench.sample import SampleError

__all__ = [
    "VQADataset",
    "decode_image",
    "vqa_rad",
    "slake",
    "pathvqa",
    "pmc_vqa",
    "omnimedvqa",
    "gmai_mmbench",
    "medxpertqa_mm",
    "medframeqa",
]

log = logging.getLogger(__name__)
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
        if self.blob_reader is not None:
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
        return {
            "id": sid,
            "image": images if self.multi_image else images[0],
            "question": str(row["question"]),
            "options": list(options) if isinstance(options, list | tuple) else None,
            "answer": None if answer is None or (isinstance(answer, float) and pd.isna(answer)) else str(answer),
            "answer_type": str(row["answer_type"]),
            "meta": meta,
        }


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


def _strip_letter(option: str, letter: str) -> str:
    """Option text without a leading ``"A:"``, ``"A."``, ``"(A)"`` or ``"A)"`` for ``letter``."""
    m = _OPTION_PREFIX.match(option)
    return option[m.end() :].strip() if m and m.group(1) == letter else option.strip()


def _answer_letter(answer: str, options: Sequence[str]) -> str | None:
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


def _type_from_original(value: Any) -> str | None:
    t = _text(value)
    return {"CLOSED": "closed", "OPEN": "open"}.get(t.upper()) if t else None


def _closed_open_item(
    item: Mapping[str, Any],
    n: int,
    *,
    image_key: str,
    expected_types: str,
    path: Path,
    errors: _RowErrors,
) -> tuple[str, dict[str, Any]] | None:
    """Image name and the question fields of one VQA-RAD/SLAKE JSON item with a CLOSED/OPEN
    ``answer_type``; ``None`` (after reporting to ``errors``) when the item is unusable."""
    label = f"{n} (qid {item.get('qid')})"
    image, question = _text(item.get(image_key)), _text(item.get("question"))
    answer, atype = _text(item.get("answer")), _type_from_original(item.get("answer_type"))
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


def _finish(
    records: list[dict[str, Any]], errors: _RowErrors, name: str, where: str | Path
) -> pd.DataFrame:
    errors.finish()
    if not records:
        raise ValueError(f"{name}: no questions found in {str(where)!r}")
    frame = pd.DataFrame(records)
    frame["id"] = _unique_ids(frame["id"].astype(str).tolist())
    return frame


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
            return _miccai19(miccai, split, "slake", on_error, transform)
    errors = _RowErrors("slake", on_error)
    records = []
    for n, item in enumerate(_load_json(path)):
        if language is not None and item.get("q_lang") != language:
            continue
        parsed = _closed_open_item(
            item, n, image_key="img_name", expected_types="OPEN/CLOSED", path=path, errors=errors
        )
        if parsed is None:
            continue
        image, fields = parsed
        records.append(
            {
                "id": str(item.get("qid", n)),
                "image_path": f"imgs/{image}",
                "patient_id": image.split("/")[0],
                **fields,
                "modality": _text(item.get("modality")),
                "location": _text(item.get("location")),
                "content_type": _text(item.get("content_type")),
                "language": item.get("q_lang"),
                "split": split,
            }
        )
    frame = _finish(records, errors, "slake", path)
    return VQADataset(
        frame,
        root=root,
        meta_columns=("answer_type_original", "location", "content_type", "language"),
        transform=transform,
        name="slake",
    )


# -- PathVQA ------------------------------------------------------------------------------------


@register_dataset("pathvqa", tags=("vqa", "pathology"))
def pathvqa(
    root: str | Path,
    split: str = "test",
    *,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """PathVQA (He et al. 2020) from the Hugging Face parquet release
    (``data/{train,validation,test}-*.parquet``: ``image``, ``question``, ``answer``) or from a
    ``{split}.csv`` / ``{split}.jsonl`` with ``image`` (path under ``root``), ``question``,
    ``answer``. The original pickled ``.pkl`` files are not read (never unpickle). Yes/no answers
    are ``closed``, the rest ``open`` (the paper's split)."""
    root = Path(root)
    hf_split = {"val": "validation", "validate": "validation"}.get(split, split)
    errors = _RowErrors("pathvqa", on_error)
    parquet = sorted((root / "data").glob(f"{hf_split}-*.parquet"))
    table_files = [root / f"{split}.csv", root / f"{split}.jsonl"]
    records = []
    blob_reader = None
    if parquet:
        source: Path = root / "data"
        rows: Iterable[dict[str, Any]] = _parquet_rows(parquet, root, "image")
        blob_reader = _ParquetImages(root, "image")
    else:
        found = [f for f in table_files if f.exists()]
        if not found:
            raise FileNotFoundError(
                f"pathvqa: neither data/{hf_split}-*.parquet nor {split}.csv/.jsonl under {str(root)!r}"
            )
        source = found[0]
        rows = (
            pd.read_csv(source, dtype=str).to_dict("records")
            if source.suffix == ".csv"
            else _load_jsonl(source)
        )
    for n, rec in enumerate(rows):
        question, answer = _text(rec.get("question")), _text(rec.get("answer"))
        where = rec.get("parquet_file", source)
        if not question or answer is None:
            errors(where, n, "missing question or answer")
            continue
        item = {
            "id": f"{hf_split}_{n:06d}",
            "question": question,
            "options": None,
            "answer": answer,
            "answer_type": "closed" if answer.lower() in ("yes", "no") else "open",
            "modality": "pathology",
            "split": split,
        }
        if blob_reader is not None:
            item.update({k: rec[k] for k in ("parquet_file", "row_group", "row_offset", "row_number")})
        else:
            image = _text(rec.get("image"))
            if not image:
                errors(source, n, "missing image path")
                continue
            item["image_path"] = image
            item["patient_id"] = image
        records.append(item)
    frame = _finish(records, errors, "pathvqa", source)
    return VQADataset(frame, root=root, blob_reader=blob_reader, transform=transform, name="pathvqa")


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
    errors = _RowErrors("pmc_vqa", on_error)
    records = []
    for n, rec in enumerate(table.to_dict("records")):
        line = n + 2  # header is line 1
        options = [_strip_letter(rec[f"Choice {c}"], c) for c in "ABCD"]
        letter = (_text(rec["Answer_label"]) or "").upper()
        if letter not in ("A", "B", "C", "D"):
            errors(path, f"line {line}", f"Answer_label {rec['Answer_label']!r} is not A-D")
            continue
        if not options[LETTERS.index(letter)]:
            errors(path, f"line {line}", f"answer {letter} points to an empty choice")
            continue
        if not _text(rec["Figure_path"]) or not _text(rec["Question"]):
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
    frame = _finish(records, errors, "pmc_vqa", path)
    return VQADataset(frame, root=root, meta_columns=("answer_text",), transform=transform, name="pmc_vqa")


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
    errors = _RowErrors("omnimedvqa", on_error)
    records = []
    for f in files:
        for n, item in enumerate(_load_json(f)):
            label = f"{n} (question_id {item.get('question_id')})"
            options = [o for o in (_text(item.get(f"option_{c}")) for c in "ABCDEF") if o is not None]
            gt, image = _text(item.get("gt_answer")), _text(item.get("image_path"))
            if not options or gt is None or not image or not _text(item.get("question")):
                errors(f, label, "missing question, options, gt_answer or image_path")
                continue
            letter = _answer_letter(gt, options)
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
                    "modality": _text(item.get("modality_type")),
                    "source_dataset": _text(item.get("dataset")) or f.stem,
                    "question_type": _text(item.get("question_type")),
                    "split": split,
                }
            )
    frame = _finish(records, errors, "omnimedvqa", folder)
    return VQADataset(
        frame,
        root=root,
        meta_columns=("answer_text", "source_dataset", "question_type"),
        transform=transform,
        name="omnimedvqa",
    )


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
    errors = _RowErrors("gmai_mmbench", on_error)
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
    frame = _finish(records, errors, "gmai_mmbench", path)
    if "modality" not in frame.columns:
        frame["modality"] = None
    return VQADataset(
        frame,
        root=root,
        blob_reader=_Base64Images(images, path),
        meta_columns=("answer_text", *[c for c in extra_cols if c != "modality"]),
        transform=transform,
        name="gmai_mmbench",
    )


# -- MedXpertQA MM ------------------------------------------------------------------------------

_CHOICES_TAIL = re.compile(r"\s*Answer Choices:\s*\(A\).*\Z", re.S)


@register_dataset("medxpertqa_mm", tags=("vqa", "mcq", "multi_image"))
def medxpertqa_mm(
    root: str | Path,
    split: str = "test",
    *,
    strip_choices: bool = True,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """MedXpertQA multimodal subset (Zuo et al. 2025): ``MM/test.jsonl`` / ``MM/dev.jsonl``
    with ``id``, ``question``, ``options`` (dict letter → text), ``label`` (letter), ``images``
    (file names in ``images/``). ``image`` is a list (questions have one or more images).
    ``strip_choices`` removes the ``Answer Choices: (A) ...`` tail that the release appends to
    the question (the options are in ``options``); the original is ``meta['question_original']``."""
    root = Path(root)
    name = {"val": "dev", "validation": "dev"}.get(split, split)
    path = root / "MM" / f"{name}.jsonl"
    errors = _RowErrors("medxpertqa_mm", on_error)
    records = []
    for n, item in enumerate(_load_jsonl(path)):
        label = f"{n} (id {item.get('id')})"
        opts = item.get("options")
        images = item.get("images") or []
        if not isinstance(opts, dict) or not opts or not images or not _text(item.get("question")):
            errors(path, label, "missing question, options dict or images")
            continue
        keys = sorted(opts)
        if keys != list(LETTERS[: len(keys)]):
            errors(path, label, f"option keys {keys} are not consecutive letters from A")
            continue
        answer = (_text(item.get("label")) or "").upper()
        if answer not in keys:
            errors(path, label, f"label {item.get('label')!r} is not one of {keys}")
            continue
        question = str(item["question"]).strip()
        records.append(
            {
                "id": str(item.get("id", n)),
                "image_path": [f"images/{i}" for i in images],
                "patient_id": str(item.get("id", n)),
                "question": _CHOICES_TAIL.sub("", question) if strip_choices else question,
                "question_original": question,
                "options": [str(opts[k]).strip() for k in keys],
                "answer": answer,
                "answer_type": "mcq",
                "answer_text": str(opts[answer]).strip(),
                "medical_task": _text(item.get("medical_task")),
                "body_system": _text(item.get("body_system")),
                "question_type": _text(item.get("question_type")),
                "split": split,
            }
        )
    frame = _finish(records, errors, "medxpertqa_mm", path)
    return VQADataset(
        frame,
        root=root,
        multi_image=True,
        meta_columns=("answer_text", "question_original", "medical_task", "body_system", "question_type"),
        transform=transform,
        name="medxpertqa_mm",
    )


# -- MedFrameQA ---------------------------------------------------------------------------------


@register_dataset("medframeqa", tags=("vqa", "mcq", "multi_image"))
def medframeqa(
    root: str | Path,
    split: str = "test",
    *,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """MedFrameQA (Yu et al. 2025), Hugging Face parquet release ``data/test-*.parquet``:
    ``question_id``, ``question``, ``options`` (list), ``answer``, ``image`` (list of 2–5
    images), ``video_id``, ``system``, ``organ``, ``modality``. ``image`` is a list of tensors;
    ``patient_id`` is the source video. Letter prefixes on options are removed."""
    root = Path(root)
    files = sorted((root / "data").glob(f"{split}-*.parquet"))
    if not files:
        raise FileNotFoundError(f"medframeqa: no data/{split}-*.parquet under {str(root)!r}")
    errors = _RowErrors("medframeqa", on_error)
    records = []
    for rec in _parquet_rows(files, root, "image"):
        label = f"{rec['row_number']} (question_id {rec.get('question_id')})"
        raw = rec.get("options") or []
        options = [_strip_letter(str(o), LETTERS[i]) for i, o in enumerate(raw)]
        answer = _text(rec.get("answer"))
        if not options or answer is None or not _text(rec.get("question")):
            errors(rec["parquet_file"], label, "missing question, options or answer")
            continue
        letter = _answer_letter(answer, options)
        if letter is None:
            errors(rec["parquet_file"], label, f"answer {answer!r} matches none of {len(options)} options")
            continue
        records.append(
            {
                "id": str(rec.get("question_id") or rec["row_number"]),
                "patient_id": str(rec.get("video_id") or rec["row_number"]),
                "question": str(rec["question"]).strip(),
                "options": options,
                "answer": letter,
                "answer_type": "mcq",
                "answer_text": options[LETTERS.index(letter)],
                "modality": _text(rec.get("modality")),
                "system": _text(rec.get("system")),
                "organ": _text(rec.get("organ")),
                "split": split,
                **{k: rec[k] for k in ("parquet_file", "row_group", "row_offset", "row_number")},
            }
        )
    frame = _finish(records, errors, "medframeqa", root / "data")
    return VQADataset(
        frame,
        root=root,
        multi_image=True,
        blob_reader=_ParquetImages(root, "image"),
        meta_columns=("answer_text", "system", "organ"),
        transform=transform,
        name="medframeqa",
    )


def _miccai19(
    folder: Path, split: str, name: str, on_error: str, transform: Callable[[dict], dict] | None
) -> VQADataset:
    """The MICCAI19-MedVQA layout: ``trainset.json`` / ``testset.json`` + ``images/``; the split
    is the file (``all`` = both)."""
    files = {"train": ["trainset.json"], "test": ["testset.json"], "all": ["trainset.json", "testset.json"]}[split]
    errors = _RowErrors(name, on_error)
    records = []
    for fname in files:
        path = folder / fname
        for n, item in enumerate(_load_json(path)):
            parsed = _closed_open_item(
                item, n, image_key="image_name", expected_types="CLOSED/OPEN", path=path, errors=errors
            )
            if parsed is None:
                continue
            image, fields = parsed
            records.append({
                "id": str(item.get("qid", n)),
                "image_path": f"images/{image}",
                "patient_id": image,
                **fields,
                "phrase_type": _text(item.get("phrase_type")) or "",
                "question_type": _text(item.get("question_type")),
                "organ": _text(item.get("image_organ")),
                "modality": "radiology",
                "split": "train" if fname.startswith("train") else "test",
            })
    frame = _finish(records, errors, name, folder)
    return VQADataset(
        frame,
        root=folder,
        meta_columns=("answer_type_original", "phrase_type", "question_type", "organ"),
        transform=transform,
        name=name,
    )


@register_dataset("synthetic_vqa", tags=("vqa", "synthetic", "demo"))
def synthetic_vqa(
    root: str | Path | None = None,
    split: str | None = "test",
    *,
    n: int = 40,
    size: int = 64,
    seed: int = 0,
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """Closed yes/no questions about the synthetic chest X-ray phantoms ("Is there a pleural
    effusion?"), answered from the phantoms' labels: one question per finding and image, plus one
    open question ("Which view is this?"). Images are the phantom PNGs, read through the toolkit's
    readers, so the VQA path runs end to end offline. A random model scores near chance here."""
    from medimg_bench.datasets.synthetic import CXR_FINDINGS, synthetic_cxr

    base = synthetic_cxr(root=root, split=split, n=n, size=size, seed=seed)
    wording = {"nodule": "a lung nodule", "effusion": "a pleural effusion", "cardiomegaly": "cardiomegaly"}
    records = []
    for row in base.manifest.to_dict("records"):
        for finding in CXR_FINDINGS:
            records.append({
                "id": f"{row['id']}_{finding}", "image_path": row["image"], "patient_id": row["patient_id"],
                "question": f"Is there {wording[finding]} in this chest X-ray?", "options": None,
                "answer": "yes" if int(row[finding]) == 1 else "no", "answer_type": "closed",
                "question_type": "presence",
            })
        records.append({
            "id": f"{row['id']}_view", "image_path": row["image"], "patient_id": row["patient_id"],
            "question": "Which projection is this chest X-ray, PA or AP?", "options": None,
            "answer": str(row["view"]).lower(), "answer_type": "open", "question_type": "view",
        })
    return VQADataset(pd.DataFrame(records), root=base.root, meta_columns=("question_type",),
                      transform=transform, name="synthetic_vqa")
