"""Resume with changed data or options, generated: a run is killed after two checkpointed
batches, one input is changed, and the resume must be refused naming the field — never a run
that mixes two datasets, two preprocessings or two models under one manifest (issue #19 item 1).
Changes that decide nothing (a touched file, the dataset moved elsewhere) must resume."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from medimg_bench.engine.runner import evaluate
from medimg_bench.registry import create_dataset, create_model, create_task

OLD = 1_600_000_000
N = 10


class Crashing:
    """Delegates to ``inner`` and is killed at its ``crash_at``-th batch."""

    task = "classification"
    name = "crashing"

    def __init__(self, inner, crash_at=None):
        self.inner, self.crash_at, self.calls = inner, crash_at, 0

    def to(self, device):
        return self

    def bind_dataset(self, dataset):  # stored predictions match their columns to the classes
        if hasattr(self.inner, "bind_dataset"):
            self.inner.bind_dataset(dataset)

    def eval(self):
        return self

    def fingerprint(self):
        return self.inner.fingerprint()

    def predict(self, batch):
        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        return self.inner.predict(batch)


def _make(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    lines = ["path,label"]
    for i in range(N):
        img = np.random.default_rng(i).integers(0, 255, (12, 12), dtype=np.uint8)
        Image.fromarray(img).save(root / f"img{i}.png")
        os.utime(root / f"img{i}.png", (OLD, OLD))
        lines.append(f"img{i}.png,{'abc'[i % 3]}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    preds = tmp_path / "preds"
    preds.mkdir()
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(3), N)
    pd.DataFrame({"id": [f"img{i}" for i in range(N)], "a": p[:, 0], "b": p[:, 1], "c": p[:, 2]}).to_csv(
        preds / "predictions.csv", index=False)
    return root, preds


def _swap(root):
    a, b = root / "img0.png", root / "img7.png"
    os.rename(a, root / ".t")
    os.rename(b, a)
    os.rename(root / ".t", b)


def _pixel(root):
    img = np.asarray(Image.open(root / "img8.png")).copy()
    img[3, 3] ^= 1
    Image.fromarray(img).save(root / "img8.png")


def _duplicate(root):
    shutil.copy(root / "img1.png", root / "img9.png")


def _label(root):
    lines = (root / "labels.csv").read_text().splitlines()
    path, label = lines[-1].rsplit(",", 1)
    lines[-1] = f"{path},{'a' if label != 'a' else 'b'}"
    (root / "labels.csv").write_text("\n".join(lines) + "\n")


def _remove_row(root):
    lines = (root / "labels.csv").read_text().splitlines()
    (root / "labels.csv").write_text("\n".join(lines[:-1]) + "\n")


def _score(preds):
    df = pd.read_csv(preds / "predictions.csv")
    df.loc[9, ["a", "b", "c"]] = [0.9, 0.05, 0.05]
    df.to_csv(preds / "predictions.csv", index=False)


# (case, what is changed, the field the refusal must name)
REFUSED = [
    ("files shuffled", lambda r, p: _swap(r), "dataset.content_sha256"),
    ("one pixel", lambda r, p: _pixel(r), "dataset.content_sha256"),
    ("file replaced by a copy of another", lambda r, p: _duplicate(r), "dataset.content_sha256"),
    ("file emptied", lambda r, p: (r / "img9.png").write_bytes(b""), "dataset.content_sha256"),
    ("label changed", lambda r, p: _label(r), "dataset.manifest_sha256"),
    ("row removed", lambda r, p: _remove_row(r), "dataset.manifest_sha256"),
    ("prediction file changed", lambda r, p: _score(p), "model.files"),
]
OPTIONS = [({"normalize": "none"}, "normalize"), ({"normalize": "minmax"}, "normalize"),
           ({"channels": 3}, "channels"), ({"uncertainty": "u_zeros"}, "uncertainty"),
           ({"on_missing_label": "skip"}, "on_missing_label")]
ACCEPTED = [
    ("touched", lambda r, p: os.utime(r / "img3.png")),
    ("rewritten with the same bytes", lambda r, p: (r / "img4.png").write_bytes((r / "img4.png").read_bytes())),
]


def _run(root, preds, ckpt, *, crash_at=None, **options):
    ds = create_dataset("csv", root=root, split="test", **options)
    model = Crashing(create_model("predictions", root=preds, num_classes=3), crash_at)
    task = create_task("classification", multilabel=False)
    return evaluate(model, ds, task=task, metrics={"auroc": {}}, batch_size=2, progress=False,
                    n_resamples=10, checkpoint=ckpt, checkpoint_every=1)


@pytest.fixture
def killed(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root, preds = _make(tmp_path)
    ckpt = tmp_path / "run" / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(root, preds, ckpt, crash_at=3)
    return root, preds, ckpt


@pytest.mark.parametrize("case, change, field", REFUSED, ids=[c[0] for c in REFUSED])
def test_resume_with_changed_data_or_model_is_refused(killed, case, change, field):
    root, preds, ckpt = killed
    change(root, preds)
    with pytest.raises(ValueError, match="belongs to another run") as err:
        _run(root, preds, ckpt)
    assert field in str(err.value), str(err.value)


@pytest.mark.parametrize("options, name", OPTIONS, ids=[f"{k}={v}" for o, _ in OPTIONS for k, v in o.items()])
def test_resume_with_other_loader_options_is_refused(killed, options, name):
    root, preds, ckpt = killed
    with pytest.raises(ValueError, match="belongs to another run") as err:
        _run(root, preds, ckpt, **options)
    assert f"dataset.options.factory.options.{name}" in str(err.value), str(err.value)


@pytest.mark.parametrize("case, change", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_changes_that_decide_nothing_resume(killed, tmp_path, case, change):
    root, preds, ckpt = killed
    reference = _run(root, preds, None)
    change(root, preds)
    resumed = _run(root, preds, ckpt)
    assert resumed.summary == reference.summary and len(resumed.manifest["segments"]) == 2


def test_the_dataset_moved_elsewhere_resumes(killed, tmp_path):
    root, preds, ckpt = killed
    moved = tmp_path / "mnt" / "data"
    shutil.copytree(root, moved)
    shutil.rmtree(root)
    resumed = _run(moved, preds, ckpt)
    assert len(resumed.manifest["segments"]) == 2
    assert resumed.manifest["dataset"]["identity"]["options"]["factory"]["options"]["normalize"] == "auto"
