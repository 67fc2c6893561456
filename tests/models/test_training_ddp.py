"""fit(): data-parallel training under a gloo process group matches one process; checkpoint and
resume reproduce an uninterrupted run; encoder/head learning rates and clipping."""

import os
import socket

import pytest
import torch

from medimg_bench.models.classification import ClassifierAdapter
from medimg_bench.models.training import _param_groups, fit
from medimg_bench.tasks.classification import ClassificationTask


class _Data(torch.utils.data.Dataset):
    def __init__(self, n=48, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 1, 8, 8, generator=g)
        self.y = (self.x.mean((1, 2, 3)) > 0).long() + (self.x[:, 0, 0, 0] > 0.5).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"id": f"s{i}", "image": self.x[i], "label": self.y[i]}


def _model(seed=0):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 36, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    return ClassifierAdapter(net, multilabel=False)


LOSS = ClassificationTask(multilabel=False).loss
KW = {"loss_fn": LOSS, "max_steps": 12, "lr": 0.05, "batch_size": 8, "progress": False, "seed": 3,
      "bn_recalibration_batches": 0, "grad_clip": 1.0, "encoder_lr_scale": 0.5}


def _worker(rank, world, port, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        model = _model()
        res = fit(model, _Data(), checkpoint_dir=os.path.join(out_dir, f"ckpt_rank{rank}"), checkpoint_every=4, **KW)
        torch.save({"losses": res.losses, "state": model.module.state_dict()},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_gloo_processes_follow_the_single_process_loss_curve(tmp_path):
    torch.set_num_threads(1)
    single = _model()
    ref = fit(single, _Data(), **KW)
    torch.multiprocessing.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert len(r0["losses"]) == len(ref.losses) == 12
    assert r0["losses"] == pytest.approx(ref.losses, rel=1e-4, abs=1e-5)
    assert r0["losses"] == r1["losses"]
    for k, v in single.module.state_dict().items():
        assert torch.equal(r0["state"][k], r1["state"][k])  # replicas in sync
        assert torch.allclose(r0["state"][k], v, atol=1e-4), k
    assert (tmp_path / "ckpt_rank0" / "train_state.pt").exists()
    assert not (tmp_path / "ckpt_rank1").exists()  # only rank 0 writes


def test_resume_after_interruption_gives_the_same_result(tmp_path):
    data = _Data()
    val = _Data(16, seed=1)

    def val_fn(m):
        with torch.no_grad():
            return float((m.predict({"image": val.x})["probs"].argmax(1) == val.y).float().mean())

    kw = {**KW, "val_fn": val_fn, "val_every": 2, "patience": 50, "checkpoint_every": 3}
    full_model = _model()
    full = fit(full_model, data, checkpoint_dir=tmp_path / "a", **kw)

    calls = {"n": 0}

    def flaky_loss(logits, batch):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt("simulated kill")
        return LOSS(logits, batch)

    with pytest.raises(KeyboardInterrupt):
        fit(_model(), data, checkpoint_dir=tmp_path / "b", **{**kw, "loss_fn": flaky_loss})
    resumed_model = _model(seed=99)  # other initial weights: the checkpoint decides
    resumed = fit(resumed_model, data, checkpoint_dir=tmp_path / "b", **kw)
    assert resumed.losses == full.losses and resumed.best_step == full.best_step
    for k, v in full_model.module.state_dict().items():
        assert torch.equal(resumed_model.module.state_dict()[k], v), k
    with pytest.raises(ValueError, match="from another setup.*lr"):
        fit(_model(), data, checkpoint_dir=tmp_path / "b", **{**kw, "lr": 0.01})


def test_encoder_lr_is_scaled_relative_to_the_head():
    import timm

    model = ClassifierAdapter(timm.create_model("resnet10t", num_classes=2, in_chans=1))
    groups = _param_groups(model, 0.1)
    head = {id(p) for p in model.module.get_classifier().parameters()}
    assert {id(p) for p in groups[0]["params"]} == head and groups[1]["lr_scale"] == 0.1
    res = fit(_model(), _Data(16), loss_fn=LOSS, max_steps=2, batch_size=8, progress=False, encoder_lr_scale=0.1,
              bn_recalibration_batches=0, amp=True)
    assert res.steps == 2 and all(torch.isfinite(torch.tensor(res.losses)))
