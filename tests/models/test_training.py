import torch

from medimg_bench.datasets import create
from medimg_bench.engine.runner import evaluate
from medimg_bench.models.training import fit
from medimg_bench.registry import create_model, create_task


def test_short_training_learns_synthetic_cxr(synthetic_root):
    """The demo's claim in small: a few dozen steps beat chance on held-out patients."""
    torch.manual_seed(0)
    train = create("synthetic_cxr", synthetic_root / "learn", split="train", n=160, size=48)
    test = create("synthetic_cxr", synthetic_root / "learn", split="test", n=160, size=48)
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
