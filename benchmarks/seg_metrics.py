"""Time {Dice, HD95, ASSD, NSD@2mm} per case: medimg_bench vs MONAI, medpy and DeepMind.

Run: ``python benchmarks/seg_metrics.py [--cases N] [--size 256 256 128] [--backend torch]
[--device cuda]``. Prints a table of seconds per case and the speed-up, and checks that the
numbers agree (``convention="monai"`` against MONAI, ``"medpy"`` against medpy, ``"deepmind"``
against surface-distance). ``--backend`` picks our surface-distance backend (``kdtree``,
``torch``, ``auto``); with a backend other than ``kdtree`` our KD-tree backend is timed as one
more peer (``kdtree``, default convention). ``--device cuda`` moves our inputs to the GPU
first (the transfer is not timed).
Inputs: (a) the real 41-organ TotalSegmentator mask vs a shifted copy (``../shared/data``),
(b) a batch of synthetic two-class volumes (an ellipsoid vs a perturbed one).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from medimg_bench.metrics.segmentation import segmentation_scores

METRICS = ["dice", "hd95", "assd", "nsd"]
TOL = 2.0


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def ours(pred, target, k, spacing, convention, backend="kdtree"):
    r = segmentation_scores(pred, target, num_classes=k, spacing=spacing, tolerance=TOL,
                            convention=convention, metrics=METRICS, spatial_dims=pred.ndim,
                            backend=backend)
    return {m: v[0].cpu().numpy() for m, v in r.items()}


def monai(pred, target, k, spacing):
    from monai.metrics import (
        compute_average_surface_distance,
        compute_dice,
        compute_hausdorff_distance,
        compute_surface_dice,
    )
    oh = lambda x: torch.nn.functional.one_hot(torch.as_tensor(x), k).movedim(-1, 0)[None].float()  # noqa: E731
    p, t = oh(pred), oh(target)
    kw = dict(include_background=False, spacing=spacing)
    return {
        "dice": compute_dice(p, t, include_background=False)[0].numpy(),
        "hd95": compute_hausdorff_distance(p, t, percentile=95, **kw)[0].numpy(),
        "assd": compute_average_surface_distance(p, t, symmetric=True, **kw)[0].numpy(),
        "nsd": compute_surface_dice(p, t, [TOL] * (k - 1), **kw)[0].numpy(),
    }


def medpy(pred, target, k, spacing):
    from medpy.metric import binary as mb
    out = {m: np.full(k - 1, np.nan) for m in ("dice", "hd95", "assd")}
    for c in range(1, k):
        p, t = pred == c, target == c
        out["dice"][c - 1] = mb.dc(p, t)
        if p.any() and t.any():
            out["hd95"][c - 1] = mb.hd95(p, t, spacing)
            out["assd"][c - 1] = mb.assd(p, t, spacing)
    return out


def deepmind(pred, target, k, spacing):
    import surface_distance as sd
    out = {m: np.full(k - 1, np.nan) for m in ("dice", "hd95", "nsd")}
    for c in range(1, k):
        p, t = pred == c, target == c
        if not (p.any() and t.any()):
            continue
        r = sd.compute_surface_distances(t, p, spacing)
        out["dice"][c - 1] = sd.compute_dice_coefficient(t, p)
        out["hd95"][c - 1] = sd.compute_robust_hausdorff(r, 95)
        out["nsd"][c - 1] = sd.compute_surface_dice_at_tolerance(r, TOL)
    return out


def _agree(a: dict, b: dict, label: str, rtol: float) -> None:
    for m in b:
        x, y = np.asarray(a[m], np.float64), np.asarray(b[m], np.float64)
        ok = np.isfinite(x) & np.isfinite(y)
        if not np.allclose(x[ok], y[ok], rtol=rtol, atol=1e-6):
            raise AssertionError(f"{label}: {m} differs: max |d| {np.abs(x[ok] - y[ok]).max()}")


def cases(args):
    seg_path = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "totalseg_ct" / "seg.nii.gz"
    if seg_path.exists():
        import nibabel as nib
        img = nib.load(str(seg_path))
        raw = np.asarray(img.dataobj).astype(np.int64)
        labels = np.unique(raw)
        lut = np.zeros(raw.max() + 1, np.int64)
        lut[labels] = np.arange(len(labels))
        seg = lut[raw]
        sp = tuple(float(v) for v in img.header.get_zooms()[:3])
        yield "TotalSegmentator 41 organs vs shifted", [(np.roll(seg, (2, -1, 1), (0, 1, 2)), seg)], len(labels), sp
    else:
        print(f"(skipping the real volume: {seg_path} not found)")
    rng = np.random.default_rng(0)
    shape = tuple(args.size)
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    batch = []
    for _ in range(args.cases):
        c = [s / 2 + rng.uniform(-5, 5) for s in shape]
        r = [s / 4 for s in shape]
        t = sum(((g - ci) / ri) ** 2 for g, ci, ri in zip(grid, c, r)) <= 1
        r2 = [ri * rng.uniform(0.9, 1.1) for ri in r]
        p = sum(((g - ci - 2) / ri) ** 2 for g, ci, ri in zip(grid, c, r2)) <= 1
        batch.append((p.astype(np.int64), t.astype(np.int64)))
    yield f"synthetic {shape} two-class x{args.cases}", batch, 2, (0.8, 0.8, 2.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=8)
    ap.add_argument("--size", type=int, nargs=3, default=[256, 256, 128])
    ap.add_argument("--skip", nargs="*", default=[],
                    help="peers to skip: monai medpy deepmind kdtree")
    ap.add_argument("--backend", choices=["auto", "kdtree", "torch"], default="auto",
                    help="our surface-distance backend (default auto: kdtree on CPU)")
    ap.add_argument("--device", default="cpu", help="device of our inputs, e.g. cuda")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    np.Inf, np.NaN = np.inf, np.nan  # surface-distance 0.1 under NumPy 2
    peers = {"monai": (monai, "monai", 1e-5), "medpy": (medpy, "medpy", 1e-9),
             "deepmind": (deepmind, "deepmind", 1e-9)}
    if args.backend != "kdtree":
        peers["kdtree"] = (lambda p, t, k, sp: ours(p, t, k, sp, "default"), "default", 1e-9)
    dev = torch.device(args.device)
    print(f"{'input':44s} {'peer':9s} {'peer s/case':>11s} {'ours s/case':>11s} {'speed-up':>8s}")
    for label, batch, k, sp in cases(args):
        for name, (fn, conv, rtol) in peers.items():
            if name in args.skip:
                continue
            t_peer = t_ours = 0.0
            for p, t in batch:
                ref, dt = _timed(lambda: fn(p, t, k, sp))  # noqa: B023
                t_peer += dt
                pd, td = torch.as_tensor(p).to(dev), torch.as_tensor(t).to(dev)
                mine, dt = _timed(lambda: ours(pd, td, k, sp, conv, args.backend))  # noqa: B023
                t_ours += dt
                _agree(mine, ref, f"{label} / {name}", rtol)
            n = len(batch)
            print(f"{label:44s} {name:9s} {t_peer / n:11.3f} {t_ours / n:11.3f} {t_peer / t_ours:7.1f}x")
    print(f"backend {args.backend} on {dev}; numbers agree (MONAI rtol 1e-5, medpy, DeepMind "
          "and our KD-tree backend rtol 1e-9)")


if __name__ == "__main__":
    main()
