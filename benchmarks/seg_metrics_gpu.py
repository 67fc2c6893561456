"""Segmentation metrics at GPU speed: Dice + HD95 + ASSD + NSD of a many-organ CT label map.

    PYTHONPATH=. python benchmarks/seg_metrics_gpu.py [--device cuda] [--seg SEG] [--upsample 4]
        [--repeat 5] [--big] [--methods auto brute] [--profile]

Cases: the 41-organ TotalSegmentator label map (``--seg``: a ``.npz`` with arrays ``seg`` and
``spacing``, or a NIfTI read with nibabel; default ``../shared/data/totalseg_ct/seg.nii.gz``)
against a copy shifted by (2, −1, 1) voxels at its own resolution (122×101×30, 3 mm) and
upsampled ``--upsample`` times by nearest neighbour (488×404×120, 0.75 mm, the "full resolution"
case). For each: our torch backend on ``--device`` with each ``--methods`` (``batched``: every
class of a case in one distance transform, the default on GPUs; ``auto``: the earlier per-class
path, distance transform or brute force per class; ``brute``: pairwise search), and our
KD-tree backend on the CPU, every result checked equal to the KD-tree's (max |diff|). Times are
wall-clock seconds per case, best of ``--repeat`` after one warm-up, with the device
synchronised. MONAI (``compute_hausdorff_distance`` etc. on the same device) is timed when it is
installed, else skipped with a note. ``--big`` adds a 512×512×600 volume with 120 classes
(nearest-of-random-centres partition vs a shifted copy), reporting time and peak GPU memory:
the memory bound. Only torch, numpy and scipy are needed (``--seg *.npz`` avoids nibabel).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import torch

METRICS = ("dice", "hd95", "assd", "nsd")
TOL = 2.0


def _load(path: Path) -> tuple[np.ndarray, tuple[float, ...]]:
    if path.suffix == ".npz":
        z = np.load(path)
        seg, sp = z["seg"], tuple(float(v) for v in z["spacing"])
    else:
        import nibabel as nib

        img = nib.load(str(path))
        seg, sp = np.asarray(img.dataobj), tuple(float(v) for v in img.header.get_zooms()[:3])
    labels = np.unique(seg)
    lut = np.zeros(int(seg.max()) + 1, np.int64)
    lut[labels] = np.arange(len(labels))
    return lut[seg.astype(np.int64)], sp


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _best(fn, repeat: int, device: str):
    out = fn()  # warm-up (kernels, allocator)
    best = float("inf")
    for _ in range(repeat):
        _sync(device)
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best, out


def _ours(pred, target, k, sp, backend):
    from medimg_bench.metrics.segmentation import segmentation_scores

    r = segmentation_scores(pred, target, num_classes=k, spacing=sp, tolerance=TOL, metrics=METRICS,
                            spatial_dims=3, backend=backend)
    return {m: v[0].cpu().numpy() for m, v in r.items()}


def _monai(pred, target, k, sp):
    from monai.metrics import (
        compute_average_surface_distance,
        compute_hausdorff_distance,
        compute_surface_dice,
    )

    oh = lambda x: torch.nn.functional.one_hot(x, k).movedim(-1, 0)[None].float()  # noqa: E731
    p, t = oh(pred), oh(target)
    kw = dict(include_background=False, spacing=sp)
    return {"hd95": compute_hausdorff_distance(p, t, percentile=95, **kw)[0].cpu().numpy(),
            "assd": compute_average_surface_distance(p, t, symmetric=True, **kw)[0].cpu().numpy(),
            "nsd": compute_surface_dice(p, t, [TOL] * (k - 1), **kw)[0].cpu().numpy()}


def _diff(a: dict, b: dict) -> float:
    worst = 0.0
    for m in a:
        if m in b:
            x, y = np.asarray(a[m], np.float64), np.asarray(b[m], np.float64)
            same_nan = np.isnan(x) == np.isnan(y)
            if not same_nan.all():
                return float("inf")
            ok = ~np.isnan(x)
            if ok.any():
                worst = max(worst, float(np.abs(x[ok] - y[ok]).max()))
    return worst


def _case(name, seg, sp, shift, args) -> None:
    from medimg_bench.metrics import _surface_batched, _surface_torch

    k = int(seg.max()) + 1
    target = seg
    pred = np.roll(seg, shift, (0, 1, 2))
    print(f"\n{name}: shape {seg.shape}, {k - 1} classes, spacing {sp} mm")
    t_cpu, ref = _best(lambda: _ours(pred[None], target[None], k, sp, "kdtree"), max(1, args.repeat // 2), "cpu")
    print(f"  {'kdtree (CPU, ours)':<28} {t_cpu:8.3f} s")
    pd_, td_ = torch.from_numpy(pred)[None].to(args.device), torch.from_numpy(target)[None].to(args.device)
    for method in args.methods:
        _surface_batched.ENABLED = method == "batched"
        _surface_torch.DEFAULT_METHOD = "auto" if method == "batched" else method
        t, out = _best(lambda: _ours(pd_, td_, k, sp, "torch"), args.repeat, args.device)
        print(f"  {'torch ' + method + ' (' + args.device + ')':<28} {t:8.3f} s   {t_cpu / t:6.1f}x kdtree"
              f"   max |diff| vs kdtree {_diff(out, ref):.1e}")
        if method == "batched" and args.steps:
            _surface_batched.TIMINGS = {}
            t0 = time.perf_counter()
            _ours(pd_, td_, k, sp, "torch")
            total = time.perf_counter() - t0
            steps = ", ".join(f"{k_} {v * 1e3:.1f}" for k_, v in _surface_batched.TIMINGS.items())
            print(f"    steps (synchronised, ms): {steps}; total {total * 1e3:.1f}")
            _surface_batched.TIMINGS = None
    _surface_torch.DEFAULT_METHOD = "auto"
    _surface_batched.ENABLED = True
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
        with profile(activities=acts) as prof:
            _ours(pd_, td_, k, sp, "torch")
            _sync(args.device)
        key = "cuda_time_total" if args.device.startswith("cuda") else "cpu_time_total"
        print(prof.key_averages().table(sort_by=key, row_limit=12))
    if args.no_monai:
        return
    try:
        import monai  # noqa: F401
    except ImportError:
        print("  monai                        (not installed: skipped)")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, out = _best(lambda: _monai(pd_.long()[0], td_.long()[0], k, sp), 1, args.device)
    print(f"  {'monai (' + args.device + ')':<28} {t:8.3f} s")


def _many(args, seg, sp) -> None:
    """``--cases N`` copies of the native case (each with its own shift) in one call, against one
    call per case: the batch's classes of all cases share the distance transforms."""
    n = args.cases
    k = int(seg.max()) + 1
    shifts = [(1 + i % 3, -1 - i % 2, 1) for i in range(n)]
    pred = np.stack([np.roll(seg, s_, (0, 1, 2)) for s_ in shifts])
    target = np.stack([seg] * n)
    pd_, td_ = torch.from_numpy(pred).to(args.device), torch.from_numpy(target).to(args.device)
    t_one, out = _best(lambda: _ours(pd_, td_, k, sp, "torch"), args.repeat, args.device)
    t_each, _ = _best(lambda: [_ours(pd_[i : i + 1], td_[i : i + 1], k, sp, "torch") for i in range(n)],
                      args.repeat, args.device)
    print(f"\n{n} native cases: one call {t_one:.3f} s, one call per case {t_each:.3f} s "
          f"({t_each / t_one:.1f}x)")


def _big(args) -> None:
    from medimg_bench.metrics.segmentation import segmentation_scores

    shape, k = (512, 512, 600), 121
    dev = args.device
    g = torch.Generator(device="cpu").manual_seed(0)
    centres = torch.rand(k - 1, 3, generator=g) * torch.tensor(shape, dtype=torch.float32)
    centres = centres.to(dev)
    lab = torch.empty(shape, dtype=torch.int64, device=dev)
    grid_yz = torch.stack(torch.meshgrid(torch.arange(shape[1], device=dev), torch.arange(shape[2], device=dev),
                                         indexing="ij"), -1).float()
    for x in range(shape[0]):  # nearest centre, one slice at a time (bounded memory)
        pts = torch.cat([torch.full((*shape[1:], 1), float(x), device=dev), grid_yz], -1).reshape(-1, 3)
        lab[x] = torch.cdist(pts, centres).argmin(1).reshape(shape[1:]) + 1
    lab[:, :, :40] = 0  # some background
    pred = torch.roll(lab, (3, -2, 2), (0, 1, 2))
    if dev.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    _sync(dev)
    t0 = time.perf_counter()
    r = segmentation_scores(pred[None], lab[None], num_classes=k, spacing=(0.7, 0.7, 0.5), tolerance=TOL,
                            metrics=METRICS, spatial_dims=3, backend="torch")
    _sync(dev)
    t = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30 if dev.startswith("cuda") else float("nan")
    hd = r["hd95"][0]
    print(f"\nbig: {shape}, {k - 1} classes: {t:.2f} s, peak GPU memory {peak:.1f} GiB, "
          f"HD95 defined for {int((~hd.isnan()).sum())} classes (median {float(hd.nanmedian()):.2f} mm)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seg", type=Path,
                    default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "totalseg_ct" / "seg.nii.gz")
    ap.add_argument("--upsample", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--methods", nargs="+", default=["batched", "auto"],
                    help="batched: all classes of a case at once (the default path on GPUs); "
                         "auto / edt / brute: the per-class path with that search")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--cases", type=int, default=1, help="also N native cases in one call vs one by one")
    ap.add_argument("--steps", action="store_true", help="time the batched path's steps")
    ap.add_argument("--no-monai", action="store_true", help="skip MONAI (68 s on the full-resolution case)")
    ap.add_argument("--profile", action="store_true", help="print the torch profiler's top operations")
    ap.add_argument("--window", type=int, help="the batched path's min-plus window (voxels)")
    ap.add_argument("--blocks", type=int, nargs=3, metavar=("R", "X", "WARPS"),
                    help="the min-plus kernel's tile (BLOCK_R, BLOCK_X, num_warps)")
    ap.add_argument("--no-kdtree-cases", action="store_true", help="only the --big case")
    args = ap.parse_args()
    from medimg_bench.metrics import _minplus_triton, _surface_batched

    if args.window:
        _surface_batched.WINDOW = args.window
    if args.blocks:
        _minplus_triton.BLOCK_R, _minplus_triton.BLOCK_X, _minplus_triton.NUM_WARPS = args.blocks
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"device {args.device} ({name}), torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    if args.no_kdtree_cases:
        pass
    elif args.seg.exists():
        seg, sp = _load(args.seg)
        _case("TotalSegmentator, native", seg, sp, (2, -1, 1), args)
        if args.cases > 1:
            _many(args, seg, sp)
        u = args.upsample
        if u > 1:
            big = seg.repeat(u, 0).repeat(u, 1).repeat(u, 2)
            _case(f"TotalSegmentator, x{u} (full resolution)", big, tuple(s / u for s in sp),
                  (2 * u, -u, u), args)
    else:
        print(f"(no label map at {args.seg}: pass --seg)")
    if args.big:
        _big(args)


if __name__ == "__main__":
    main()
