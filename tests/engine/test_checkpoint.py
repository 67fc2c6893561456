"""An interrupted evaluation resumes from its checkpoint and ends with the uninterrupted numbers;
the checkpoint is keyed to what produced the predictions, costs a linear total and restores
onto any device."""

import pandas as pd
import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.engine.checkpoint import Checkpoint, read_part
from medimg_bench.engine.runner import evaluate
from medimg_bench.registry import create_model


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
    ds = create("synthetic_cxr", cache_dir=tmp_path / "data", split="all", n=14, size=16)
    (ds.root / ds.manifest["image"][1]).write_bytes(b"broken")  # one failed sample
    return ds


def _run(model, ds, ckpt, **kw):
    return evaluate(model, ds, task="classification", metrics={"auroc": {}, "ece": {}}, batch_size=3,
                    progress=False, n_resamples=30, checkpoint=ckpt, checkpoint_every=1, **kw)


def test_resume_after_interruption_gives_the_uninterrupted_result(cxr, tmp_path):
    reference = _run(CountingModel(), cxr, None)
    ckpt = tmp_path / "run" / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=3), cxr, ckpt)
    assert sorted(p.name for p in ckpt.iterdir()) == ["part-000001.safetensors", "part-000002.safetensors"]
    resumed_model = CountingModel()
    resumed = _run(resumed_model, cxr, ckpt)
    # only the batches after the last checkpoint were predicted again
    assert len(resumed_model.seen) == len(cxr) - 1 - 5  # 14 samples, 1 unreadable, 5 done before
    assert resumed.summary == reference.summary
    pd.testing.assert_frame_equal(resumed.samples, reference.samples, check_exact=True)
    # the manifest covers both segments of the run
    segments = resumed.manifest["segments"]
    assert [s["index"] for s in segments] == [0, 1]
    assert resumed.manifest["wall_time_s"] == pytest.approx(sum(s["wall_time_s"] for s in segments), abs=2e-3)
    assert resumed.manifest["wall_time_s"] > segments[-1]["wall_time_s"]


def test_resume_restores_onto_another_device_type(cxr, tmp_path):
    """The GPU bug without a GPU: states saved from one device, the run resumed on another
    ("meta" here). Restored states must join the new updates wherever those are."""
    reference = _run(CountingModel(), cxr, None)
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=3), cxr, ckpt)
    saved = read_part(ckpt / "part-000001.safetensors")
    assert all(t.device.type == "cpu" for t in saved["metrics"]["auroc"]["preds"][1])
    resumed = _run(CountingModel(), cxr, ckpt, device="meta")
    assert resumed.summary == reference.summary


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_resume_on_cuda_gives_the_uninterrupted_result(cxr, tmp_path):
    class CudaModel(CountingModel):
        def predict(self, batch):
            out = super().predict(batch)
            return {"probs": out["probs"].cuda()}

    reference = _run(CudaModel(), cxr, None, device="cuda")
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(CudaModel(crash_at_call=3), cxr, ckpt, device="cuda")
    resumed = _run(CudaModel(), cxr, ckpt, device="cuda")
    assert resumed.summary == reference.summary


def test_checkpoint_of_another_run_is_refused(cxr, tmp_path):
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=2), cxr, ckpt)
    with pytest.raises(ValueError, match="belongs to another run.*metrics.ece.class: saved"):
        evaluate(CountingModel(), cxr, task="classification", metrics={"auroc": {}}, progress=False,
                 checkpoint=ckpt, n_resamples=5)
    with pytest.raises(ValueError, match="amp: saved False, now True"):
        _run(CountingModel(), cxr, ckpt, amp=True)
    (ckpt / "part-000001.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="part-000001.safetensors.*cannot be read safely"):
        _run(CountingModel(), cxr, ckpt)


def _crash_after(model, n_calls):
    real = model.predict
    calls = {"n": 0}

    def predict(batch):
        calls["n"] += 1
        if calls["n"] == n_calls:
            raise KeyboardInterrupt
        return real(batch)

    model.predict = predict
    return model


def test_resume_with_other_weights_or_architecture_is_refused(tmp_path):
    ds = create("synthetic_cxr", cache_dir=tmp_path / "data", split="all", n=8, size=16)
    opts = dict(model_name="resnet10t", num_classes=3, in_channels=1)
    torch.manual_seed(0)
    first = create_model("timm", **opts)
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(_crash_after(first, 2), ds, ckpt, device="cpu")
    torch.manual_seed(1)  # same name, same architecture, other weights
    with pytest.raises(ValueError, match="model.weights_sha256: saved"):
        _run(create_model("timm", **opts), ds, ckpt)
    with pytest.raises(ValueError, match="model.options.multilabel: saved True, now False"):
        torch.manual_seed(0)
        _run(create_model("timm", **opts, multilabel=False), ds, ckpt)
    torch.manual_seed(0)  # the same weights again: accepted, and equal to an uninterrupted run
    resumed = _run(create_model("timm", **opts), ds, ckpt, device="cpu")
    torch.manual_seed(0)
    reference = _run(create_model("timm", **opts), ds, None, device="cpu")
    assert resumed.summary == reference.summary


def test_unet_with_other_channels_is_refused(tmp_path, synthetic_root):
    ds = create("synthetic_ct", cache_dir=synthetic_root / "ct_ckpt", split="all", n=3, shape=(16, 16, 8))
    ckpt = tmp_path / "checkpoint"
    unet = create_model("monai_unet", num_classes=5, channels=(4, 8), strides=(2,), num_res_units=0)
    with pytest.raises(KeyboardInterrupt):
        evaluate(_crash_after(unet, 2), ds, task="segmentation", progress=False, n_resamples=5,
                 checkpoint=ckpt, checkpoint_every=1)
    other = create_model("monai_unet", num_classes=5, channels=(4, 6), strides=(2,), num_res_units=0)
    with pytest.raises(ValueError, match=r"model.config.channels: saved \[4, 8\], now \[4, 6\]"):
        evaluate(other, ds, task="segmentation", progress=False, n_resamples=5, checkpoint=ckpt)


def test_each_save_appends_only_what_is_new(tmp_path):
    """The old checkpoint rewrote every record at every save (quadratic in N): parts must stay
    the same size as the run goes on."""
    ds = create("synthetic_cxr", cache_dir=tmp_path / "data", split="all", n=48, size=8)
    ckpt = tmp_path / "checkpoint"
    _run(CountingModel(), ds, ckpt)
    sizes = [p.stat().st_size for p in sorted(ckpt.iterdir())]
    assert len(sizes) == 16
    assert max(sizes[1:]) < 1.3 * min(sizes[1:]), sizes


def test_a_save_killed_half_way_is_ignored(cxr, tmp_path):
    reference = _run(CountingModel(), cxr, None)
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=3), cxr, ckpt)
    (ckpt / ".part-000003.999.tmp").write_bytes(b"half a file")
    assert _run(CountingModel(), cxr, ckpt).summary == reference.summary


def test_layout_mismatch_between_process_counts(tmp_path):
    (tmp_path / "ck" / "rank0-of-2").mkdir(parents=True)
    (tmp_path / "ck" / "rank0-of-2" / "part-000001.pt").write_bytes(b"x")
    with pytest.raises(ValueError, match="distributed run"):
        Checkpoint(tmp_path / "ck", key={}).load()
    with pytest.raises(ValueError, match="other process counts"):
        Checkpoint(tmp_path / "ck", key={}, rank=0, world_size=3).load()


def test_a_shard_resumes_its_own_part(cxr, tmp_path):
    reference = _run(CountingModel(), cxr, None, shard="1/2")
    ckpt = tmp_path / "checkpoint"
    with pytest.raises(KeyboardInterrupt):
        _run(CountingModel(crash_at_call=2), cxr, ckpt, shard="1/2")
    with pytest.raises(ValueError, match=r"shard: saved \[1, 2\], now \[0, 2\]"):
        _run(CountingModel(), cxr, ckpt, shard="0/2")
    resumed = _run(CountingModel(), cxr, ckpt, shard="1/2")
    assert resumed.summary == reference.summary
    pd.testing.assert_frame_equal(resumed.samples, reference.samples, check_exact=True)


class ServerDown(CountingModel):
    """Fails on ``down`` ids, alone or in a batch (a server that was down for those requests)."""

    def __init__(self, down):
        super().__init__()
        self.down = set(down)

    def predict(self, batch):
        if self.down & set(batch["id"]):
            raise ConnectionError(f"server down for {sorted(self.down & set(batch['id']))}")
        return super().predict(batch)


def test_retry_failed_predicts_exactly_the_failed_samples_again(cxr, tmp_path):
    """A finished run with failures, resumed with retry_failed: only its failed samples are
    predicted again, and the results are those of a run where they never failed."""
    down = [cxr.sample_id(4), cxr.sample_id(9)]
    unreadable = cxr.sample_id(1)  # fails to load every time
    reference = _run(CountingModel(), cxr, None)
    ckpt = tmp_path / "checkpoint"
    first = _run(ServerDown(down), cxr, ckpt)
    assert first.summary["failed_ids"] == sorted([unreadable, *down])
    again_model = ServerDown(())  # the same model, the server back up
    again = _run(again_model, cxr, ckpt, retry_failed=True)
    assert sorted(again_model.seen) == sorted(down)  # the unreadable one fails to load again
    assert again.summary == reference.summary
    pd.testing.assert_frame_equal(again.samples, reference.samples, check_exact=True)
    assert again.manifest["retried"] == {"n": 3, "recovered": 2}
    assert [s["index"] for s in again.manifest["segments"]] == [0, 1]
    # the parts on disk now say the same: a third pass only retries the unreadable sample
    third_model = ServerDown(())
    third = _run(third_model, cxr, ckpt, retry_failed=True)
    assert third_model.seen == [] and third.summary == reference.summary
    pd.testing.assert_frame_equal(third.samples, reference.samples, check_exact=True)
    # without retry_failed a resume keeps the failures as they are and predicts nothing
    kept_model = ServerDown(())
    kept = _run(kept_model, cxr, ckpt)
    assert kept_model.seen == [] and kept.summary == reference.summary


def test_a_run_that_never_saves_computes_no_checkpoint_key(tmp_path, monkeypatch):
    """The key (the weights' hash) is computed when a save or a resume needs it; the dataset's
    identity (manifest, file contents) once, for the manifest and the key. (A run with failures
    saves at the end.)"""
    cxr = create("synthetic_cxr", cache_dir=tmp_path / "data", split="all", n=8, size=16)
    calls = []
    real = type(cxr).identity
    monkeypatch.setattr(type(cxr), "identity", lambda self: calls.append(1) or real(self))
    res = evaluate(CountingModel(), cxr, task="classification", metrics={"auroc": {}}, batch_size=3,
                   progress=False, n_resamples=5, checkpoint=tmp_path / "ck", checkpoint_every=1,
                   checkpoint_interval_s=3600)
    assert not (tmp_path / "ck").exists() and len(calls) == 1
    assert res.manifest["dataset"]["fingerprint"] == cxr.fingerprint()
    assert res.manifest["model_fingerprint"]["name"] == "counting"
