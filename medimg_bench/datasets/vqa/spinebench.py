"""The ``spinebench`` dataset: SpineBench's multiple-choice items (Zhao et al. 2025,
arXiv:2510.03160, "SpineBench: A Clinically Salient, Level-Aware Benchmark Powered by the
SpineMed-450k Corpus": 487 close-ended questions on X-ray, CT and MRI, across level
identification, pathology assessment and surgical planning).

**The item schema is derived from the paper, not read from a release**: no released file names
or fields were found (docs/datasets.md, "spinebench", says what was searched). Every field name
is therefore an option, so the release, once public, maps onto it in one line
(``fields={"image": "img_paths", "answer": "gt"}``). The default schema — one JSON list or JSONL
file of items under ``root``:

    {"id": "sb-0001", "image": ["xr/0001.png"], "question": "...",
     "options": ["L3-L4", "L4-L5", "L5-S1", "T12-L1"] | {"A": "...", "B": ...},
     "answer": "B" | "L4-L5", "category": "level identification",
     "subcategory": "disc herniation", "level": "L4-L5" | ["L4-L5", "L5-S1"],
     "modality": "MRI", "case_id": "p17"}

Required: ``image`` (a path or a list, relative to ``image_root``, default ``root``),
``question``, ``options`` (texts in letter order, optionally prefixed ``"A."``, or a letter→text
mapping), ``answer`` (a letter or one option's text) and ``category`` (the clinical axis).
Optional (``None`` when absent; map a field to ``None`` to say the release has none): ``id``
(default: the row number), ``subcategory``, ``level``, ``modality``, ``patient`` (default: the
first image, so questions on one image stay together in the bootstrap).

The manifest adds what the accuracy tree is read from: ``category``, ``subcategory``,
``category_path`` (``category/subcategory``), ``modality``, ``level`` (as written, lists joined
by ``", "``) and ``region`` — the spinal regions the level names, in order (``C`` cervical,
``T`` thoracic, ``L`` lumbar, ``S`` sacral; ``T12-L1`` → ``thoracic-lumbar``). The tree:
``subgroups=[category,category_path,modality,region]`` (overall accuracy is the run's).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from medimg_bench.datasets.vqa.base import (
    LETTERS,
    VQADataset,
    finish,
    mcq_fields,
    strip_letter,
)
from medimg_bench.datasets.vqa.readers import (
    RowErrors,
    json_list,
    load_jsonl,
    only_file,
    text_or_none,
)
from medimg_bench.registry import register_dataset

__all__ = ["spinebench", "DEFAULT_FIELDS", "spinal_region"]

# Our name -> the item key (a dotted path reaches into nested objects). Derived from the paper.
DEFAULT_FIELDS: dict[str, str | None] = {
    "id": "id", "image": "image", "question": "question", "options": "options", "answer": "answer",
    "category": "category", "subcategory": "subcategory", "level": "level", "modality": "modality",
    "patient": "case_id",
}
REQUIRED = ("image", "question", "options", "answer", "category")
_REGIONS = {"C": "cervical", "T": "thoracic", "L": "lumbar", "S": "sacral"}
_VERTEBRA = re.compile(r"\b([CTLS])\s?\d{1,2}\b", re.IGNORECASE)


def spinal_region(level: str | None) -> str | None:
    """The spinal regions a level names, in order of first mention and joined by ``-``
    (``"L4-L5"`` → ``lumbar``, ``"T12-L1"`` → ``thoracic-lumbar``, ``"C5/6"`` → ``cervical``);
    ``None`` when no vertebra (C1–C7, T1–T12, L1–L5, S1–S5 style) is named."""
    if not level:
        return None
    regions: list[str] = []
    for letter in _VERTEBRA.findall(level):
        name = _REGIONS[letter.upper()]
        if name not in regions:
            regions.append(name)
    return "-".join(regions) or None


def _fields(fields: Mapping[str, str | None] | None) -> dict[str, str | None]:
    out = dict(DEFAULT_FIELDS)
    for key, value in (fields or {}).items():
        if key not in DEFAULT_FIELDS:
            raise ValueError(f"spinebench: unknown field {key!r} in fields=; the fields are {sorted(DEFAULT_FIELDS)}")
        if value is None and key in REQUIRED:
            raise ValueError(f"spinebench: field {key!r} is required and cannot be mapped to None")
        if value is not None and not isinstance(value, str):
            raise ValueError(f"spinebench: fields[{key!r}] must be an item key (str) or None, got {value!r}")
        out[key] = value
    return out


def _get(item: Mapping[str, Any], key: str | None) -> Any:
    """``item[key]``, following a dotted path into nested objects; None when absent."""
    if key is None:
        return None
    if key in item:
        return item[key]
    node: Any = item
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _items_file(root: Path, file: str | None) -> Path:
    if file is not None:
        path = root / file
        if not path.is_file():
            raise FileNotFoundError(f"spinebench: item file {str(path)!r} does not exist")
        return path
    found = sorted(p for p in root.glob("*.json*") if p.suffix in (".json", ".jsonl") and p.is_file())
    missing = f"no .json or .jsonl item file under {str(root)!r} (name one with file=)"
    return only_file(found, root, name="spinebench", missing=missing, what="item", hint="; name one with file=")


def _read_items(path: Path) -> list[Any]:
    if path.suffix == ".jsonl":
        return load_jsonl(path)
    return json_list(path, "spinebench", "items (or be .jsonl, one per line)")


def _options(raw: Any) -> list[str] | str:
    """Option texts in letter order, or the problem."""
    if isinstance(raw, Mapping):
        letters = sorted(str(k).strip().upper() for k in raw)
        if letters != list(LETTERS[: len(letters)]):
            return f"option keys {sorted(raw)} are not the letters A, B, ... in order"
        by_letter = {str(k).strip().upper(): v for k, v in raw.items()}
        raw = [by_letter[letter] for letter in letters]
    if not isinstance(raw, list) or len(raw) < 2 or len(raw) > len(LETTERS):
        return f"options must be 2 to {len(LETTERS)} texts (a list or a letter mapping), got {raw!r}"
    texts = [strip_letter(str(o), LETTERS[i]) for i, o in enumerate(raw)]
    return texts if all(texts) else f"an option is empty: {raw!r}"


def _joined(value: Any) -> str | None:
    if isinstance(value, list):
        parts = [t for v in value if (t := text_or_none(v))]
        return ", ".join(parts) or None
    return text_or_none(value)


def _item(item: Any, n: int, fields: Mapping[str, str | None], ctx: tuple[Path, RowErrors]) -> dict[str, Any] | None:
    path, errors = ctx
    if not isinstance(item, Mapping):
        errors(path, n, f"an item must be an object, got {type(item).__name__}")
        return None
    values = {name: _get(item, key) for name, key in fields.items()}
    label = f"{n} ({fields['id']} {values['id']})" if values["id"] is not None else n
    for name in REQUIRED:
        if values[name] is None or (name != "options" and _joined(values[name]) is None):
            errors(path, label, f"missing field {fields[name]!r} ({name}); the item has {sorted(item)}; "
                   f"map another key with fields={{{name!r}: KEY}}")
            return None
    images = values["image"]
    images = [str(p) for p in (images if isinstance(images, list) else [images]) if text_or_none(p)]
    options = _options(values["options"])
    if isinstance(options, str):
        errors(path, label, options)
        return None
    mcq = mcq_fields(values["answer"], options)
    if isinstance(mcq, str):
        errors(path, label, mcq)
        return None
    category, sub, level = text_or_none(values["category"]), text_or_none(values["subcategory"]), _joined(values["level"])
    return {
        "id": str(values["id"] if values["id"] is not None else n),
        "patient_id": text_or_none(values["patient"]) or images[0], "image_path": images,
        "question": text_or_none(values["question"]), **mcq, "category": category, "subcategory": sub,
        "category_path": f"{category}/{sub}" if sub else category, "level": level,
        "region": spinal_region(level), "modality": text_or_none(values["modality"]), "split": "test", "json_row": n,
    }


@register_dataset("spinebench", tags=("vqa", "mcq", "multi_image", "spine"))
def spinebench(
    root: str | Path,
    split: str = "test",
    *,
    file: str | None = None,
    fields: Mapping[str, str | None] | None = None,
    image_root: str | Path | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """SpineBench's multiple-choice items over the paper-derived schema (module docstring):
    ``file`` the JSON/JSONL under ``root`` (default: the only one there), ``fields`` our name →
    the item's key, ``image_root`` where image paths start (default ``root``). ``split`` is
    ``test`` (the benchmark has no other). Returns a multi-image :class:`VQADataset` whose
    manifest carries the accuracy tree's columns."""
    if split != "test":
        raise ValueError(f"spinebench: the benchmark has only split 'test', got {split!r}")
    root = Path(root)
    mapping = _fields(fields)
    path = _items_file(root, file)
    errors = RowErrors("spinebench", on_error)
    records = [r for n, item in enumerate(_read_items(path)) if (r := _item(item, n, mapping, (path, errors)))]
    frame = finish(records, errors, "spinebench", path)
    return VQADataset(
        frame, root=Path(image_root) if image_root is not None else root, multi_image=True,
        meta_columns=("category", "subcategory", "category_path", "level", "region", "modality", "answer_text"),
        transform=transform, name="spinebench",
    )
