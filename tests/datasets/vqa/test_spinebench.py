"""SpineBench (Zhao et al. 2025) on a fixture of the paper-derived item schema
(medimg_bench/datasets/vqa/spinebench.py; no release layout was found), the same items under
other key names mapped in one line, the errors naming field and file, ``datasets check``, and
the accuracy tree (overall, per category, per category/subcategory, per modality, per region)
through the VQA task."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import medimg_bench as mb
from medimg_bench.datasets import vqa as _module
from medimg_bench.datasets.check import run_check
from medimg_bench.datasets.vqa.spinebench import spinal_region
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.sample import validate_sample
from tests.datasets._helpers import family_tests

create, test_registered, test_configs_match_factories = family_tests(_module, ["spinebench"])

ITEMS = [
    {"id": "sb-001", "image": ["xr/001.png"], "question": "At which level is the listhesis?",
     "options": ["L3-L4", "L4-L5", "L5-S1", "T12-L1"], "answer": "B", "category": "level identification",
     "subcategory": "spondylolisthesis", "level": "L4-L5", "modality": "X-ray", "case_id": "p1"},
    {"id": "sb-002", "image": ["mr/002a.png", "mr/002b.png"], "question": "Which finding is present?",
     "options": {"A": "disc herniation", "B": "canal stenosis", "C": "fracture"}, "answer": "disc herniation",
     "category": "pathology assessment", "subcategory": "disc herniation", "level": ["L4-L5", "L5-S1"],
     "modality": "MRI", "case_id": "p2"},
    {"id": "sb-003", "image": "ct/003.png", "question": "Which fixation fits?",
     "options": ["A. anterior plate", "B. posterior screws", "C. halo vest", "D. none"], "answer": "(B)",
     "category": "surgical planning", "subcategory": "fracture", "level": "T12-L1", "modality": "CT"},
    {"id": "sb-004", "image": ["mr/002a.png"], "question": "Which level is compressed?",
     "options": ["C4/5", "C5/6", "C6/7"], "answer": "C", "category": "level identification",
     "subcategory": "myelopathy", "level": "C6/7", "modality": "MRI", "case_id": "p2"},
]


def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 8), value, np.uint8)).save(path)


def _bench(root: Path, items=ITEMS, name: str = "spinebench_mcq.jsonl") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    lines = "\n".join(json.dumps(it) for it in items) + "\n"
    (root / name).write_text(lines if name.endswith(".jsonl") else json.dumps(items))
    for k, rel in enumerate(("xr/001.png", "mr/002a.png", "mr/002b.png", "ct/003.png")):
        _png(root / rel, 30 * (k + 1))
    return root


def test_items_letters_images_and_the_tree_columns(tmp_path):
    ds = create("spinebench", _bench(tmp_path))
    assert ds.ids == ["sb-001", "sb-002", "sb-003", "sb-004"]
    s = ds[1]
    validate_sample(s, task="vqa")
    assert (s["answer"], s["answer_type"], s["options"]) == ("A", "mcq", ["disc herniation", "canal stenosis", "fracture"])
    assert len(s["image"]) == 2 and float(s["image"][1].mean()) == pytest.approx(90 / 255, abs=1e-6)
    assert s["meta"]["answer_text"] == "disc herniation" and s["meta"]["modality"] == "MRI"
    s = ds[2]  # one image given as a string; prefixed options; answer "(B)"
    assert s["answer"] == "B" and s["options"][1] == "posterior screws" and len(s["image"]) == 1
    assert s["meta"]["patient_id"] == "ct/003.png"  # no case_id: the first image
    m = ds.manifest.set_index("id")
    assert m.loc["sb-002", "level"] == "L4-L5, L5-S1" and m.loc["sb-002", "region"] == "lumbar-sacral"
    assert m.loc["sb-003", "region"] == "thoracic-lumbar" and m.loc["sb-004", "region"] == "cervical"
    assert m.loc["sb-001", "category_path"] == "level identification/spondylolisthesis"
    assert m.loc["sb-002", "patient_id"] == m.loc["sb-004", "patient_id"] == "p2"
    # a JSON list reads as the JSONL does
    assert create("spinebench", _bench(tmp_path / "j", name="items.json")).manifest.equals(ds.manifest)


def test_another_layout_maps_in_one_line(tmp_path):
    renamed = [{"qid": it["id"], "img_paths": it["image"], "query": it["question"], "choices": it["options"],
                "gt": it["answer"], "meta": {"axis": it["category"], "vertebral_level": it.get("level")},
                "imaging": it["modality"]} for it in ITEMS]
    root = _bench(tmp_path / "other", renamed, name="bench.json")
    fields = {"id": "qid", "image": "img_paths", "question": "query", "options": "choices", "answer": "gt",
              "category": "meta.axis", "level": "meta.vertebral_level", "modality": "imaging",
              "subcategory": None, "patient": None}
    ds = create("spinebench", root, fields=fields)
    ref = create("spinebench", _bench(tmp_path / "ref"))
    assert ds.ids == ref.ids and [ds[i]["answer"] for i in range(4)] == [ref[i]["answer"] for i in range(4)]
    assert list(ds.manifest["region"]) == list(ref.manifest["region"])
    assert list(ds.manifest["category_path"]) == list(ref.manifest["category"])  # no subcategory field
    assert ds.manifest["subcategory"].isna().all()


def test_errors_name_the_field_and_the_file(tmp_path):
    items = [dict(it) for it in ITEMS]
    del items[2]["category"]
    root = _bench(tmp_path, items)
    with pytest.raises(ValueError, match=r"spinebench_mcq.jsonl.*row 2 \(id sb-003\).*missing field 'category'"):
        create("spinebench", root)
    assert create("spinebench", root, on_error="skip").ids == ["sb-001", "sb-002", "sb-004"]
    with pytest.raises(ValueError, match=r"row 0 \(qid None\)|missing field 'gt' \(answer\)"):
        create("spinebench", root, fields={"answer": "gt"})
    items = [dict(it) for it in ITEMS]
    items[0]["answer"] = "S2"
    with pytest.raises(ValueError, match=r"row 0 \(id sb-001\).*answer 'S2' is neither"):
        create("spinebench", _bench(tmp_path / "b", items))
    items[0] = {**ITEMS[0], "options": {"A": "x", "C": "y"}}
    with pytest.raises(ValueError, match="not the letters A, B"):
        create("spinebench", _bench(tmp_path / "c", items))
    with pytest.raises(ValueError, match="unknown field 'axis'"):
        create("spinebench", root, fields={"axis": "category"})
    with pytest.raises(ValueError, match="'image' is required"):
        create("spinebench", root, fields={"image": None})
    with pytest.raises(ValueError, match="only split 'test'"):
        create("spinebench", root, split="train")
    with pytest.raises(FileNotFoundError, match="no .json or .jsonl item file"):
        create("spinebench", tmp_path / "empty")
    (root / "second.json").write_text("[]")
    with pytest.raises(ValueError, match="several item files.*file="):
        create("spinebench", root)
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        create("spinebench", root, file="missing.jsonl")


def test_datasets_check_reads_the_config(tmp_path):
    root = _bench(tmp_path)
    cfg = {"name": "spinebench", "root": str(root), "split": "test", "options": {"fields": {}}}
    lines: list[str] = []
    assert run_check(cfg, echo=lines.append) == 0
    (root / "ct" / "003.png").unlink()
    lines.clear()
    assert run_check(cfg, echo=lines.append) == 1
    assert "003.png" in "\n".join(lines)


def test_spinal_region():
    assert spinal_region("L5-S1") == "lumbar-sacral"
    assert spinal_region("c2") == "cervical" and spinal_region("T 4") == "thoracic"
    assert spinal_region("whole spine") is None and spinal_region(None) is None


class _Scripted(GenerativeAdapter):
    backend = "scripted"

    def __init__(self, answers):
        super().__init__(name="scripted")
        self.answers = answers

    def identity(self):
        return {"answers": sorted(self.answers.items())}

    def _generate(self, requests):
        return [GenerationResponse(text=self.answers[r.sample_id]) for r in requests]


def test_the_accuracy_tree_through_the_vqa_task(tmp_path):
    """Overall, per category, per category/subcategory, per modality and per region: each the
    mean of the questions' right/wrong over that group, as computed here by hand."""
    copies = [{**it, "id": f"{it['id']}-{k}"} for k in range(3) for it in ITEMS]  # 12 questions
    ds = create("spinebench", _bench(tmp_path, copies))
    rng = np.random.default_rng(0)
    right = {sid: bool(rng.integers(0, 2)) for sid in ds.ids}
    wrong = {"A": "B", "B": "C", "C": "A"}
    answers = {sid: ds[i]["answer"] if right[sid] else wrong[ds[i]["answer"]] for i, sid in enumerate(ds.ids)}
    tree = ["category", "category_path", "modality", "region"]
    res = mb.evaluate(_Scripted(answers), ds, task="vqa", batch_size=5, progress=False, n_resamples=20,
                      subgroups=tree)
    s, m = res.summary, ds.manifest
    assert s["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(np.mean(list(right.values())))
    for attr in tree:
        per_group = s["subgroups"][attr]["accuracy"]["per_group"]
        assert set(per_group) == set(m[attr])
        for group, entry in per_group.items():
            ids = m.loc[m[attr] == group, "id"]
            assert entry["n"] == len(ids) >= 3
            assert entry["value"] == pytest.approx(np.mean([right[i] for i in ids])), (attr, group)
