"""The MedMNIST card's training (``models.training.fit`` through the ``medmnist`` loader) against
a bare PyTorch loop running the same recipe, side by side on this machine.

Both train the same network (the card's timm ResNet with the small-input stem, same initial
weights) on the same official ``.npz`` split with Adam lr 1e-3, ``MultiStepLR`` at half and
three quarters of the epochs, batches of 128 with the last one kept, cross-entropy, and a
validation AUC after every epoch. The bare loop holds the split as one float tensor and uses
``DataLoader(TensorDataset, shuffle=True)``, sklearn's ``roc_auc_score`` for validation, and
nothing else. Runs alternate (fit, bare, fit, bare, ...) so that load from other processes
falls on both; the ratio of the medians is printed (goal: fit within 10 % of bare).

    python benchmarks/medmnist_fit_vs_bare.py --root ../shared/data/medmnist --flag breastmnist \
        --epochs 3 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _model(in_ch: int, n_cls: int, seed: int, arch: str) -> Any:
    from medimg_bench.registry import create_model

    torch.manual_seed(seed)
    return create_model("timm", model_name=arch, num_classes=n_cls, in_channels=in_ch, stem="small_input",
                        multilabel=False)


def run_fit(root: str, flag: str, epochs: int, arch: str, seed: int) -> dict[str, float]:
    """The card's path: the medmnist loader (memory-mapped npz) and ``fit`` with the recipe."""
    from medimg_bench.datasets import create
    from medimg_bench.models.training import MEDMNIST_V2, train
    from medimg_bench.registry import create_task

    tr = create("medmnist", root, split="train", flag=flag)
    va = create("medmnist", root, split="val", flag=flag)
    x0 = tr[0]["image"]
    model = _model(x0.shape[0], len(tr.classes), seed, arch)
    recipe = MEDMNIST_V2.replace(epochs=epochs, lr_milestones=(epochs // 2, 3 * epochs // 4), seed=seed)
    task = create_task("classification", multilabel=False)
    t0 = time.perf_counter()
    res = train(model, tr, recipe, loss_fn=task.loss, val_dataset=va, progress=False)
    return {"seconds": time.perf_counter() - t0, "best_val": float(res.best_val), "steps": res.steps}


def _split(root: str, flag: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    with np.load(Path(root) / f"{flag}.npz", allow_pickle=False) as z:
        x, y = z[f"{split}_images"], z[f"{split}_labels"].reshape(-1)
    x = torch.from_numpy(x.astype(np.float32) / 255.0)
    x = x[:, None] if x.ndim == 3 else x.permute(0, 3, 1, 2)
    return x.contiguous(), torch.from_numpy(y.astype(np.int64))


def run_bare(root: str, flag: str, epochs: int, arch: str, seed: int) -> dict[str, float]:
    """The same recipe in plain PyTorch (tensors in memory, no wrappers)."""
    from sklearn.metrics import roc_auc_score

    xtr, ytr = _split(root, flag, "train")
    xva, yva = _split(root, flag, "val")
    net = _model(xtr.shape[1], int(ytr.max()) + 1, seed, arch).module
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[epochs // 2, 3 * epochs // 4], gamma=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr), batch_size=128, shuffle=True,
                                         generator=torch.Generator().manual_seed(seed))
    crit = torch.nn.CrossEntropyLoss()
    best, steps = -1.0, 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        net.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = crit(net(xb), yb)
            loss.backward()
            opt.step()
            steps += 1
        sched.step()
        net.eval()
        with torch.no_grad():
            p = torch.cat([torch.softmax(net(xva[i:i + 128]), 1) for i in range(0, len(xva), 128)]).numpy()
        y = yva.numpy()
        auc = roc_auc_score(y, p[:, 1]) if p.shape[1] == 2 else float(np.mean(
            [roc_auc_score(y == k, p[:, k]) for k in range(p.shape[1]) if 0 < (y == k).sum() < len(y)]))
        best = max(best, auc)
    return {"seconds": time.perf_counter() - t0, "best_val": float(best), "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="../shared/data/medmnist")
    ap.add_argument("--flag", default="breastmnist")
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--out", default=None, help="write the timings as JSON here")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    run_fit(a.root, a.flag, 1, a.arch, 0)  # warm-up: imports, first-touch of the files, allocator
    rows: list[dict[str, Any]] = []
    for r in range(a.repeats):
        for name, fn in (("fit", run_fit), ("bare", run_bare)):
            out = fn(a.root, a.flag, a.epochs, a.arch, r)
            rows.append({"impl": name, "repeat": r, **out, "load": os.getloadavg()[0]})
            print(json.dumps(rows[-1]), flush=True)
    med = {k: statistics.median(x["seconds"] for x in rows if x["impl"] == k) for k in ("fit", "bare")}
    ratio = med["fit"] / med["bare"]
    pairs = [f["seconds"] / b["seconds"] for f, b in zip(rows[0::2], rows[1::2])]
    print(f"{a.flag} {a.arch} {a.epochs} epochs x {a.repeats}, torch threads {torch.get_num_threads()}: "
          f"fit {med['fit']:.1f} s, bare {med['bare']:.1f} s (medians); fit / bare = {ratio:.3f} "
          f"(per pair: {', '.join(f'{p:.3f}' for p in pairs)})")
    if a.out:
        Path(a.out).write_text(json.dumps({"rows": rows, "median_s": med, "ratio": ratio, "pairs": pairs}, indent=1))


if __name__ == "__main__":
    main()
