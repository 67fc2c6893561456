"""task=classification takes single- vs multi-label from the dataset unless the user sets it
(issue 36, item 3: BreastMNIST under the multi-label default failed all 156 samples with
"shape '[1, 2]' is invalid" and returned quietly)."""

from __future__ import annotations

import json

import pytest
import torch

import medimg_bench as mb
from medimg_bench.registry import create_task
from tests.datasets._helpers import write_breastmnist_like


@pytest.fixture(scope="module")
def breast_root(tmp_path_factory):
    """A BreastMNIST-shaped file (binary-class: one label column, integers 0/1)."""
    return write_breastmnist_like(tmp_path_factory.mktemp("medmnist"), sizes=(12, 4, 12), seed=0)


class _Bright:
    """Class scores from the mean intensity: softmax over two classes, or one sigmoid per class."""

    name = "bright"

    def __init__(self, multilabel: bool) -> None:
        self.multilabel = multilabel

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        x = torch.stack([torch.as_tensor(im).float().mean() for im in batch["image"]])
        logits = torch.stack([-x, x], dim=1)
        return {"probs": torch.sigmoid(logits) if self.multilabel else torch.softmax(logits, dim=1)}


def test_the_task_follows_the_dataset_unless_set(breast_root):
    ds = mb.create_dataset("medmnist", root=breast_root, flag="breastmnist", split="test")
    assert ds.multilabel is False
    task = create_task("classification")
    task.bind_dataset(ds)
    assert task.multilabel is False
    with pytest.raises(ValueError, match=r"task.options.multilabel=true contradicts dataset 'medmnist/breastmnist'.*single-label"):
        create_task("classification", multilabel=True).bind_dataset(ds)
    kept = create_task("classification", multilabel=False)
    kept.bind_dataset(ds)
    assert kept.multilabel is False
    silent = create_task("classification")
    silent.bind_dataset(object())  # a dataset that does not say: the multi-label default
    assert silent.multilabel is True


def test_api_breastmnist_scores_every_sample_with_the_default_task(breast_root):
    ds = mb.create_dataset("medmnist", root=breast_root, flag="breastmnist", split="test")
    res = mb.evaluate(_Bright(multilabel=False), ds, task="classification", progress=False, n_resamples=20)
    assert res.summary["n_failed"] == 0 and res.summary["n_samples"] == 12
    from sklearn.metrics import roc_auc_score

    s = res.samples[res.samples["class"] == res.samples["class"].iloc[1]]
    assert res.summary["metrics"]["auroc"]["per_class"][s["class"].iloc[0]]["value"] == pytest.approx(
        roc_auc_score(s["label"], s["score"]), abs=1e-9)
    # a model whose scores contradict the data: one error before anything runs, naming both
    with pytest.raises(ValueError, match=r"model 'bright' gives multi-label .* dataset 'medmnist/breastmnist' is single-label"):
        mb.evaluate(_Bright(multilabel=True), ds, task="classification", progress=False)


def test_config_run_takes_multilabel_from_the_dataset(breast_root, tmp_path):
    from medimg_bench.runs import compose_config, run_config

    base = ["dataset=medmnist", f"dataset.root={breast_root}", "dataset.options.flag=breastmnist",
            "model.options.model_name=resnet10t", "bootstrap.n_resamples=10", "progress=false"]
    res = run_config(compose_config(base), tmp_path / "run")
    assert res.summary["n_failed"] == 0
    saved = json.loads((tmp_path / "run" / "manifest.json").read_text())["config"]
    assert saved["task"]["options"]["multilabel"] is False and saved["model"]["options"]["multilabel"] is False
    with pytest.raises(ValueError, match="contradicts dataset 'medmnist/breastmnist'"):
        run_config(compose_config([*base, "task.options.multilabel=true"]), tmp_path / "conflict")
