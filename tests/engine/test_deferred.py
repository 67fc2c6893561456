"""Deferred block scoring (engine/loop.py) gives what per-batch scoring gives, bit for bit: with a
sample that fails in the middle of a block, and across a kill and resume in the middle of one."""

import json

import pandas as pd
import pytest
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.engine import loop
from medimg_bench.engine.checkpoint import read_part
from medimg_bench.engine.runner import evaluate
from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.classification import AUROC
from medimg_bench.registry import create_task

METRICS = ("auroc", "auprc", "sensitivity", "specificity", "ece")


class Tensors(ManifestDataset):
    """Images and labels in memory; ``unreadable`` ids raise on load."""

    def __init__(self, n=46, classes=("a", "b", "c", "d"), unreadable=()):
        man = pd.DataFrame({"id": [f"s{i:03d}" for i in range(n)], "patient_id": [f"p{i // 3}" for i in range(n)],
                            "index": range(n)})
        super().__init__(man, classes=classes, name="tensors")
        g = torch.Generator().manual_seed(1)
        self.images = torch.rand(n, 1, 6, 6, generator=g)
        self.labels = (torch.rand(n, len(classes), generator=g) > 0.5).float()
        self.labels[3, 1] = float("nan")  # an unlabelled entry
        self.unreadable = set(unreadable)

    def load(self, row):
        if row["id"] in self.unreadable:
            raise OSError(f"cannot read {row['id']}")
        i = int(row["index"])
        return {"id": row["id"], "image": self.images[i], "label": self.labels[i], "meta": self.meta_for(row)}


class Model:
    """Scores from the image; NaN for ``nan_for``; a KeyboardInterrupt (a kill) at predict call
    ``crash_at``."""

    task, name = "classification", "deferred-test"

    def __init__(self, nan_for=(), crash_at=None):
        self.nan_for, self.crash_at = set(nan_for), crash_at
        self.calls, self.seen = 0, []

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        self.seen.extend(batch["id"])
        x = batch["image"].flatten(1)
        p = torch.sigmoid(torch.stack([x[:, 0] - 0.5, x[:, 1] - x[:, 2], x.mean(1) - 0.5, x[:, 3]], 1) * 4)
        for i, sid in enumerate(batch["id"]):
            if sid in self.nan_for:
                p[i] = float("nan")
        return {"probs": p}


class Picky(AUROC):
    """AUROC whose update refuses one sample: a ``[metric]`` failure inside a block."""

    concat_updates = True  # still a pure concatenation: it only refuses

    def __init__(self, refuse="s021", **kw):
        super().__init__(**kw)
        self.refuse = refuse

    def update(self, preds, targets, meta=None, *, ids=None):
        if self.refuse in list(ids):
            raise ValueError(f"refusing {self.refuse}")
        super().update(preds, targets, meta, ids=ids)


def _metrics(classes, refuse):
    task = create_task("classification")
    out = task.build_metrics({m: {} for m in METRICS}, classes)
    out["picky"] = Picky(refuse=refuse, class_names=list(classes))
    return out


def _run(model, ds, *, deferred, monkeypatch, block_rows=12, refuse="s021", **kw):
    with monkeypatch.context() as m:
        m.setattr(loop, "BLOCK_ROWS", block_rows)
        if not deferred:
            m.setattr(loop, "rowwise_task", lambda task: False)
        return evaluate(model, ds, task="classification", metrics=_metrics(ds.classes, refuse), batch_size=4,
                        progress=False, n_resamples=40, **kw)


def _same(a, b):
    assert json.dumps(a.summary, sort_keys=True) == json.dumps(b.summary, sort_keys=True)
    pd.testing.assert_frame_equal(a.samples, b.samples, check_exact=True)
    for name, metric in a.metrics.items():
        other = b.metrics[name]
        assert metric.ids == other.ids
        for state in ("preds", "targets"):
            x, y = (torch.cat(getattr(m, state)) for m in (metric, other))
            assert x.dtype == y.dtype and torch.equal(x.isnan(), y.isnan())
            assert torch.equal(x.nan_to_num(), y.nan_to_num())


def test_deferred_updates_equal_per_batch_updates_with_failures_in_a_block(monkeypatch):
    # s009: unreadable; s014: NaN scores (fails in the task's metric inputs); s021: refused by
    # one metric's update. With 4 samples a batch and blocks of 12, each sits inside a block.
    ds = Tensors(unreadable={"s009"})
    kw = dict(nan_for={"s014"})
    per_batch = _run(Model(**kw), ds, deferred=False, monkeypatch=monkeypatch)
    deferred = _run(Model(**kw), ds, deferred=True, monkeypatch=monkeypatch)
    _same(deferred, per_batch)
    failed = deferred.failures.set_index("id")["error"]
    assert sorted(failed.index) == ["s009", "s014", "s021"]
    assert failed["s009"].startswith("[load]") and "NaN or inf" in failed["s014"]
    assert failed["s021"].startswith("[metric]") and "refusing s021" in failed["s021"]
    # every metric saw the same samples: the refused one is rolled back in all of them
    assert all(len(m.ids) == len(ds) - 3 for m in deferred.metrics.values())
    # and the updates really were grouped: fewer state items than batches
    assert len(deferred.metrics["auroc"].preds) < len(per_batch.metrics["auroc"].preds)


def test_one_block_for_the_whole_run_equals_per_batch(monkeypatch):
    ds = Tensors()
    per_batch = _run(Model(), ds, deferred=False, monkeypatch=monkeypatch, refuse=None)
    deferred = _run(Model(), ds, deferred=True, monkeypatch=monkeypatch, block_rows=10_000, refuse=None)
    _same(deferred, per_batch)
    assert len(deferred.metrics["auroc"].preds) == 1


def test_kill_and_resume_in_the_middle_of_a_block(monkeypatch, tmp_path):
    ds = Tensors(unreadable={"s009"})
    reference = _run(Model(nan_for={"s030"}), ds, deferred=False, monkeypatch=monkeypatch, refuse=None)
    ckpt = tmp_path / "checkpoint"
    # blocks of 7 rows and a checkpoint every 3 batches of 4: batches 1-2 are scored as a block,
    # the save at batch 3 (one sample unreadable) flushes the 3 rows pending, batch 4 is then
    # predicted and pending when the kill comes at batch 5
    run = dict(deferred=True, monkeypatch=monkeypatch, block_rows=7, checkpoint=ckpt, checkpoint_every=3,
               refuse=None)
    with pytest.raises(KeyboardInterrupt):
        _run(Model(nan_for={"s030"}, crash_at=5), ds, **run)
    resumed_model = Model(nan_for={"s030"})
    resumed = _run(resumed_model, ds, **run)
    _same(resumed, reference)
    # the checkpoint holds the first 3 batches (12 samples): batches 1-2 scored, batch 3 unscored
    # (scored by the resume's first block); batch 4 was lost with the kill and is predicted again (s028-s031 twice: the NaN batch is retried one sample at a time)
    assert resumed_model.seen[:4] == ["s012", "s013", "s014", "s015"]
    assert len(set(resumed_model.seen)) == len(ds) - 12
    assert resumed.failures.set_index("id")["error"]["s030"].startswith("[predict]")


def test_parts_hold_pending_batches_unscored_and_the_resume_scores_them(monkeypatch, tmp_path):
    # blocks larger than the run: nothing is scored before the kill at batch 7, so the six parts
    # hold unscored predictions only; the NaN sample s005 (batch 2) and the unreadable s009 sit
    # in them. The resume scores them, isolating s005 (its batch loaded again by id).
    ds = Tensors(unreadable={"s009"})
    reference = _run(Model(nan_for={"s005"}), ds, deferred=False, monkeypatch=monkeypatch, refuse=None)
    ckpt = tmp_path / "checkpoint"
    run = dict(deferred=True, monkeypatch=monkeypatch, block_rows=10_000, checkpoint=ckpt, checkpoint_every=1,
               refuse=None)
    with pytest.raises(KeyboardInterrupt):
        _run(Model(nan_for={"s005"}, crash_at=7), ds, **run)
    parts = [read_part(p) for p in sorted(ckpt.iterdir())]
    assert len(parts) == 6 and all(p["version"] == 5 for p in parts)
    assert all(p["unscored"]["batches"]["sizes"] == [4 - (i == 2)] for i, p in enumerate(parts))
    assert all(not p["metrics"]["auroc"]["preds"][1] for p in parts)  # nothing scored yet
    resumed_model = Model(nan_for={"s005"})
    resumed = _run(resumed_model, ds, **run)
    _same(resumed, reference)
    # the samples after the saved ones are predicted, then (scoring the one block at the end)
    # s005's batch alone, one sample at a time
    assert resumed_model.seen == [f"s{i:03d}" for i in (*range(24, 46), 4, 5, 6, 7)]
    assert resumed.failures.set_index("id")["error"]["s005"].startswith("[predict]")


def test_a_part_with_pending_batches_it_cannot_hold_scores_them_first(monkeypatch, tmp_path):
    class Tuples(Tensors):  # a meta value the part format cannot hold (a dict with an int key)
        def load(self, row):
            return {**super().load(row), "meta": {1: "x"}}

    ds = Tuples()
    reference = _run(Model(), ds, deferred=False, monkeypatch=monkeypatch, refuse=None)
    ckpt = tmp_path / "checkpoint"
    run = dict(deferred=True, monkeypatch=monkeypatch, block_rows=10_000, checkpoint=ckpt, checkpoint_every=2,
               refuse=None)
    with pytest.raises(KeyboardInterrupt):
        _run(Model(crash_at=5), ds, **run)
    parts = [read_part(p) for p in sorted(ckpt.iterdir())]
    assert len(parts) == 2 and all("batches" not in (p.get("unscored") or {}) or
                                   p["unscored"]["batches"] is None for p in parts)
    assert sum(len(p["metrics"]["auroc"]["preds"][1]) for p in parts) == 2  # scored at each save
    _same(_run(Model(), ds, **run), reference)


def test_a_metric_that_defines_its_own_update_is_not_deferred_unless_it_says_so():
    class Own(AUROC):
        def update(self, preds, targets, meta=None, *, ids=None):
            super().update(preds, targets, meta, ids=ids)

    assert AUROC.concat_updates and Picky.concat_updates
    assert not Own.concat_updates and not Metric.concat_updates


def test_a_block_refuses_what_it_cannot_concatenate_exactly():
    a = {"id": ["x", "y"], "label": torch.zeros(2, 3), "meta": [{}, {}]}
    b = {"id": ["z"], "label": torch.ones(1, 3), "meta": [{}]}
    block = loop._Block([a, b])
    assert block["id"] == ["x", "y", "z"] and block["label"].shape == (3, 3)
    assert block.get("mask") is None  # absent from every batch: absent from the block
    with pytest.raises(ValueError, match="some batches"):
        loop._Block([a, {**b, "extra": [1]}]).get("extra")
    with pytest.raises(ValueError, match="dtypes"):
        loop._Block([a, {**b, "label": torch.ones(1, 3, dtype=torch.float64)}])["label"]
    with pytest.raises(RuntimeError):  # other trailing shapes
        loop._Block([a, {**b, "label": torch.ones(1, 4)}])["label"]
    with pytest.raises(TypeError):  # a list of variable-size images next to a stacked tensor
        loop._Block([{**a, "label": [torch.zeros(3), torch.zeros(4)]}, b])["label"]


class ImageReading(type(create_task("classification"))):
    """A row-wise task whose metric inputs read the image, which deferred batches do not keep."""

    rowwise = True

    def metric_inputs(self, batch, outputs):
        preds, targets = super().metric_inputs(batch, outputs)
        return preds * (batch["image"].flatten(1)[:, :1] >= 0), targets


def test_a_task_reading_a_key_not_kept_gets_its_batches_loaded_again(monkeypatch):
    ds = Tensors(unreadable={"s009"})
    with monkeypatch.context() as m:
        m.setattr(loop, "BLOCK_ROWS", 12)
        runs = []
        for deferred in (False, True):
            if not deferred:
                m.setattr(loop, "rowwise_task", lambda task: False)
            else:
                m.undo()
                m.setattr(loop, "BLOCK_ROWS", 12)
            runs.append(evaluate(Model(nan_for={"s014"}), ds, task=ImageReading(), metrics=_metrics(ds.classes, None),
                                 batch_size=4, progress=False, n_resamples=20))
    _same(runs[1], runs[0])
    assert sorted(runs[1].failures["id"]) == ["s009", "s014"]
