"""The generic CSV loader: blank labels as a choice (on_missing_label), and errors that name the
file and the lines (real case: the Actualmed COVID chest X-ray metadata has blank findings)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from medimg_bench.datasets import create


def _layout(root, labels, ids=None):
    (root / "img").mkdir(parents=True, exist_ok=True)
    lines = ["path,finding,pid"]
    for i, lab in enumerate(labels):
        name = f"img/{ids[i] if ids else i}.png"
        Image.fromarray(np.full((8, 8), 10 * i, dtype=np.uint8)).save(root / f"img/{i}.png")
        lines.append(f"img/{i}.png,{lab},p{i}" if not ids else f"{name},{lab},p{i}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")


LABELS = ["COVID-19", "", "No finding", "", "COVID-19", ""]


def test_blank_labels_are_an_error_by_default_naming_count_and_first_lines(tmp_path):
    _layout(tmp_path, LABELS)
    with pytest.raises(ValueError) as err:
        create("csv", tmp_path, label_columns="finding")
    msg = str(err.value)
    assert "3 row(s) with a blank label" in msg and "labels.csv" in msg
    assert "line 3" in msg and "line 5" in msg and "line 7" in msg
    assert "on_missing_label" in msg


def test_skip_drops_blank_rows_and_counts_them(tmp_path):
    _layout(tmp_path, LABELS)
    ds = create("csv", tmp_path, label_columns="finding", on_missing_label="skip")
    assert len(ds) == 3 and ds.dropped == {"missing_label": 3}
    assert ds.classes == ["COVID-19", "No finding"]
    assert [ds[i]["label"] for i in range(3)] == [0, 1, 0]


def test_unlabelled_keeps_rows_with_nan_label(tmp_path):
    _layout(tmp_path, LABELS)
    ds = create("csv", tmp_path, label_columns="finding", on_missing_label="unlabelled")
    assert len(ds) == 6 and ds.classes == ["COVID-19", "No finding"]
    labels = [ds[i]["label"] for i in range(6)]
    assert labels[0] == 0 and labels[2] == 1 and all(math.isnan(labels[i]) for i in (1, 3, 5))


def test_bad_option_and_missing_column_message(tmp_path):
    _layout(tmp_path, ["a", "b"])
    with pytest.raises(ValueError, match="on_missing_label must be"):
        create("csv", tmp_path, label_columns="finding", on_missing_label="drop")
    with pytest.raises(ValueError) as err:
        create("csv", tmp_path, label_columns="nope")
    assert "nope" in str(err.value) and "_line" not in str(err.value)


def test_duplicate_id_names_file_and_lines(tmp_path):
    _layout(tmp_path, ["a", "b", "a"])
    text = (tmp_path / "labels.csv").read_text().replace("img/2.png", "img/0.png")
    (tmp_path / "labels.csv").write_text(text)
    with pytest.raises(ValueError) as err:
        create("csv", tmp_path, label_columns="finding")
    msg = str(err.value)
    assert "labels.csv" in msg and "duplicate id 'img/0'" in msg and "[2, 4]" in msg


class _Brightness:
    """A fixed 'model': class scores from the mean pixel (no weights, deterministic)."""

    task = "classification"
    name = "brightness"

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        import torch

        m = batch["image"].float().mean(dim=(1, 2, 3)) / 255
        return {"probs": torch.stack([m, 1 - m], 1)}


def test_unlabelled_rows_are_predicted_but_not_scored(tmp_path):
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.tasks.classification import ClassificationTask

    labels = ["No finding", "", "COVID-19", "", "No finding", "", "COVID-19", "COVID-19"]
    _layout(tmp_path, labels)
    out = {}
    for opt in ("skip", "unlabelled"):
        ds = create("csv", tmp_path, label_columns="finding", on_missing_label=opt)
        res = evaluate(_Brightness(), ds, task=ClassificationTask(multilabel=False), batch_size=3,
                       metrics={"auroc": {}, "accuracy": {}}, progress=False, n_resamples=20)
        assert res.summary["n_failed"] == 0
        out[opt] = (res, {k: v["mean"]["value"] for k, v in res.summary["metrics"].items()})
    assert out["unlabelled"][1] == out["skip"][1]  # the blank rows change no metric
    assert out["skip"][1]["auroc"] == pytest.approx(5 / 6)  # hand-computed on the 5 labelled rows
    samples = out["unlabelled"][0].samples
    assert samples["id"].nunique() == 8  # ... but every row is predicted and kept
    blank = samples[samples["id"].isin(["img/1", "img/3", "img/5"])]
    assert len(blank) == 6 and blank["label"].isna().all() and blank["score"].notna().all()


def test_skipped_rows_are_counted_in_the_run_summary(tmp_path):
    import medimg_bench as mb

    _layout(tmp_path, LABELS)
    ds = create("csv", tmp_path, label_columns="finding", on_missing_label="skip")
    model = mb.create_model("timm", model_name="resnet10t", num_classes=2, in_channels=1, multilabel=False)
    res = mb.evaluate(model, ds, task="classification", metrics={"accuracy": {}}, progress=False,
                      n_resamples=10)
    assert res.summary["n_dropped"] == {"missing_label": 3}
    assert res.manifest["dataset"]["dropped"] == {"missing_label": 3}
