"""Time the 256-threshold SOD-toolbox metrics (Dice, IoU, sensitivity, specificity and E-measure
curves) per map: medimg_bench (``sod_curves``: one histogram per image) vs pysodmetrics
(``FmeasureV2`` with the four handlers + ``Emeasure``: also cumulative histograms), side by side.

Run: ``python benchmarks/sod_metrics.py [--n 1000] [--size 352 352] [--repeats 3]``. Inputs: ``n``
8-bit maps (smooth blobs + noise) and binary masks, generated once. Prints seconds for all maps,
ms per map and the ratio (pysodmetrics / ours; > 1 means we are faster). Each side is timed
``--repeats`` times and the best run is kept (the machine is shared). pysodmetrics is optional
(``pip install --no-deps pysodmetrics opencv-python-headless``); without it only ours is timed.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_of  # noqa: E402

from medimg_bench.metrics.sod_toolbox import sod_curves


def make_maps(n: int, h: int, w: int, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    preds, gts = [], []
    for _ in range(n):
        cy, cx, r = rng.uniform(0.2 * h, 0.8 * h), rng.uniform(0.2 * w, 0.8 * w), rng.uniform(0.05, 0.3) * h
        d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
        gts.append(d < r)
        soft = np.clip(1.2 - d / (1.5 * r) + rng.normal(0, 0.15, (h, w)), 0, 1)
        preds.append((soft * 255).astype(np.uint8))
    return preds, gts


def run_ours(preds: list[np.ndarray], gts: list[np.ndarray]) -> float:
    total = 0.0
    for p, g in zip(preds, gts):
        c = sod_curves(p, g, version="head")
        total += c["dice"].sum() + c["iou"].sum() + c["sensitivity"].sum() + c["specificity"].sum() + c["e_measure"].sum()
    return total


def run_pysodmetrics(preds: list[np.ndarray], gts: list[np.ndarray]) -> float:
    import py_sod_metrics as psm

    handlers = {"dice": psm.DICEHandler(with_dynamic=True, with_adaptive=False, sample_based=True),
                "iou": psm.IOUHandler(with_dynamic=True, with_adaptive=False, sample_based=True),
                "sen": psm.RecallHandler(with_dynamic=True, with_adaptive=False, sample_based=True),
                "spe": psm.SpecificityHandler(with_dynamic=True, with_adaptive=False, sample_based=True)}
    fm, em = psm.FmeasureV2(metric_handlers=handlers), psm.Emeasure()
    for p, g in zip(preds, gts):
        g8 = np.where(g, 255, 0).astype(np.uint8)
        fm.step(pred=p, gt=g8)
        em.step(pred=p, gt=g8)
    return float(sum(np.sum(r) for h in handlers.values() for r in h.dynamic_results))




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, nargs=2, default=(352, 352))
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    preds, gts = make_maps(a.n, *a.size)
    t_ours = best_of(run_ours, a.repeats, preds, gts)
    print(f"{a.n} maps of {a.size[0]}x{a.size[1]}, 256 thresholds, Dice/IoU/Sen/Spe/E curves")
    print(f"{'medimg_bench':<14}{t_ours:8.2f} s  {1000 * t_ours / a.n:7.2f} ms/map")
    try:
        import py_sod_metrics  # noqa: F401
    except ImportError:
        print("pysodmetrics not installed: not timed")
        return
    t_psm = best_of(run_pysodmetrics, a.repeats, preds, gts)
    print(f"{'pysodmetrics':<14}{t_psm:8.2f} s  {1000 * t_psm / a.n:7.2f} ms/map")
    print(f"ratio pysodmetrics / medimg_bench: {t_psm / t_ours:.2f}x")


if __name__ == "__main__":
    main()
