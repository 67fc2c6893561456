"""An interrupted evaluation resumes from its checkpoint and ends with the uninterrupted numbers."""

import pandas as pd
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.engine.runner import evaluate


class CountingModel:
    task = "classification"
    name = "counting"

    def __init__(self, crash_at_call=None):
        self.calls = 0
        self.seen: list[str] = []
        self.crash_at_call = crash_at_call

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        self.calls += 1
        if self.calls == self.crash_at_call:
            raise KeyboardInterrupt  # a killed job: not an Exception, so not a sample failure
        self.seen.extend(batch["id"])
        m = batch["image"].mean(dim=(1, 2, 3))
        return {"probs": torch.stack([m, 1 - m, m * m], dim=1)}


@pytest.fixture()
def cxr(tmp_path):
    ds = create("synthetic_cxr", tmp_path / "data", split="all", n=14, size=16)
    (tmp_path / "data" / ds.manifest["image"][1]).write_bytes(b"broken")  # one failed sample
    return ds


def _run(model, ds, ckpt, **kw):
    return evaluate(model, ds, task="classification", metrics={"auroc": {}, "ece": {}}, batch_size=3,
                    progress=False, n_resamples=30, checkpoint=ckpt, checkpoint_every=1, **kw)


def test_resume_after_interruption_gives_the_uninterrupted_result(cxr, tmp_path):
    reference = _run(CountingModel(), cxr, None)
    ckpt = tmp_path / "run" / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=3), cxr, ckpt)
    assert ckpt.exists()
    resumed_model = CountingModel()
    resumed = _run(resumed_model, cxr, ckpt)
    # only the batches after the last checkpoint were predicted again
    assert len(resumed_model.seen) == len(cxr) - 1 - 5  # 14 samples, 1 unreadable, 5 done before
    assert resumed.summary == reference.summary
    pd.testing.assert_frame_equal(resumed.samples, reference.samples)


def test_checkpoint_of_another_run_is_refused(cxr, tmp_path):
    ckpt = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=2), cxr, ckpt)
    with pytest.raises(ValueError, match="belongs to another run"):
        evaluate(CountingModel(), cxr, task="classification", metrics={"auroc": {}}, progress=False,
                 checkpoint=ckpt, n_resamples=5)
    ckpt.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read safely"):
        _run(CountingModel(), cxr, ckpt)
