"""Engine overhead: ``evaluate`` against a bare DataLoader → model → sigmoid loop over the same
dataset and loader settings, in one process, interleaved.

Run: ``python benchmarks/engine_overhead.py [--n 20000] [--classes 14] [--batch-size 16]
[--model trivial|resnet50] [--size 32] [--workers 0] [--device cpu|cuda] [--repeats 5]
[--threads N] [--data pool|synthetic_cxr]``.

Each round times the bare loop and ``evaluate``'s loop (``manifest["timings_s"]["loop"]``:
prediction, metric updates, per-sample records, checkpoints) with the CLI defaults (a checkpoint
every 20 batches, at least 30 s apart), with a checkpoint every 20 batches and no interval, and
without checkpoints, in an order that rotates from round to round (a shared machine drifts).
It prints, per configuration, the median over the rounds of the time and of the ratio to the
bare loop of the same round, with the smallest and largest ratio: wall-clock time and the
process's CPU time (``time.process_time``: what other jobs on the machine change least), and
the cost of checkpointing (with / without). The time of the per-sample table and of the
summary (``--n-resamples``, 0 by default: the bootstrap is timed by
``benchmarks/classification_metrics.py``) is printed apart. The default classification metrics
are used (AUROC, AUPRC, sensitivity, specificity, ECE); one warm-up run of each comes first.
"""

from __future__ import annotations

import argparse
import statistics
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


def bare_loop(model: ClassifierAdapter, ds: PoolDataset, dev: torch.device, bs: int, workers: int) -> tuple[float, float]:
    """(wall s, CPU s) of DataLoader → model → sigmoid → host, nothing else (same loader as the engine)."""
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, num_workers=workers, collate_fn=_split_collate,
                                         pin_memory=dev.type == "cuda")
    model.module.to(dev).eval()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        for batch, _ in loader:
            x = batch["image"].to(dev, non_blocking=True)
            torch.sigmoid(model.module(x).float()).cpu()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0


class _LoopCPU:
    """CPU time from the call of ``evaluate`` to the end of its loop: its set-up (metrics, plan,
    checkpoint, loader) and the loop, read by wrapping the runner's ``_patients``, which it calls
    right after the loop (before the per-sample table)."""

    def __init__(self) -> None:
        from medimg_bench.engine import runner

        real = runner._patients
        self.start = self.loop = 0.0

        def wrapped(*args, **kwargs):
            self.loop = time.process_time() - self.start
            return real(*args, **kwargs)

        runner._patients = wrapped


def engine_loop(model, ds, dev, bs, workers, checkpoint: bool, n_resamples: int, interval_s: float,
                cpu: _LoopCPU) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cpu.start = time.process_time()
        res = evaluate(model, ds, task="classification", metrics=METRICS, batch_size=bs, num_workers=workers,
                       device=dev, progress=False, n_resamples=n_resamples,
                       checkpoint=Path(tmp) / "checkpoint" if checkpoint else None, checkpoint_every=20,
                       checkpoint_interval_s=interval_s)
    return {**res.manifest["timings_s"], "cpu": cpu.loop}


def synthetic_cxr(n: int, size: int, root: Path):
    """The package's synthetic chest X-ray phantoms (16-bit PNG files read back by its loader)."""
    from medimg_bench.datasets import create

    return create("synthetic_cxr", cache_dir=root, split="all", n=n, size=size)


VARIANTS = {  # label: (checkpoint, interval between saves in s)
    "evaluate, CLI defaults (every 20 batches, >= 30 s apart)": (True, 30.0),
    "evaluate, checkpoint every 20 batches, no interval": (True, 0.0),
    "evaluate, no checkpoint": (False, 0.0),
}
BARE = "bare loop (DataLoader → model → sigmoid)"


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.1%} ({min(values):.1%}–{max(values):.1%})"


def measure(args: argparse.Namespace, model: ClassifierAdapter, ds, dev: torch.device) -> dict[str, list[dict]]:
    """Every configuration once per round, in an order rotating from round to round."""
    cpu = _LoopCPU()
    run = {BARE: lambda: dict(zip(("loop", "cpu"), bare_loop(model, ds, dev, args.batch_size, args.workers)))}
    for label, (ckpt, interval) in VARIANTS.items():
        run[label] = (lambda c=ckpt, i=interval: engine_loop(model, ds, dev, args.batch_size, args.workers, c,
                                                               args.n_resamples, i, cpu))
    run[BARE]()
    run["evaluate, no checkpoint"]()  # warm-up
    labels = list(run)
    out: dict[str, list[dict]] = {k: [] for k in labels}
    for r in range(args.repeats):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            out[label].append(run[label]())
    return out


def report(args: argparse.Namespace, out: dict[str, list[dict]]) -> None:
    bare = out[BARE]
    print(f"{'loop':56s} {'wall s':>7s} {'samples/s':>9s}  {'vs bare, wall: median (range)':>29s}  "
          f"{'CPU s':>6s}  {'vs bare, CPU':>21s}  {'table s':>7s} {'summary s':>9s}")
    for label, runs in out.items():
        wall = statistics.median(r["loop"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        ratio_w = [b["loop"] / r["loop"] for b, r in zip(bare, runs)]
        ratio_c = [b["cpu"] / r["cpu"] for b, r in zip(bare, runs)]
        extra = "" if label == BARE else (f"  {statistics.median(r['table'] for r in runs):7.2f} "
                                          f"{statistics.median(r['summary'] for r in runs):9.2f}")
        print(f"{label:56s} {wall:7.2f} {args.n / wall:9.0f}  {_spread(ratio_w):>29s}  {cpu:6.2f}  "
              f"{_spread(ratio_c):>21s}{extra}")
    none = out["evaluate, no checkpoint"]
    for label in list(VARIANTS)[:2]:
        w = [r["loop"] / n["loop"] for r, n in zip(out[label], none)]
        c = [r["cpu"] / n["cpu"] for r, n in zip(out[label], none)]
        print(f"checkpoint cost, {label.split(', ', 1)[1]}: x{statistics.median(w):.2f} wall "
              f"(x{min(w):.2f}–x{max(w):.2f}), x{statistics.median(c):.2f} CPU (x{min(c):.2f}–x{max(c):.2f})")


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
    ap.add_argument("--repeats", type=int, default=5, help="rounds (each runs every configuration once)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
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
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.data == "pool":
        ds = PoolDataset(args.n, args.classes, args.size, args.channels)
    else:
        tmp_root = Path(tempfile.mkdtemp(prefix="mb_engine_bench_"))
        ds = synthetic_cxr(args.n, args.size, tmp_root)
        args.classes, args.channels = len(ds.classes), 1
    model = build_model(args.model, args.classes, args.channels)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"engine overhead: n={args.n}, {args.classes} labels, model={args.model}, {args.size}² images, "
          f"batch {args.batch_size}, workers {args.workers}, device {name}, {args.repeats} rounds")
    report(args, measure(args, model, ds, dev))


if __name__ == "__main__":
    main()
