"""Dataset integrity checks, the `datasets check` logic and on_error="skip" wrappers."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.datasets.base import ManifestDataset, TableDataset
from medimg_bench.datasets.check import (
    SkipErrors,
    check_dataset,
    check_from_config,
    load_dataset_config,
    run_check,
    skip_collate,
    skip_unreadable,
)
from medimg_bench.registry import DATASETS, RegistryEntry


def _png(path: Path, seed: int) -> None:
    from PIL import Image

    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (6, 6), dtype=np.uint8)).save(path)


def _write_split(root: Path, split: str, rows: list[dict[str, Any]]) -> None:
    """rows: id, patient_id, label, and `kind` in {ok, missing, corrupt} plus `seed`."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    records = []
    for r in rows:
        rel = f"images/{r['id']}.png"
        if r.get("kind", "ok") == "ok":
            _png(root / rel, r.get("seed", hash(r["id"]) % 1000))
        elif r["kind"] == "corrupt":
            (root / rel).write_bytes(b"this is not a PNG file")
        records.append({"id": r["id"], "patient_id": r["patient_id"], "image": rel, "label": r["label"]})
    pd.DataFrame(records).to_csv(root / f"{split}.csv", index=False)


def _tiny(root: str | Path, split: str = "train", **options: Any) -> TableDataset:
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"dataset root {str(root)!r} does not exist")
    manifest = pd.read_csv(root / f"{split}.csv", dtype={"id": str, "patient_id": str})
    return TableDataset(
        manifest, root=root, label_columns=["label"], classes=["normal", "effusion"], name=f"tiny-{split}", **options
    )


@pytest.fixture
def tiny_registered(monkeypatch):
    """Register the tiny loader without importing the other dataset modules."""
    monkeypatch.setattr(DATASETS, "_discovered", True)
    monkeypatch.setitem(DATASETS._entries, "tiny_check", RegistryEntry("tiny_check", _tiny, __name__))
    return "tiny_check"


def _clean(root: Path) -> None:
    _write_split(root, "train", [{"id": f"t{i}", "patient_id": f"p{i}", "label": i % 2, "seed": i} for i in range(6)])
    _write_split(root, "test", [{"id": f"e{i}", "patient_id": f"q{i}", "label": i % 2, "seed": 100 + i} for i in range(4)])


def test_clean_splits_pass(tmp_path):
    _clean(tmp_path)
    report = check_dataset({"train": _tiny(tmp_path, "train"), "test": _tiny(tmp_path, "test")}, hash_images=True)
    assert report.ok and report.exit_code == 0
    assert report.splits["train"].label_counts == {"normal": 3, "effusion": 3}
    assert report.splits["test"].n_read == 4 and report.splits["test"].n_patients == 4
    assert len(report.leakage) == 1 and report.leakage[0].ok
    text = report.format()
    assert "status: OK" in text and "effusion" in text and "leakage train <-> test: none" in text
    json.dumps(report.to_dict())


def test_every_kind_of_problem_is_reported(tmp_path):
    _write_split(
        tmp_path,
        "train",
        [
            {"id": "t0", "patient_id": "p0", "label": 0, "seed": 1},
            {"id": "t1", "patient_id": "p1", "label": 1, "kind": "missing"},
            {"id": "t2", "patient_id": "p2", "label": 1, "kind": "corrupt"},
            {"id": "t3", "patient_id": "p3", "label": 7, "seed": 3},
            {"id": "t4", "patient_id": "shared", "label": 0, "seed": 4},
        ],
    )
    _write_split(
        tmp_path,
        "test",
        [
            {"id": "e0", "patient_id": "shared", "label": 1, "seed": 50},
            {"id": "e1", "patient_id": "q1", "label": 0, "seed": 1},  # same bytes as t0
        ],
    )
    splits = {"train": _tiny(tmp_path, "train"), "test": _tiny(tmp_path, "test")}
    report = check_dataset(splits, hash_images=True)
    train = report.splits["train"]
    assert not report.ok and report.exit_code == 1
    assert [(m["id"], Path(m["path"]).name) for m in train.missing] == [("t1", "t1.png")]
    assert [u["id"] for u in train.unreadable] == ["t2"]
    assert "t2.png" in train.unreadable[0]["path"] and "not a readable image" in train.unreadable[0]["problem"]
    assert [(b["id"], b["label"]) for b in train.bad_labels] == [("t3", 7)]
    assert "outside the 2 classes" in train.bad_labels[0]["problem"]
    assert train.n_read == 4  # the missing file is not read again
    leak = report.leakage[0]
    assert leak.shared["patient_id"] == ["shared"]
    assert [(d["id_a"], d["id_b"]) for d in leak.duplicates] == [("t0", "e1")]
    text = report.format()
    for needle in ("missing: t1", "unreadable: t2", "bad label: t3", "shared", "t0", "status: FAILED"):
        assert needle in text, needle
    assert json.loads(json.dumps(report.to_dict()))["ok"] is False


def test_manifest_only_and_sampled_reading(tmp_path):
    _write_split(
        tmp_path,
        "train",
        [{"id": "c", "patient_id": "p", "label": 0, "kind": "corrupt"}]
        + [{"id": f"t{i}", "patient_id": f"p{i}", "label": 0, "seed": i} for i in range(9)],
    )
    ds = _tiny(tmp_path, "train")
    quick = check_dataset(ds, read_pixels=False)
    assert quick.ok and quick.splits["all"].n_read == 0  # a corrupt file needs pixels to be found
    sampled = check_dataset(ds, max_samples=3, seed=1)
    assert sampled.splits["all"].n_read == 3
    full = check_dataset(ds, num_workers=2)
    assert [u["id"] for u in full.splits["all"].unreadable] == ["c"] and full.splits["all"].n_read == 10


class _MultiLabelFromFile(ManifestDataset):
    """Labels come only from the loaded sample (no label column in the manifest)."""

    task = "segmentation"

    def load(self, row):
        data = np.load(self.resolve(row["path"]), allow_pickle=False)
        return {
            "id": row["id"],
            "image": torch.zeros(1, 2, 2),
            "label": torch.from_numpy(data["label"].astype(np.float32)),
            "mask": torch.from_numpy(data["mask"].astype(np.int64)),
            "meta": self.meta_for(row),
        }


def test_labels_and_masks_checked_from_samples(tmp_path):
    rows = []
    cases = {
        "ok": ([1, 0, np.nan], [[0, 1], [2, 0]]),
        "badhot": ([1, 2, 0], [[0, 0], [0, 0]]),
        "badmask": ([0, 0, 1], [[0, 3], [0, 0]]),
    }
    for sid, (label, mask) in cases.items():
        np.savez(tmp_path / f"{sid}.npz", label=np.array(label), mask=np.array(mask))
        rows.append({"id": sid, "path": f"{sid}.npz"})
    ds = _MultiLabelFromFile(pd.DataFrame(rows), root=tmp_path, path_columns=["path"], classes=["bg", "liver", "tumour"])
    report = check_dataset(ds)
    split = report.splits["all"]
    problems = {b["id"]: b["problem"] for b in split.bad_labels}
    assert set(problems) == {"badhot", "badmask"}
    assert "outside [0, 1]" in problems["badhot"] and "mask values [3]" in problems["badmask"]
    assert split.label_source == "samples"
    # multi-hot positives (value 1 only) + one count per sample whose mask holds the class
    assert split.label_counts == {"bg": 2 + 3, "liver": 0 + 1, "tumour": 1 + 1, "3": 1}


def test_check_from_config_builds_each_split(tmp_path, tiny_registered):
    _clean(tmp_path)
    cfg = {"name": tiny_registered, "root": str(tmp_path), "split": "test", "train_split": "train", "options": {}}
    report = check_from_config(cfg)
    assert report.ok and list(report.splits) == ["train", "test"] and report.dataset == "tiny_check"
    yaml_file = tmp_path / "dataset.yaml"
    yaml_file.write_text(f"name: {tiny_registered}\nroot: {tmp_path}\nsplit: test\ntrain_split: train\noptions: {{}}\n")
    lines: list[str] = []
    assert run_check(yaml_file, echo=lines.append, json_path=tmp_path / "r.json") == 0
    assert "status: OK" in lines[0] and json.loads((tmp_path / "r.json").read_text())["ok"] is True
    # a Hydra-style file with the dataset under a `dataset:` key
    nested = tmp_path / "nested.yaml"
    nested.write_text(f"dataset:\n  name: {tiny_registered}\n  root: {tmp_path}\n  split: test\n")
    assert load_dataset_config(nested)["split"] == "test"


def test_run_check_exit_codes(tmp_path, tiny_registered):
    _clean(tmp_path)
    (tmp_path / "images" / "e0.png").unlink()
    out: list[str] = []
    ok_cfg = {"name": tiny_registered, "root": str(tmp_path), "split": "test", "train_split": "train"}
    assert run_check(ok_cfg, echo=out.append) == 1 and "missing: e0" in out[-1]
    assert run_check(dict(ok_cfg, root=str(tmp_path / "nowhere")), echo=out.append) == 1
    assert "could not be built" in out[-1] and "nowhere" in out[-1]
    assert run_check({"root": str(tmp_path)}, echo=out.append) == 2 and "no 'name'" in out[-1]
    assert run_check(dict(ok_cfg, name="tiny_chek"), echo=out.append) == 2 and "unknown dataset" in out[-1]
    assert run_check(tmp_path / "absent.yaml", echo=out.append) == 2
    with pytest.raises(ValueError, match="options"):
        load_dataset_config(dict(ok_cfg, options=[1, 2]))


def test_skip_wrappers_log_each_skip_and_the_count(tmp_path, caplog):
    _write_split(
        tmp_path,
        "train",
        [
            {"id": "a", "patient_id": "p", "label": 0, "seed": 1},
            {"id": "b", "patient_id": "p", "label": 1, "kind": "corrupt"},
            {"id": "c", "patient_id": "p", "label": 1, "kind": "missing"},
            {"id": "d", "patient_id": "p", "label": 0, "seed": 2},
        ],
    )
    ds = _tiny(tmp_path, "train")
    with caplog.at_level(logging.WARNING):
        clean, skipped = skip_unreadable(ds)
    assert clean.ids == ["a", "d"] and [s["id"] for s in skipped] == ["b", "c"]
    assert "skipping sample b" in caplog.text and "skipped 2 of 4 samples" in caplog.text
    assert skipped[0]["path"].endswith("b.png")
    caplog.clear()
    lazy = SkipErrors(ds)
    with caplog.at_level(logging.WARNING):
        ids = [s["id"] for s in lazy]
    assert ids == ["a", "d"] and "skipped 2 of 4 samples" in caplog.text and len(lazy.skipped) == 2
    loader = torch.utils.data.DataLoader(SkipErrors(ds), batch_size=2, collate_fn=skip_collate)
    batches = list(loader)
    assert batches[0]["id"] == ["a"] and batches[1]["id"] == ["d"]
    assert skip_collate([None, None]) is None
    with pytest.raises(TypeError, match="ManifestDataset"):
        skip_unreadable([1, 2, 3])
