"""The later stages of a CXReasonBench case (``cxreasonbench``'s ``stages=True``), read as the
harness reads them (ttumyche/CXReasonBench commit 72357fe):

* path 1 (``evaluation/evaluate_reasoning.py``): ``qa/<task>/path1/init/basic/<dicom>.json``
  (line 105), ``stage1/*/<dicom>.json`` (criteria: lists ``question`` / ``answer``; line 129,
  the first match of the glob — we take the first in sorted order), ``stage1.5/basic`` (custom
  criteria, only for tasks that have a ``stage1.5`` folder; lines 161-162), ``stage2/*/<dicom>.json``
  (body parts: lists ``question`` / ``answer`` and ``img_path`` a list of image lists per
  question, under ``segmask_bodypart``; lines 192-198), ``stage3/basic`` (measurement; line 226),
  ``stage4/basic`` (final decision; line 252);
* path 2, the guidance (``evaluation/evaluate_guidance.py``), for tasks with a ``path2`` folder:
  ``path2/stage1/basic`` (body parts: lists ``question`` / ``answer``, ``img_path`` one list
  shown with the first question, under ``segmask_bodypart``; lines 142-149), ``stage2/basic``
  (measurement, ``img_path`` under ``pnt_on_cxr``; lines 172-177), ``stage3/basic`` (final; line 200).

The harness joins ``segmask_bodypart`` / ``pnt_on_cxr`` and an ``img_path`` entry as strings
(entries start with ``/``); we join them as paths. Each sample's ``meta["stages"]`` holds the
stage JSONs by key (``path1/stage2`` …) and ``meta["stage_images"]`` the images they name, keyed
``"segmask:<entry>"`` / ``"pnt:<entry>"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medimg_bench.datasets.vqa.base import VQADataset
from medimg_bench.datasets.vqa.readers import decode_image
from medimg_bench.sample import SampleError

__all__ = ["CXReasonBenchDataset", "read_stages", "stage_images_needed"]

# (key, folder under qa/<task>/, sub-folder: "basic" or "*" for the harness's glob)
_PATH1 = (("path1/stage1", "path1/stage1", "*"), ("path1/stage1.5", "path1/stage1.5", "basic"),
          ("path1/stage2", "path1/stage2", "*"), ("path1/stage3", "path1/stage3", "basic"),
          ("path1/stage4", "path1/stage4", "basic"))
_PATH2 = (("path2/stage1", "path2/stage1", "basic"), ("path2/stage2", "path2/stage2", "basic"),
          ("path2/stage3", "path2/stage3", "basic"))
_LISTS = {"path1/stage1": ("question", "answer"), "path1/stage2": ("question", "answer", "img_path"),
          "path2/stage1": ("question", "answer")}


def _stage_file(task_dir: Path, folder: str, sub: str, dicom: str) -> Path | None:
    if sub == "basic":
        path = task_dir / folder / "basic" / f"{dicom}.json"
        return path if path.is_file() else None
    found = sorted(p for p in (task_dir / folder).glob(f"*/{dicom}.json") if p.is_file())
    return found[0] if found else None


def _check(key: str, item: Any) -> str | None:
    """What is wrong with a stage JSON (None when it has what the harness reads)."""
    if not isinstance(item, dict) or "question" not in item or "answer" not in item:
        return "needs 'question' and 'answer'"
    lists = _LISTS.get(key)
    if lists:
        values = [item.get(k) for k in lists]
        if not all(isinstance(v, list) for v in values) or not values[0]:
            return f"needs non-empty lists {list(lists)}"
        if len({len(v) for v in values}) != 1:
            return f"lists {list(lists)} differ in length ({[len(v) for v in values]})"
    return None


def read_stages(root: Path, task: str, dicom: str, errors: Any) -> dict[str, Any] | None:
    """``{key: {"file": path relative to root, "content": JSON}}`` of a case's later stages, or
    None after reporting the first missing or malformed file to ``errors``."""
    task_dir = root / "qa" / task
    specs = [s for s in _PATH1 if s[0] != "path1/stage1.5" or (task_dir / "path1" / "stage1.5").is_dir()]
    if (task_dir / "path2").is_dir():
        specs += list(_PATH2)
    out: dict[str, Any] = {}
    for key, folder, sub in specs:
        path = _stage_file(task_dir, folder, sub, dicom)
        where = path or task_dir / folder / (sub if sub == "basic" else "*") / f"{dicom}.json"
        if path is None:
            errors(where, f"{task}/{dicom}", f"the {key} stage file is missing")
            return None
        try:
            item = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as exc:
            errors(path, f"{task}/{dicom}", f"cannot read the {key} stage file: {exc}")
            return None
        problem = _check(key, item)
        if problem:
            errors(path, f"{task}/{dicom}", f"{key}: {problem}")
            return None
        out[key] = {"file": str(path.relative_to(root)), "content": item}
    return out


def _entries(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(p) for p in value or [] if p]


def stage_images_needed(stages: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(kind, img_path entry)`` of every image the stages show: ``segmask`` for the body-part
    stages of both paths, ``pnt`` for path 2's measurement."""
    out: list[tuple[str, str]] = []
    body = stages.get("path1/stage2")
    if body:
        out += [("segmask", p) for one in body["content"]["img_path"] for p in _entries(one)]
    if "path2/stage1" in stages:
        out += [("segmask", p) for p in _entries(stages["path2/stage1"]["content"].get("img_path"))]
    if "path2/stage2" in stages:
        out += [("pnt", p) for p in _entries(stages["path2/stage2"]["content"].get("img_path"))]
    return list(dict.fromkeys(out))


def _join(base: Path, entry: str) -> Path:
    return base / entry.lstrip("/")


class CXReasonBenchDataset(VQADataset):
    """:class:`VQADataset` whose samples also carry their later stages: ``meta["stages"]`` and
    ``meta["stage_images"]`` (module docstring). Manifest columns ``stages`` (JSON text) and
    ``stage_image_paths`` (absolute paths, so the dataset fingerprint covers the files)."""

    def __init__(self, manifest: Any, *, segmask_root: Path, pnt_root: Path, **kwargs: Any) -> None:
        super().__init__(manifest, **kwargs)
        self.segmask_root, self.pnt_root = Path(segmask_root), Path(pnt_root)

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        sample = super().load(row)
        stages = json.loads(row["stages"])
        images = {}
        for kind, entry in stage_images_needed(stages):
            path = _join(self.segmask_root if kind == "segmask" else self.pnt_root, entry)
            try:
                images[f"{kind}:{entry}"] = decode_image(path)
            except Exception as exc:  # a missing or unreadable stage image fails this case only
                raise SampleError(f"stage image {entry!r}: {exc}", sample_id=str(row["id"]), path=str(path)) from exc
        sample["meta"]["stages"] = stages
        sample["meta"]["stage_images"] = images
        return sample
