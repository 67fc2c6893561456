"""MIL training speed per slide: ours (masked batches padded to the longest bag) vs eva's ABMIL
module fed as eva feeds it (every bag padded to N_PATCHES with -inf rows), same AdamW loop.

    python benchmarks/mil_training.py [--slides 270] [--tiles 200 2000] [--dim 384] [--epochs 2]
        [--pad 10000] [--eva-src /tmp/eva/src] [--device cpu|cuda]

Bags of ``--tiles`` (min, max) tiles of ``--dim`` features; batch 32 slides, AdamW lr 1e-3.
``--eva-src``: eva's ``src`` folder (``git archive 73b61a79 src/eva/vision/models/networks/abmil.py
src/eva/core/models/networks/mlp.py`` of kaiko-ai/eva), loaded by path as
``tools/eva_abmil_reference.py`` does; without it only ours is timed. Prints seconds per
slide-epoch of both and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _eva_abmil(src: str):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import eva_abmil_reference as ref

    root = Path(src) / "eva"
    mlp = ref._load("eva_mlp", root / "core" / "models" / "networks" / "mlp.py")
    import types

    for pkg in ("eva", "eva.core", "eva.core.models"):
        sys.modules.setdefault(pkg, types.ModuleType(pkg))
    nets = types.ModuleType("eva.core.models.networks")
    nets.MLP = mlp.MLP
    sys.modules["eva.core.models.networks"] = nets
    return ref._load("eva_abmil", root / "vision" / "models" / "networks" / "abmil.py").ABMIL


def _epoch_eva(net, opt, xs, y, pad: int, dev) -> None:
    for b in torch.randperm(len(xs)).split(32):
        x = torch.full((len(b), pad, xs[0].shape[1]), float("-inf"), device=dev)
        for i, j in enumerate(b.tolist()):
            x[i, : len(xs[j])] = xs[j].to(dev)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x)[:, 0], y[b].float().to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slides", type=int, default=270)
    ap.add_argument("--tiles", type=int, nargs=2, default=(200, 2000))
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--pad", type=int, default=10000)
    ap.add_argument("--eva-src", default=None)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    from medimg_bench.protocols.mil import Bags, MILSettings, train_mil

    g = torch.Generator().manual_seed(0)
    n = torch.randint(a.tiles[0], a.tiles[1] + 1, (a.slides,), generator=g).tolist()
    xs = [torch.randn(k, a.dim, generator=g) for k in n]
    y = torch.arange(a.slides) % 2
    bags = Bags([str(i) for i in range(a.slides)], xs, y, [str(i) for i in range(a.slides)])
    val = Bags(bags.slide_ids[:8], xs[:8], y[:8], bags.patients[:8])
    t = time.perf_counter()
    train_mil(bags, val, num_classes=2, settings=MILSettings(epochs=a.epochs, patience=None), device=a.device)
    ours = (time.perf_counter() - t) / (a.epochs * a.slides)
    print(f"slides {a.slides}, tiles {a.tiles[0]}-{a.tiles[1]} (mean {sum(n) / len(n):.0f}), dim {a.dim}, "
          f"{a.epochs} epochs, device {a.device}, torch threads {torch.get_num_threads()}")
    print(f"ours  (masked, padded to the batch's longest bag): {ours * 1e3:8.2f} ms per slide-epoch")
    if a.eva_src:
        dev = torch.device(a.device)
        net = _eva_abmil(a.eva_src)(input_size=a.dim, output_size=1, projected_input_size=128).to(dev)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.999))
        t = time.perf_counter()
        for _ in range(a.epochs):
            net.train()
            _epoch_eva(net, opt, xs, y, max(a.pad, max(n)), dev)
        peer = (time.perf_counter() - t) / (a.epochs * a.slides)
        print(f"eva   (ABMIL, bags padded to {a.pad} with -inf):     {peer * 1e3:8.2f} ms per slide-epoch")
        print(f"ratio eva / ours: {peer / ours:.2f}")


if __name__ == "__main__":
    main()
