import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.engine.runner import evaluate
from medimg_bench.models.training import fit
from medimg_bench.registry import create_model, create_task


def test_short_training_learns_synthetic_cxr(synthetic_root):
    """The demo's claim in small: a few dozen steps beat chance on held-out patients."""
    torch.manual_seed(0)
    train = create("synthetic_cxr", cache_dir=synthetic_root / "learn", split="train", n=160, size=48)
    test = create("synthetic_cxr", cache_dir=synthetic_root / "learn", split="test", n=160, size=48)
    model = create_model("timm", model_name="resnet10t", num_classes=3, in_channels=1)
    task = create_task("classification")
    before = evaluate(model, test, task=task, progress=False, n_resamples=10, batch_size=32)
    result = fit(model, train, loss_fn=task.loss, max_steps=100, lr=3e-3, batch_size=32, progress=False)
    after = evaluate(model, test, task=task, progress=False, n_resamples=10, batch_size=32)
    assert result.steps == 100 and result.losses[-1] < result.losses[0]
    auc_after = after.summary["metrics"]["auroc"]["mean"]["value"]
    assert auc_after > 0.7, (before.summary["metrics"]["auroc"], after.summary["metrics"]["auroc"])


def test_recalibrate_batchnorm_averages_batch_statistics():
    from medimg_bench.models.base import ModelAdapter
    from medimg_bench.models.training import recalibrate_batchnorm

    class Adapter(ModelAdapter):
        def forward_batch(self, batch):
            return self.module(batch["image"])

    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3)
    bn.running_mean.fill_(100.0)  # stale statistics
    batches = [{"image": torch.randn(8, 3) * (i + 1) + i} for i in range(4)]
    used = recalibrate_batchnorm(Adapter(bn), batches, max_batches=3)
    assert used == 3
    expected = torch.stack([b["image"].mean(0) for b in batches[:3]]).mean(0)
    assert torch.allclose(bn.running_mean, expected, atol=1e-6)
    assert bn.momentum == 0.1  # restored


# -- epoch recipes: optimizer choice, MultiStepLR milestones, validation selection ----------------
class _Toy(torch.utils.data.Dataset):
    """Two classes told apart by the mean intensity; ``n`` samples of 1x8x8."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 1, 8, 8, generator=g)
        self.y = (self.x.mean((1, 2, 3)) > 0).long()
        self.x[self.y == 1] += 0.5

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"id": f"s{i}", "image": self.x[i], "label": int(self.y[i])}


def _toy_model(seed=0):
    from medimg_bench.models.classification import ClassifierAdapter

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 36, 2))
    return ClassifierAdapter(net, multilabel=False)


_LOSS = create_task("classification", multilabel=False).loss


def test_multistep_milestones_give_the_torch_multisteplr_rate_of_every_epoch():
    res = fit(_toy_model(), _Toy(20), loss_fn=_LOSS, epochs=8, batch_size=8, drop_last=False, lr=0.01,
              optimizer="adam", weight_decay=0.0, lr_milestones=[3, 6], lr_gamma=0.1, progress=False,
              bn_recalibration_batches=0)
    per_epoch = 3  # 20 samples, batch 8, last batch of 4 kept
    assert res.steps == 8 * per_epoch and res.epochs == 8 and len(res.lrs) == res.steps
    ref_opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    sched = torch.optim.lr_scheduler.MultiStepLR(ref_opt, milestones=[3, 6], gamma=0.1)
    for epoch in range(8):
        expected = sched.get_last_lr()[0]
        got = res.lrs[epoch * per_epoch:(epoch + 1) * per_epoch]
        assert got == pytest.approx([expected] * per_epoch, rel=1e-12), epoch
        ref_opt.step()
        sched.step()
    assert res.lrs[0] == pytest.approx(0.01) and res.lrs[-1] == pytest.approx(1e-4)  # no warm-up, no cosine


@pytest.mark.parametrize("name,cls", [("adam", torch.optim.Adam), ("sgd", torch.optim.SGD),
                                      ("adamw", torch.optim.AdamW)])
def test_optimizer_choice(monkeypatch, name, cls):
    from medimg_bench.models import training

    made = []
    real = training._optimizer

    def spy(*a, **k):
        made.append(real(*a, **k))
        return made[-1]

    monkeypatch.setattr(training, "_optimizer", spy)
    fit(_toy_model(), _Toy(16), loss_fn=_LOSS, max_steps=2, batch_size=8, optimizer=name, progress=False)
    assert type(made[0]) is cls
    with pytest.raises(ValueError, match="optimizer"):
        fit(_toy_model(), _Toy(16), loss_fn=_LOSS, max_steps=1, optimizer="lbfgs", progress=False)


def _spy_validation(monkeypatch, values=None):
    """Record the weights at every epoch's validation; optionally script the metric's values."""
    from medimg_bench.models import training

    seen = []
    real = training._evaluate_metric

    def spy(model, loader, metric):
        seen.append({k: v.detach().clone() for k, v in model.module.state_dict().items()})
        return values[len(seen) - 1] if values is not None else real(model, loader, metric)

    monkeypatch.setattr(training, "_evaluate_metric", spy)
    return seen


def test_select_on_keeps_the_best_epoch_ties_to_the_earliest(monkeypatch):
    scripted = [0.5, 0.9, 0.7, 0.9, 0.3]  # epoch 1 and 3 tie: the earlier is kept; the last is worst
    seen = _spy_validation(monkeypatch, scripted)
    model = _toy_model()
    res = fit(model, _Toy(16), loss_fn=_LOSS, epochs=5, batch_size=8, lr=0.05, optimizer="sgd",
              val_dataset=_Toy(8, seed=1), select_on="auroc", progress=False)
    assert len(seen) == 5 and res.steps == 10
    assert res.val_curve == [(e, v) for e, v in enumerate(scripted)]
    assert res.best_epoch == 1 and res.best_val == 0.9 and res.best_step == 4
    for k, v in model.module.state_dict().items():
        assert torch.equal(v, seen[1][k]), k  # the validated weights, no BN recalibration after
    assert not torch.equal(seen[1]["4.weight"], seen[4]["4.weight"])


def test_select_on_recovers_from_a_diverging_learning_rate(monkeypatch):
    """Real AUROC on validation: lr x1000 from epoch 3 wrecks the model; the returned weights
    are those of the best of the first epochs."""
    seen = _spy_validation(monkeypatch)
    model = _toy_model()
    val = _Toy(40, seed=1)
    res = fit(model, _Toy(48), loss_fn=_LOSS, epochs=5, batch_size=16, lr=0.05, optimizer="sgd", momentum=0.9,
              lr_milestones=[3], lr_gamma=1000.0, val_dataset=val, select_on="auroc", progress=False)
    values = [v for _, v in res.val_curve]
    assert len(values) == 5 and res.best_epoch < 3
    assert max(values[:3]) > 0.8 and not (values[4] >= max(values[:3]))  # worse (or NaN) at the end
    assert res.best_val == max(values[:3]) and values.index(res.best_val) == res.best_epoch
    for k, v in model.module.state_dict().items():
        assert torch.equal(v, seen[res.best_epoch][k]), k
    from medimg_bench.models.training import _evaluate_metric  # the spy: one more call, same value
    loader = torch.utils.data.DataLoader(val, batch_size=16)
    assert _evaluate_metric(model.eval(), loader, "auroc") == pytest.approx(res.best_val)


def test_defaults_unchanged_without_recipe_options():
    """No recipe option: AdamW, warm-up + cosine per step, no per-epoch validation; the explicit
    defaults give the same run bit for bit."""
    from medimg_bench.models.training import _set_lr

    kw = {"loss_fn": _LOSS, "max_steps": 7, "batch_size": 8, "lr": 0.02, "progress": False}
    a, b = _toy_model(), _toy_model()
    ra = fit(a, _Toy(20), **kw)
    rb = fit(b, _Toy(20), optimizer="adamw", lr_milestones=None, select_on=None, epochs=None, drop_last=None, **kw)
    assert ra.losses == rb.losses and ra.lrs == rb.lrs
    for k, v in a.module.state_dict().items():
        assert torch.equal(v, b.module.state_dict()[k]), k
    assert ra.best_epoch is None and ra.val_curve == [] and ra.best_val is None
    assert ra.epochs == 4  # 20 samples, batch 8: the incomplete batch is dropped (2 steps an epoch)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    expected = []
    for step in range(7):
        _set_lr(opt, 0.02, step, 7, 0.0, None, warmup=1)
        expected.append(opt.param_groups[0]["lr"])
    assert ra.lrs == pytest.approx(expected)


def test_select_on_needs_a_validation_set_and_a_known_metric():
    with pytest.raises(ValueError, match="val_dataset"):
        fit(_toy_model(), _Toy(8), loss_fn=_LOSS, select_on="auroc", progress=False)
    with pytest.raises(ValueError, match="select_on"):
        fit(_toy_model(), _Toy(8), loss_fn=_LOSS, select_on="f1", val_dataset=_Toy(4), progress=False)


def test_selection_metric_matches_the_medmnist_conventions():
    from sklearn.metrics import roc_auc_score

    from medimg_bench.models.training import selection_metric

    g = torch.Generator().manual_seed(0)
    p1 = torch.rand(30, generator=g)
    y = (torch.rand(30, generator=g) < 0.5).long()
    probs = torch.stack([1 - p1, p1], 1)
    assert selection_metric(probs, y, "auroc") == pytest.approx(roc_auc_score(y, p1))  # positive class
    assert selection_metric(probs, y[:, None], "accuracy") == pytest.approx(float(((p1 > 0.5).long() == y).float().mean()))
    multi = torch.rand(30, 3, generator=g)
    yl = (torch.rand(30, 3, generator=g) < 0.5).float()
    mean_auc = sum(roc_auc_score(yl[:, k], multi[:, k]) for k in range(3)) / 3
    assert selection_metric(multi, yl, "auroc") == pytest.approx(mean_auc)
    assert selection_metric(multi, yl, "accuracy") == pytest.approx(float(((multi >= 0.5).float() == yl).float().mean()))


def test_fit_config_options_from_a_train_node():
    from medimg_bench.models.training import fit_config_options

    node = {"enabled": True, "max_steps": 200, "optimizer": "Adam", "epochs": 100, "lr_milestones": [50, 75],
            "lr_gamma": 0.1, "select_on": "auroc", "drop_last": False, "momentum": None}
    assert fit_config_options(node) == {"optimizer": "adam", "epochs": 100, "lr_milestones": [50, 75],
                                        "lr_gamma": 0.1, "select_on": "auroc", "drop_last": False}
    assert fit_config_options({"enabled": True}) == {}


def _select_worker(rank, world, port, out_dir):
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.set_num_threads(1)
        model = _toy_model(1)
        res = fit(model, _Toy(40), loss_fn=_LOSS, epochs=4, batch_size=16, lr=0.05, optimizer="sgd",
                  lr_milestones=[2], lr_gamma=1000.0, drop_last=False, val_dataset=_Toy(40, seed=1),
                  select_on="auroc", progress=False)
        torch.save({"curve": res.val_curve, "best": res.best_epoch, "state": model.module.state_dict()},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_select_on_under_two_gloo_processes_keeps_one_epoch_on_every_rank(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_select_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert len(r0["curve"]) == 4 and r0["curve"] == r1["curve"] and r0["best"] == r1["best"]
    for k, v in r0["state"].items():  # weights and batch-norm buffers: rank 0's on both
        assert torch.equal(v, r1["state"][k]), k
