"""Engine overhead: ``evaluate`` with the CLI's defaults (checkpoint every 20 batches) against a
bare DataLoader → model → sigmoid loop over the same dataset and loader settings.

Run: ``python benchmarks/engine_overhead.py [--n 20000] [--classes 14] [--batch-size 16]
[--model trivial|resnet50] [--size 32] [--workers 0] [--device cpu|cuda] [--repeats 2]
[--data pool|synthetic_cxr]``.

Prints samples/s of the bare loop, of the engine's loop (``manifest["timings_s"]["loop"]``:
prediction, metric updates, per-sample records, checkpoints) and their ratio, with and without
checkpointing, plus the time of the per-sample table and of the summary (``--n-resamples``,
0 by default: the bootstrap is timed by ``benchmarks/classification_metrics.py``). The default
classification metrics are used (AUROC, AUPRC, sensitivity, specificity, ECE). Each loop is run
``--repeats`` times and the fastest is kept; the first run warms up.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, when not installed

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from medimg_bench.datasets.base import ManifestDataset  # noqa: E402
from medimg_bench.engine.runner import _split_collate, evaluate, resolve_device  # noqa: E402
from medimg_bench.models.classification import ClassifierAdapter  # noqa: E402

METRICS = {"auroc": {}, "auprc": {}, "sensitivity": {}, "specificity": {}, "ece": {}}


class PoolDataset(ManifestDataset):
    """``n`` samples drawn from a pool of 256 random images (no disk I/O), 2 images per patient."""

    def __init__(self, n: int, classes: int, size: int, channels: int) -> None:
        manifest = pd.DataFrame({"id": [f"s{i:07d}" for i in range(n)],
                                 "patient_id": [f"p{i // 2:07d}" for i in range(n)]})
        super().__init__(manifest, classes=[f"c{j}" for j in range(classes)], name="pool")
        g = torch.Generator().manual_seed(0)
        self.images = torch.rand(256, channels, size, size, generator=g)
        self.labels = (torch.rand(n, classes, generator=g) > 0.7).float()
        self._id_list = manifest["id"].tolist()

    def __getitem__(self, i: int) -> dict:
        return {"id": self._id_list[i], "image": self.images[i % 256], "label": self.labels[i], "meta": {}}

    def load(self, row):  # pragma: no cover - __getitem__ is overridden
        raise NotImplementedError


def build_model(kind: str, classes: int, channels: int) -> ClassifierAdapter:
    if kind == "trivial":
        net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                  torch.nn.Linear(channels, classes))
        return ClassifierAdapter(net, name="trivial")
    import timm

    return ClassifierAdapter(timm.create_model(kind, pretrained=False, num_classes=classes,
                                               in_chans=channels), name=f"timm/{kind}")


def bare_loop(model: ClassifierAdapter, ds: PoolDataset, dev: torch.device, bs: int, workers: int) -> float:
    """Seconds for DataLoader → model → sigmoid → host, nothing else (same loader as the engine)."""
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, num_workers=workers, collate_fn=_split_collate,
                                         pin_memory=dev.type == "cuda")
    model.module.to(dev).eval()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        for batch, _ in loader:
            x = batch["image"].to(dev, non_blocking=True)
            torch.sigmoid(model.module(x).float()).cpu()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def engine_loop(model, ds, dev, bs, workers, checkpoint: bool, n_resamples: int, interval_s: float = 30.0) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        res = evaluate(model, ds, task="classification", metrics=METRICS, batch_size=bs, num_workers=workers,
                       device=dev, progress=False, n_resamples=n_resamples,
                       checkpoint=Path(tmp) / "checkpoint" if checkpoint else None, checkpoint_every=20,
                       checkpoint_interval_s=interval_s)
    return res.manifest["timings_s"]


def synthetic_cxr(n: int, size: int, root: Path):
    """The package's synthetic chest X-ray phantoms (16-bit PNG files read back by its loader)."""
    from medimg_bench.datasets import create

    return create("synthetic_cxr", cache_dir=root, split="all", n=n, size=size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--classes", type=int, default=14)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--model", default="trivial", help="trivial, or a timm name such as resnet50")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--n-resamples", type=int, default=0)
    ap.add_argument("--no-defer", action="store_true",
                    help="score every batch as it comes (the engine's path before deferred scoring)")
    ap.add_argument("--data", default="pool", choices=["pool", "synthetic_cxr"],
                    help="pool: 256 in-memory images (no I/O, the harshest case for the engine); "
                    "synthetic_cxr: PNG phantoms read from disk (3 findings; --classes is ignored)")
    args = ap.parse_args()
    if args.no_defer:
        from medimg_bench.engine import loop

        loop.rowwise_task = lambda task: False  # BatchSteps then scores per batch
    dev = resolve_device(args.device)
    if args.data == "pool":
        ds = PoolDataset(args.n, args.classes, args.size, args.channels)
    else:
        tmp_root = Path(tempfile.mkdtemp(prefix="mb_engine_bench_"))
        ds = synthetic_cxr(args.n, args.size, tmp_root)
        args.classes, args.channels = len(ds.classes), 1
    model = build_model(args.model, args.classes, args.channels)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"engine overhead: n={args.n}, {args.classes} labels, model={args.model}, {args.size}² images, "
          f"batch {args.batch_size}, workers {args.workers}, device {name}")
    bare_loop(model, ds, dev, args.batch_size, args.workers)  # warm-up
    bare = min(bare_loop(model, ds, dev, args.batch_size, args.workers) for _ in range(args.repeats))
    rows = [("bare loop (DataLoader → model → sigmoid)", bare, None, None)]
    variants = [("evaluate, CLI defaults (every 20 batches, >= 30 s apart)", True, 30.0),
                ("evaluate, checkpoint every 20 batches, no interval", True, 0.0),
                ("evaluate, no checkpoint", False, 0.0)]
    for label, ckpt, interval in variants:
        runs = [engine_loop(model, ds, dev, args.batch_size, args.workers, ckpt, args.n_resamples, interval)
                for _ in range(args.repeats)]
        best = min(runs, key=lambda r: r["loop"])
        rows.append((label, best["loop"], best["table"], best["summary"]))
    print(f"{'loop':56s} {'s':>8s} {'samples/s':>10s} {'vs bare':>8s} {'table s':>8s} {'summary s':>9s}")
    for label, sec, table, summ in rows:
        ratio = bare / sec
        print(f"{label:56s} {sec:8.2f} {args.n / sec:10.0f} {ratio:8.1%} "
              f"{'' if table is None else f'{table:8.2f}'} {'' if summ is None else f'{summ:9.2f}'}")


if __name__ == "__main__":
    main()
