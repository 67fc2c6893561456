"""Largest difference between our conventions and the installed peer libraries on a seeded
generated corpus (the numbers of the segmentation rows of ``docs/reliability.md``; the tests
hold the same comparisons to fixed tolerances).

Libraries: MONAI (``convention="monai"``; HD max / 95th percentile, directed or not, ASD
symmetric or not, surface Dice, for each ``distance_metric``), DeepMind surface-distance
(``"deepmind"``; robust HD 100 / 95, both directed average distances, both surface overlaps,
surface Dice) and medpy (``"medpy"``; hd, hd95, asd both ways, assd). Pairs: ellipsoids with 4 %
noise, 2-D (3-24 px) and 3-D (3-12 voxels), anisotropic spacing (or none for MONAI's chamfer
distances, which ignore it).

Run: ``PYTHONPATH=. python tools/seg_agreement.py [--cases 60]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from medimg_bench.metrics import segmentation as S  # noqa: E402
from tests.metrics._seg_helpers import ellipsoid  # noqa: E402


def _pair(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    nd = int(rng.integers(2, 4))
    shape = tuple(int(rng.integers(3, 25 if nd == 2 else 13)) for _ in range(nd))
    p = ellipsoid(rng, shape) | (rng.random(shape) < 0.04)
    t = ellipsoid(rng, shape)
    p.flat[rng.integers(0, p.size)] = True
    t.flat[rng.integers(0, t.size)] = True
    spacing = tuple(float(rng.choice([0.6, 0.85, 1.0, 1.2, 1.7, 2.5])) for _ in shape)
    return p.astype(np.int64), t.astype(np.int64), spacing


def _rel(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-300)


def _ours(p, t, sp, conv, metric, **kw) -> float:
    out = S.segmentation_scores(p, t, metrics=[metric], num_classes=2, spatial_dims=p.ndim,
                                spacing=sp, convention=conv, **kw)[metric]
    return float(out.item())


def monai_rows(rng, n: int) -> list[float]:
    from monai import metrics as mm

    oh = lambda x: torch.nn.functional.one_hot(torch.as_tensor(x), 2).movedim(-1, 0)[None].float()  # noqa: E731
    diffs = []
    for i in range(n):
        p, t, sp = _pair(rng)
        dm = ("euclidean", "chessboard", "taxicab")[i % 3]
        sp_ = sp if dm == "euclidean" else None
        a, b = oh(p), oh(t)
        kw = dict(include_background=False, distance_metric=dm, spacing=sp_)
        for directed in (False, True):
            for pct in (None, 95):
                ref = mm.compute_hausdorff_distance(a, b, directed=directed, percentile=pct, **kw).item()
                m, extra = ("hausdorff", {}) if pct is None else ("hd95", {})
                diffs.append(_rel(_ours(p, t, sp_, "monai", m, directed=directed, distance_metric=dm, **extra), ref))
            ref = mm.compute_average_surface_distance(a, b, symmetric=not directed, **kw).item()
            diffs.append(_rel(_ours(p, t, sp_, "monai", "assd", directed=directed, distance_metric=dm), ref))
        ref = mm.compute_surface_dice(a, b, [1.37], **kw).item()
        diffs.append(_rel(_ours(p, t, sp_, "monai", "nsd", tolerance=1.37, distance_metric=dm), ref))
    return diffs


def deepmind_rows(rng, n: int) -> list[float]:
    import surface_distance as sd

    diffs = []
    for _ in range(n):
        p, t, sp = _pair(rng)
        r = sd.compute_surface_distances(t.astype(bool), p.astype(bool), sp)
        asd = sd.compute_average_surface_distance(r)
        ov = sd.compute_surface_overlap_at_tolerance(r, 1.0)
        diffs += [_rel(_ours(p, t, sp, "deepmind", "hausdorff"), sd.compute_robust_hausdorff(r, 100)),
                  _rel(_ours(p, t, sp, "deepmind", "hd95"), sd.compute_robust_hausdorff(r, 95)),
                  _rel(_ours(p, t, sp, "deepmind", "nsd", tolerance=1.0), sd.compute_surface_dice_at_tolerance(r, 1.0)),
                  _rel(_ours(p, t, sp, "deepmind", "assd", directed=True), asd[1]),
                  _rel(_ours(t, p, sp, "deepmind", "assd", directed=True), asd[0]),
                  _rel(_ours(p, t, sp, "deepmind", "nsd", directed=True, tolerance=1.0), ov[1]),
                  _rel(_ours(t, p, sp, "deepmind", "nsd", directed=True, tolerance=1.0), ov[0])]
    return diffs


def medpy_rows(rng, n: int) -> list[float]:
    from medpy.metric import binary as mb

    diffs = []
    for _ in range(n):
        p, t, sp = _pair(rng)
        diffs += [_rel(_ours(p, t, sp, "medpy", "hausdorff"), mb.hd(p, t, sp)),
                  _rel(_ours(p, t, sp, "medpy", "hd95"), mb.hd95(p, t, sp)),
                  _rel(_ours(p, t, sp, "medpy", "assd"), mb.assd(p, t, sp)),
                  _rel(_ours(p, t, sp, "medpy", "assd", directed=True), mb.asd(p, t, sp)),
                  _rel(_ours(t, p, sp, "medpy", "assd", directed=True), mb.asd(t, p, sp))]
    return diffs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=60)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    for name, fn in (("monai", monai_rows), ("deepmind", deepmind_rows), ("medpy", medpy_rows)):
        d = fn(np.random.default_rng(12345), args.cases)
        print(f"{name}: {args.cases} pairs, {len(d)} values, largest relative difference {max(d):.3g}")


if __name__ == "__main__":
    main()
