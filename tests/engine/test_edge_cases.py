"""Edge cases found in review: each used to crash a run or give a wrong summary."""

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.engine.runner import evaluate
from medimg_bench.metrics.classification import AUROC
from medimg_bench.models.training import fit
from medimg_bench.registry import create_model, create_task
from tests.engine._models import MeanModel


class Tensors(ManifestDataset):
    """Images and labels held in the manifest's row order (no files)."""

    def __init__(self, manifest, images, labels, **kw):
        super().__init__(manifest, **kw)
        self.images, self.labels = images, labels

    def load(self, row):
        i = int(row["index"])
        return {"id": row["id"], "image": self.images[i], "label": self.labels[i], "meta": self.meta_for(row)}


def _tensors(n=8, patients=None, labels=None, classes=("a", "b", "c")):
    g = torch.Generator().manual_seed(0)
    images = torch.rand(n, 1, 8, 8, generator=g)
    if labels is None:
        labels = (torch.rand(n, len(classes), generator=g) > 0.5).float()
        labels[0], labels[1] = 1.0, 0.0
    man = pd.DataFrame({"id": [f"s{i}" for i in range(n)], "index": range(n)})
    if patients is not None:
        man["patient_id"] = patients
    return Tensors(man, images, labels, classes=classes, name="tensors")


class Mean(MeanModel):
    def __init__(self, nan_for=()):
        self.nan_for = set(nan_for)

    def predict(self, batch):
        p = super().predict(batch)["probs"]
        for i, sid in enumerate(batch["id"]):
            if sid in self.nan_for:
                p[i] = float("nan")
        return {"probs": p}


def test_one_patient_gives_point_values_without_interval():
    ds = _tensors(patients=["p0"] * 8)
    res = evaluate(Mean(), ds, task="classification", metrics={"auroc": {}}, progress=False, n_resamples=20)
    auroc = res.summary["metrics"]["auroc"]
    assert auroc["mean"]["value"] is not None and auroc["mean"]["ci_low"] is None
    assert "1 patient" in auroc["note"]


def test_nan_scores_fail_only_that_sample():
    ds = _tensors()
    res = evaluate(Mean(nan_for={"s3"}), ds, task="classification", metrics={"auroc": {}}, batch_size=4,
                   progress=False, n_resamples=20)
    assert res.summary["failed_ids"] == ["s3"]
    assert "NaN or inf" in res.failures.set_index("id")["error"]["s3"]
    assert len(res.metrics["auroc"].ids) == 7


def test_blank_patient_ids_do_not_merge_samples():
    ds = _tensors(n=4, patients=["p1", np.nan, None, ""])
    assert ds.manifest["patient_id"].tolist() == ["p1", "s1", "s2", "s3"]


def test_ready_metric_objects_are_reset_between_runs():
    ds = _tensors()
    metrics = {"auroc": AUROC()}
    evaluate(Mean(), ds, task="classification", metrics=metrics, progress=False, n_resamples=10)
    res = evaluate(Mean(), ds, task="classification", metrics=metrics, progress=False, n_resamples=10)
    assert len(res.metrics["auroc"].ids) == len(ds)


def test_multiclass_with_an_unlabelled_sample():
    labels = torch.tensor([0, 1, 2, 0, 1, 2, float("nan"), 1])
    ds = _tensors(labels=labels)
    task = create_task("classification", multilabel=False)
    res = evaluate(Mean(), ds, task=task, metrics={"auroc": {}}, progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0
    unlabelled = res.samples[res.samples["id"] == "s6"]
    assert unlabelled["label"].isna().all()
    from sklearn.metrics import roc_auc_score

    ok = res.samples[res.samples["label"].notna()]
    for cname, g in ok.groupby("class"):
        assert res.summary["metrics"]["auroc"]["per_class"][cname]["value"] == pytest.approx(
            roc_auc_score(g["label"], g["score"]), abs=1e-6)
    model = create_model("timm", model_name="resnet10t", num_classes=3, in_channels=1, multilabel=False)
    logits = model.forward_batch({"image": torch.rand(8, 1, 32, 32)})
    loss = task.loss(logits, {"label": labels})
    assert torch.isfinite(loss)


def test_training_skips_unreadable_samples(tmp_path, caplog):
    ds = create("synthetic_cxr", cache_dir=tmp_path / "d", split="all", n=10, size=32)
    (ds.root / ds.manifest["image"][4]).write_bytes(b"broken")
    model = create_model("timm", model_name="resnet10t", num_classes=3, in_channels=1)
    task = create_task("classification")
    with caplog.at_level("WARNING"):
        result = fit(model, ds, loss_fn=task.loss, max_steps=3, batch_size=4, progress=False)
    assert result.steps == 3
    assert ds.sample_id(4) in caplog.text


def test_segmentation_summary_knows_metric_directions(tmp_path):
    ds = create("synthetic_ct", cache_dir=tmp_path / "ct", split="all", n=2, shape=(16, 16, 8))
    model = create_model("monai_unet", num_classes=5, channels=(4, 8), strides=(2,), num_res_units=0)
    res = evaluate(model, ds, task="segmentation",
                   metrics={"scores": {"metric": "segmentation", "metrics": ["dice", "hd95"]}},
                   progress=False, n_resamples=10)
    assert res.summary["metrics"]["dice"]["higher_is_better"] is True
    assert res.summary["metrics"]["hd95"]["higher_is_better"] is False


def test_checkpoint_with_other_metric_options_is_refused(tmp_path):
    ds = _tensors()
    ckpt = tmp_path / "c.pt"

    evaluate(Mean(), ds, task="classification", metrics={"sensitivity": {"threshold": 0.5}}, progress=False,
             checkpoint=ckpt, checkpoint_every=1, n_resamples=5)  # finished: checkpoint left behind
    with pytest.raises(ValueError, match="belongs to another run"):
        evaluate(Mean(), ds, task="classification", metrics={"sensitivity": {"threshold": 0.3}},
                 progress=False, checkpoint=ckpt, n_resamples=5)


def test_subgroups_where_every_group_is_too_small_do_not_crash_the_run():
    import torch

    from medimg_bench.engine.subgroups import subgroup_summary
    from medimg_bench.registry import create_metric

    m = create_metric("dice", num_classes=2)
    pred = torch.zeros(3, 4, 4, dtype=torch.long)
    pred[:, :2] = 1
    m.update(pred, pred.clone(), None, ids=["a", "b", "c"])
    out = subgroup_summary({"dice": m}, {"a": "x", "b": "y", "c": "z"}, min_group_size=2)
    assert "undefined" in out["dice"] and "every group" in out["dice"]["undefined"]
