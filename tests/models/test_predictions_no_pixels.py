"""Scoring stored predictions reads no pixel (issue #36 item 10): every task's ``model=predictions``
path scores layouts whose image folders are absent — NIH ChestX-ray14's label file with a score
CSV, a label CSV, VQA questions and answers, per-frame phases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

import medimg_bench as mb
from medimg_bench.datasets.cxr.labels import NIH_PATHOLOGIES
from medimg_bench.sample import pixels_wanted, without_pixels


def _run(tmp_path: Path, overrides: list[str], name: str = "run") -> dict:
    from medimg_bench.runs import compose_config, run_config

    cfg = compose_config(["bootstrap.n_resamples=20", "num_workers=0", *overrides])
    run_config(cfg, tmp_path / name)
    return json.loads((tmp_path / name / "summary.json").read_text())


def _nih_layout(root: Path, n: int = 24) -> tuple[list[str], np.ndarray]:
    """``Data_Entry_2017_v2020.csv`` + ``test_list.txt``, no ``images*`` folder; returns the image
    stems and their 0/1 labels over :data:`NIH_PATHOLOGIES`."""
    rng = np.random.default_rng(1)
    labels = (rng.random((n, len(NIH_PATHOLOGIES))) < 0.4).astype(int)
    labels[0], labels[1] = 1, 0  # every finding has positives and negatives
    stems = [f"{1000 + i // 2:08d}_{i % 2:03d}" for i in range(n)]
    rows = []
    for stem, y in zip(stems, labels):
        found = "|".join(c for c, v in zip(NIH_PATHOLOGIES, y) if v) or "No Finding"
        rows.append({"Image Index": f"{stem}.png", "Finding Labels": found, "Follow-up #": int(stem[-1]),
                     "Patient ID": int(stem[:8]), "Patient Age": 50, "Patient Sex": "M", "View Position": "PA"})
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(root / "Data_Entry_2017_v2020.csv", index=False)
    (root / "test_list.txt").write_text("".join(f"{s}.png\n" for s in stems))
    (root / "train_val_list.txt").write_text("")
    return stems, labels


def test_nih_cxr14_label_file_and_a_chexnet_score_csv_without_images(tmp_path):
    """The issue's case: ``… lists image '00000010_000' which is not on disk`` before; now scored."""
    root = tmp_path / "nih"
    stems, labels = _nih_layout(root)
    rng = np.random.default_rng(2)
    scores = np.clip(labels * 0.3 + rng.random(labels.shape) * 0.7, 0, 1).round(6)
    table = pd.DataFrame({"Image Index": [f"{s}.png" for s in stems],
                          **{f"prob_{c}": scores[:, k] for k, c in enumerate(NIH_PATHOLOGIES)}})
    table = table[["Image Index", *list(table.columns[1:])[::-1]]]  # columns in another order
    table.to_csv(tmp_path / "preds.csv", index=False)
    with pytest.raises(FileNotFoundError, match="not on disk"):  # a model that reads pixels needs them
        mb.create_dataset("nih_cxr14", root=root)
    summary = _run(tmp_path, ["task=classification", "dataset=nih_cxr14", f"dataset.root={root}",
                              "model=predictions", f"model.options.root={tmp_path / 'preds.csv'}"])
    assert summary["n_failed"] == 0 and summary["n_samples"] == len(stems)
    per_class = summary["metrics"]["auroc"]["per_class"]
    for k, c in enumerate(NIH_PATHOLOGIES):
        assert per_class[c]["value"] == pytest.approx(roc_auc_score(labels[:, k], scores[:, k]), abs=1e-6), c
    assert not any(root.glob("images*"))


def test_the_python_api_builds_a_dataset_without_pixels(tmp_path):
    root = tmp_path / "nih"
    stems, labels = _nih_layout(root, n=8)
    assert pixels_wanted()
    with without_pixels():
        assert not pixels_wanted()
        ds = mb.create_dataset("nih_cxr14", root=root)
    assert pixels_wanted() and not ds.pixels and ds.ids == stems
    sample = ds[0]
    assert "image" not in sample and sample["label"].tolist() == labels[0].tolist()
    assert ds.check()  # the manifest still lists the image files, and `datasets check` says they are missing
    table = pd.DataFrame({"id": stems, **{c: labels[:, k] * 0.8 + 0.1 for k, c in enumerate(NIH_PATHOLOGIES)}})
    table.to_csv(tmp_path / "predictions.csv", index=False)
    model = mb.create_model("predictions", root=tmp_path / "predictions.csv")
    res = mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0
    assert res.summary["metrics"]["auroc"]["mean"]["value"] == pytest.approx(1.0)


def test_a_label_csv_without_its_images(tmp_path):
    rows = [{"path": f"img/{i}.png", "label": "ab"[i % 2]} for i in range(6)]
    pd.DataFrame(rows).to_csv(tmp_path / "labels.csv", index=False)
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.4, 0.6], [0.7, 0.3]])
    pd.DataFrame({"ID": [f"img/{i}" for i in range(6)], "Prob_B": probs[:, 1], "prob_a": probs[:, 0]}).to_csv(
        tmp_path / "scores.csv", index=False)
    summary = _run(tmp_path, ["task=classification", "task.options.multilabel=false", "dataset=csv",
                              f"dataset.root={tmp_path}", "dataset.options.csv=labels.csv",
                              "dataset.options.classes=[a,b]", "model=predictions",
                              f"model.options.root={tmp_path / 'scores.csv'}", "metrics=classification"])
    assert summary["n_failed"] == 0
    is_b = np.arange(6) % 2
    got = summary["metrics"]["auroc"]["per_class"]["b"]["value"]
    assert got == pytest.approx(roc_auc_score(is_b, probs[:, 1]), abs=1e-6)


def _vqa_rad_without_images(root: Path) -> list[dict]:
    items = [
        {"qid": 1, "phrase_type": "test_freeform", "image_name": "synpic1.jpg", "image_organ": "HEAD",
         "answer": "Yes", "answer_type": "CLOSED", "question_type": "PRES", "question": "Is there a bleed?"},
        {"qid": 2, "phrase_type": "test_freeform", "image_name": "synpic2.jpg", "image_organ": "CHEST",
         "answer": "left lung", "answer_type": "OPEN", "question_type": "POS", "question": "Where is the mass?"},
        {"qid": 3, "phrase_type": "test_para", "image_name": "synpic2.jpg", "image_organ": "CHEST",
         "answer": "no", "answer_type": "CLOSED", "question_type": "ABN", "question": "Is this normal?"},
    ]
    root.mkdir()
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(items))
    return items


def test_vqa_questions_and_answers_without_images(tmp_path):
    root = tmp_path / "vqa_rad"
    _vqa_rad_without_images(root)
    lines = [{"question_id": "1", "prediction": "yes"}, {"question_id": "2", "prediction": "right lung"},
             {"question_id": "3", "prediction": "No."}]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = _run(tmp_path, ["task=vqa", "dataset=vqa_rad", f"dataset.root={root}", "model=predictions",
                              f"model.options.root={tmp_path / 'answers.jsonl'}"])
    assert summary["n_failed"] == 0 and summary["n_samples"] == 3
    assert summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(2 / 3)


def test_phases_without_frames(tmp_path):
    from medimg_bench.datasets.video.cholec80 import CHOLEC80_PHASES
    from tests.datasets._video_layouts import write_cholec80_annotations

    root = tmp_path / "cholec80"
    gt = [0, 0, 1, 1, 2, 3, 3, 4, 5, 6]
    write_cholec80_annotations(root, 41, [CHOLEC80_PHASES[p] for p in np.repeat(gt, 25)],
                               {i: (1, 0, 0, 0, 0, 0, 0) for i in range(0, 250, 25)})
    pred = [1 + p for p in gt]  # 1-based numbers, phase 7 present: read as 1-based
    pd.DataFrame({"Video": "video41", "Frame": 25 * np.arange(10), "Phase": pred}).to_csv(
        tmp_path / "phases.csv", index=False)
    summary = _run(tmp_path, ["task=phase_recognition", "dataset=cholec80", f"dataset.root={root}",
                              "dataset.options.videos=[41]", "dataset.options.frame_template='absent/{frame}.png'",
                              "model=predictions", f"model.options.root={tmp_path / 'phases.csv'}",
                              "metrics=phase_cholec80"])
    assert summary["n_failed"] == 0
    assert summary["metrics"]["cholec80_accuracy"]["mean"]["value"] == pytest.approx(1.0)
    assert not (root / "absent").exists()


def test_label_maps_against_label_masks_without_images(tmp_path):
    """Segmentation: stored label maps scored against the label masks, ``imagesTr`` absent."""
    nib = pytest.importorskip("nibabel")
    task = tmp_path / "Task09_Spleen"
    affine = np.diag([0.8, 0.9, 2.5, 1.0])
    rng = np.random.default_rng(4)
    masks = {c: (rng.random((6, 5, 4)) < 0.4).astype(np.uint8) for c in ("spleen_1", "spleen_2")}
    (task / "labelsTr").mkdir(parents=True)
    preds = tmp_path / "preds"
    preds.mkdir()
    for case, mask in masks.items():
        nib.save(nib.Nifti1Image(mask, affine), str(task / "labelsTr" / f"{case}.nii.gz"))
        pred = mask.copy()
        pred[0] = 1 - pred[0]  # one slab wrong
        nib.save(nib.Nifti1Image(pred, affine), str(preds / f"{case}.nii.gz"))
    info = {"name": "Spleen", "modality": {"0": "CT"}, "labels": {"0": "background", "1": "spleen"},
            "training": [{"image": f"./imagesTr/{c}.nii.gz", "label": f"./labelsTr/{c}.nii.gz"} for c in masks]}
    (task / "dataset.json").write_text(json.dumps(info))
    summary = _run(tmp_path, ["task=segmentation", "dataset=msd", f"dataset.root={task}", "dataset.split=train",
                              "model=predictions", f"model.options.root={preds}", "metrics=dice"])
    assert summary["n_failed"] == 0 and not (task / "imagesTr").exists()
    want = []
    for mask in masks.values():
        pred = mask.copy()
        pred[0] = 1 - pred[0]
        want.append(2 * (pred & mask).sum() / (pred.sum() + mask.sum()))
    assert summary["metrics"]["dice"]["mean"]["value"] == pytest.approx(float(np.mean(want)), abs=1e-6)


def test_every_stored_predictions_adapter_declares_it_reads_no_pixel(tmp_path):
    """The declaration the engine and the builders act on (``needs_pixels``), for every kind."""
    from medimg_bench.models.predictions import AnswersFromFile, FramePredictions, ScoresFromFile
    from medimg_bench.models.predictions.label_maps import LabelMapsFromFolder
    from medimg_bench.models.predictions.maps import MapsFromFolder
    from medimg_bench.models.predictions.recon import ReconsFromFolder

    for cls in (ScoresFromFile, FramePredictions, LabelMapsFromFolder, MapsFromFolder, ReconsFromFolder,
                AnswersFromFile):
        assert cls.needs_pixels is False, cls
    (tmp_path / "a.jsonl").write_text('{"id": "x", "text": "yes"}\n')

    class Data:
        pixels = True
        ids = ["x"]

        def skip_pixels(self):
            self.pixels = False

    data = Data()
    AnswersFromFile(tmp_path / "a.jsonl").bind_dataset(data)
    assert data.pixels is False


def test_stored_reports_id_report_generated_without_images(tmp_path):
    """Issue #35's example end to end: ``id, report, generated`` is scored on ``generated`` (it
    was scored on ``report``, the reference: ROUGE-L 1.000), with no image on disk."""
    from medimg_bench.metrics import report_text_scores

    refs = {"CXR1_IM-1": "Heart size normal. Lungs are clear. No pleural effusion.",
            "CXR2_IM-2": "Mild cardiomegaly. Small left pleural effusion.",
            "CXR3_IM-3": "No pneumothorax. Endotracheal tube tip 4.5 cm above the carina."}
    gens = {"CXR1_IM-1": "Heart size normal. Lungs are clear.", "CXR2_IM-2": "Cardiomegaly. No effusion.",
            "CXR3_IM-3": "ET tube tip 3 cm above the carina. No pneumothorax."}
    root = tmp_path / "iu"
    root.mkdir()
    ann = {"train": [], "val": [], "test": [{"id": s, "report": r, "image_path": [f"{s}/0.png"], "split": "test"}
                                            for s, r in refs.items()]}
    (root / "annotation.json").write_text(json.dumps(ann))
    pd.DataFrame({"id": list(refs), "report": list(refs.values()), "generated": [gens[s] for s in refs]}).to_csv(
        tmp_path / "reports.csv", index=False)
    ds = mb.create_dataset("iu_xray", root=root, split="test")
    model = mb.create_model("predictions", root=tmp_path / "reports.csv")
    res = mb.evaluate(model, ds, task="report_generation", progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0 and not ds.pixels
    want = report_text_scores(list(gens.values()), list(refs.values()), meteor=False)["rouge_l"]
    assert res.summary["metrics"]["rouge_l"]["mean"]["value"] == pytest.approx(want, abs=1e-6)
    assert want < 0.9


def test_the_chexnet_reproduction_scores_without_images():
    """The real case: the CheXNet reproduction's ``preds.csv`` (22,433 × 14, columns as published)
    against NIH's v2020 label file, no image on disk: the 14 AUROCs its authors printed
    (``aucs.csv``) to float32 precision (scores stored with 8 significant digits)."""
    import gzip
    import tempfile

    from tests.conftest import SHARED_DATA

    data = SHARED_DATA / "nih_cxr14_chexnet"
    if not (data / "preds.csv").exists():
        pytest.skip(f"{data} is absent (a fresh clone has no ../shared)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)  # the label file as the loader reads it, the authors' test set as the list
        (root / "Data_Entry_2017_v2020.csv").write_bytes(gzip.decompress((data / "Data_Entry_2017_v2020.csv.gz").read_bytes()))
        ids = pd.read_csv(data / "preds.csv", usecols=["Image Index"])["Image Index"]
        (root / "test_list.txt").write_text("\n".join(ids) + "\n")
        with without_pixels():
            ds = mb.create_dataset("nih_cxr14", root=root)
        model = mb.create_model("predictions", root=data / "preds.csv")
        res = mb.evaluate(model, ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0 and res.summary["n_samples"] == 22433
    printed = pd.read_csv(data / "aucs.csv").set_index("label")["auc"]
    per_class = res.summary["metrics"]["auroc"]["per_class"]
    for finding, auc in printed.items():
        assert per_class[finding]["value"] == pytest.approx(auc, abs=2e-6), finding
