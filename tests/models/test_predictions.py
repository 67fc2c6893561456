"""model=predictions: scores, label maps and answers already on disk, scored by this package;
a missing prediction fails its sample with the id."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

import medimg_bench as mb
from medimg_bench.models.predictions import (
    AnswersFromFile,
    LabelMapsFromFolder,
    ScoresFromFile,
    predictions,
)


def test_classification_scores_from_a_csv_equal_sklearn(tmp_path):
    ds = mb.create_dataset("synthetic_cxr", cache_dir=tmp_path / "cxr", split="test", n=30, size=16)
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"id": ds.ids})
    for c in ds.classes:
        table[c] = rng.random(len(ds))
    table = table.iloc[1:]  # one sample has no prediction
    table.to_csv(tmp_path / "predictions.csv", index=False)
    model = mb.create_model("predictions", root=tmp_path, num_classes=len(ds.classes))
    assert isinstance(model, ScoresFromFile)
    res = mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=20)
    assert res.summary["n_failed"] == 1
    failed = res.samples[res.samples["status"] != "ok"]
    assert ds.ids[0] in set(failed["id"]) and ds.ids[0] in " ".join(map(str, failed["error"]))
    labels = ds.manifest.set_index("id").loc[table["id"], list(ds.classes)].to_numpy()
    for j, c in enumerate(ds.classes):
        got = res.summary["metrics"]["auroc"]["per_class"][c]["value"]
        assert got == pytest.approx(roc_auc_score(labels[:, j], table[c]), abs=1e-6)


def test_segmentation_label_maps_from_a_folder(tmp_path):
    ds = mb.create_dataset("synthetic_ct", cache_dir=tmp_path / "ct", split=None, n=2, shape=(16, 12, 8))
    preds = tmp_path / "preds"
    preds.mkdir()
    for sid, mask in zip(ds.manifest["id"], ds.manifest["mask"]):
        shutil.copy(ds.resolve(mask), preds / f"{sid}.nii.gz")  # perfect predictions
    model = mb.create_model("predictions", root=preds)
    assert isinstance(model, LabelMapsFromFolder)
    res = mb.evaluate(model, ds, task="segmentation", metrics={"dice": {}}, progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0
    assert res.summary["metrics"]["dice"]["mean"]["value"] == pytest.approx(1.0)
    (preds / f"{ds.ids[1]}.nii.gz").unlink()
    res = mb.evaluate(model, ds, task="segmentation", metrics={"dice": {}}, progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 1


def test_answers_from_jsonl_through_the_vqa_task(tmp_path):
    ds = mb.create_dataset("synthetic_vqa", cache_dir=tmp_path / "cxr", n=4, size=16)
    answers = {sid: ds[i]["answer"] for i, sid in enumerate(ds.ids)}
    lines = [json.dumps({"id": sid, "text": a.capitalize() + "."}) for sid, a in list(answers.items())[1:]]
    (tmp_path / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    model = mb.create_model("predictions", root=tmp_path / "predictions.jsonl")
    assert isinstance(model, AnswersFromFile)
    res = mb.evaluate(model, ds, task="vqa", progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 1  # the first question has no answer: failed, named
    assert res.summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(1.0)


def test_bad_predictions_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.options.root"):
        mb.create_model("predictions", root=tmp_path / "nope")
    (tmp_path / "predictions.csv").write_text("case,a,b\nx,0.1,0.2\n")
    with pytest.raises(ValueError, match="no id column found"):
        mb.create_model("predictions", root=tmp_path)
    (tmp_path / "predictions.csv").write_text("id,a,b\nx,0.1,0.2\n")
    with pytest.raises(ValueError, match=r"no column for class\(es\) \['c'\]"):
        ScoresFromFile(tmp_path / "predictions.csv", dataset_classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="2 score columns.*3 classes"):
        ScoresFromFile(tmp_path / "predictions.csv", classes=["a", "b"], num_classes=3)


def test_extra_predictions_one_warning_with_the_count(tmp_path, caplog):
    import logging

    (tmp_path / "predictions.csv").write_text("id,a\nx,0.1\ny,0.2\nz,0.3\n")
    (tmp_path / "answers.jsonl").write_text('{"id": "x", "text": "yes"}\n{"id": "q", "text": "no"}\n')
    seg = tmp_path / "seg"
    seg.mkdir()
    for sid in ("x", "u1", "u2"):
        (seg / f"{sid}.nii.gz").write_bytes(b"")
    kinds = [(mb.create_model("predictions", root=tmp_path / "predictions.csv"), 2),
             (mb.create_model("predictions", root=tmp_path / "answers.jsonl"), 1),
             (mb.create_model("predictions", root=seg, kind="segmentation"), 2)]
    for model, n in kinds:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="medimg_bench.models.predictions"):
            assert model.check_ids(["x", "w"]) == n
        warned = [r for r in caplog.records if "ids the dataset does not have" in r.getMessage()]
        assert len(warned) == 1 and f" {n} prediction" in warned[0].getMessage()
        assert model.check_ids(["x", "y", "z", "q", "u1", "u2"]) == 0


def test_pipeline_warns_about_unknown_ids(tmp_path, caplog):
    import logging

    from medimg_bench.builders import build_model as _build_model

    ds = mb.create_dataset("synthetic_cxr", cache_dir=tmp_path / "cxr", split="test", n=6, size=16)
    table = pd.DataFrame({"id": list(ds.ids) + ["stranger"]})
    for c in ds.classes:
        table[c] = 0.5
    table.to_csv(tmp_path / "predictions.csv", index=False)
    with caplog.at_level(logging.WARNING, logger="medimg_bench.models.predictions"):
        _build_model({"name": "predictions", "options": {"root": str(tmp_path)}}, ds)
    assert any("1 prediction(s) for ids" in r.getMessage() for r in caplog.records)


# -- 2D probability maps (PNG / .npy) -------------------------------------------------------------
def _maps_dataset(tmp_path):
    from PIL import Image

    from medimg_bench.registry import create_dataset

    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate([(12, 16), (9, 7), (12, 16)]):
        Image.fromarray((rng.random((h, w)) * 255).astype(np.uint8)).save(tmp_path / "images" / f"s{i}.png")
        Image.fromarray(np.where(rng.random((h, w)) > 0.6, 255, 0).astype(np.uint8)).save(tmp_path / "masks" / f"s{i}.png")
    return create_dataset("seg2d_folder", root=tmp_path)


def test_png_and_npy_maps(tmp_path):
    from PIL import Image

    from medimg_bench.models.predictions import MapsFromFolder, read_map
    from medimg_bench.sample import collate

    ds = _maps_dataset(tmp_path)
    preds = tmp_path / "preds"
    preds.mkdir()
    m8 = (np.arange(12 * 16).reshape(12, 16) % 256).astype(np.uint8)
    Image.fromarray(m8).save(preds / "s0.png")
    Image.fromarray(np.ones((9, 7), dtype=bool)).convert("1").save(preds / "s1.png")
    np.save(preds / "s2.npy", np.full((12, 16), 0.25))
    model = predictions(root=str(preds))
    assert isinstance(model, MapsFromFolder)
    assert np.array_equal(read_map(preds / "s0.png"), m8 / 255.0)  # im2double, exact in float64
    out = model.predict(collate([ds[0], ds[1], ds[2]]))
    assert isinstance(out["maps"], list) and out["maps"][0].dtype == torch.float64
    assert torch.equal(out["maps"][1], torch.ones(9, 7, dtype=torch.float64))
    assert torch.equal(out["labels"][2], torch.zeros(12, 16, dtype=torch.long))
    Image.fromarray(np.zeros((5, 5), dtype=np.uint8)).save(preds / "s1.png")
    with pytest.raises(ValueError, match=r"s1\.png.*5x5.*mask.*9x7"):
        model.predict(collate([ds[1]]))
    resized = predictions(root=str(preds), resize=True).predict(collate([ds[1]]))
    assert resized["maps"][0].shape == (9, 7)
    (preds / "s2.npy").unlink()
    with pytest.raises(KeyError, match="no prediction for sample 's2'"):
        model.predict(collate([ds[2]]))


def test_sod_toolbox_run_through_the_engine(tmp_path):
    from PIL import Image

    from medimg_bench.runs import compose_config, run_config

    _maps_dataset(tmp_path)
    preds = tmp_path / "preds"
    preds.mkdir()
    for i, (h, w) in enumerate([(12, 16), (9, 7), (12, 16)]):
        Image.fromarray((np.arange(h * w).reshape(h, w) % 200).astype(np.uint8)).save(preds / f"s{i}.png")
    cfg = compose_config(["task=segmentation", "dataset=seg2d_folder", f"dataset.root={tmp_path}",
                          "model=predictions", f"model.options.root={preds}", "metrics=sod_toolbox",
                          "bootstrap.n_resamples=20", "progress=false", "batch_size=2"])
    run_config(cfg, tmp_path / "run")
    import json

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert {"mean_dice", "mae", "s_measure", "max_dice", "max_e_measure"} <= set(summary["metrics"])
    assert summary["n_failed"] == 0 and summary["metrics"]["mean_dice"]["per_class"]["foreground"]["n"] == 3
