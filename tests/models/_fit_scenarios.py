"""Training scenarios whose every number (loss curve, learning rates, validation curve, kept
epoch, final weights) is recorded by ``tools/fit_golden.py`` and must not change when the
training code is restructured (``tests/models/test_training_golden.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import torch

from medimg_bench.registry import create_task


class Toy(torch.utils.data.Dataset):
    """Two classes told apart by the mean intensity; ``n`` samples of ``c``x``side``x``side``."""

    def __init__(self, n: int, seed: int = 0, *, c: int = 1, side: int = 8) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, c, side, side, generator=g)
        self.y = (self.x.mean((1, 2, 3)) > 0).long()
        self.x[self.y == 1] += 0.5

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"id": f"s{i}", "image": self.x[i], "label": int(self.y[i])}


def toy_model(seed: int = 0) -> Any:
    from medimg_bench.models.classification import ClassifierAdapter

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 36, 2))
    return ClassifierAdapter(net, multilabel=False)


def resnet18_small(seed: int = 0) -> Any:
    from medimg_bench.registry import create_model

    torch.manual_seed(seed)
    return create_model("timm", model_name="resnet18", num_classes=2, in_channels=3, stem="small_input",
                        multilabel=False)


LOSS = create_task("classification", multilabel=False).loss


def _val_fn(model: Any) -> float:
    data = Toy(16, seed=7)
    with torch.no_grad():
        probs = model.predict({"image": data.x})["probs"]
    return float((probs.argmax(1) == data.y).float().mean())


SCENARIOS: dict[str, Callable[[], tuple[Any, Any, dict[str, Any]]]] = {
    "cosine_default": lambda: (toy_model(), Toy(40), dict(max_steps=12, batch_size=8)),
    "medmnist_recipe": lambda: (toy_model(1), Toy(30), dict(
        epochs=4, batch_size=8, drop_last=False, lr=0.01, optimizer="adam", weight_decay=0.0,
        lr_milestones=[2, 3], lr_gamma=0.1, select_on="auroc", val_dataset=Toy(12, seed=3))),
    "val_fn_patience_head_scale_clip": lambda: (toy_model(2), Toy(40), dict(
        max_steps=30, batch_size=8, val_fn=_val_fn, val_every=5, patience=2, encoder_lr_scale=0.1,
        grad_clip=1.0, warmup_steps=3, lr=0.05)),
    "sgd_cache": lambda: (toy_model(3), Toy(36), dict(
        max_steps=10, batch_size=8, optimizer="sgd", momentum=0.8, cache=True,
        seed=5, weight_decay=1e-3)),
    "amp_bf16": lambda: (toy_model(4), Toy(24), dict(max_steps=6, batch_size=8, amp=True)),
    "select_accuracy_patience": lambda: (toy_model(5), Toy(30), dict(
        epochs=6, batch_size=8, drop_last=True, lr=0.05, optimizer="adamw", select_on="accuracy",
        val_dataset=Toy(12, seed=4), patience=2, val_batch_size=5)),
    "resnet18_small_input": lambda: (resnet18_small(), Toy(20, c=3, side=28), dict(
        epochs=1, batch_size=8, drop_last=False, optimizer="adam", weight_decay=0.0, lr=1e-3,
        lr_milestones=[50, 75], select_on="auroc", val_dataset=Toy(8, seed=9, c=3, side=28))),
}


def state_digest(module: torch.nn.Module) -> str:
    """SHA-256 over the state dict's names, dtypes, shapes and raw bytes."""
    h = hashlib.sha256()
    for k, v in module.state_dict().items():
        t = v.detach().cpu().contiguous().reshape(-1)
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def run_scenario(name: str) -> dict[str, Any]:
    """Train scenario ``name`` with ``fit``; every recorded number of the result."""
    from medimg_bench.models.training import fit

    model, data, kw = SCENARIOS[name]()
    res = fit(model, data, loss_fn=LOSS, progress=False, **kw)
    return {"steps": res.steps, "epochs": res.epochs, "losses": res.losses, "lrs": res.lrs,
            "best_step": res.best_step, "best_val": res.best_val, "best_epoch": res.best_epoch,
            "val_curve": [list(v) for v in res.val_curve], "state_sha256": state_digest(model.module)}


def environment() -> dict[str, Any]:
    """What bit-identity depends on: torch version, CPU model, instruction set, threads."""
    import platform

    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    # the model name alone does not say which kernels run: two "AMD EPYC" machines, one with
    # AVX-512, gave losses 1e-7 apart; the fixture records the instruction set it was made with
    return {"torch": torch.__version__, "cpu": cpu, "threads": torch.get_num_threads(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
