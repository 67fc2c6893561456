"""All classes of a case at once (the CUDA path), run on the CPU: equal to the KD-tree backend."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics import _surface_batched
from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics._surface_batched import (
    numpy_linear_percentile,
    percentile_ranks,
    plan_groups,
)

ROOT = Path(__file__).resolve().parents[2]
EXACT = ("hausdorff", "hd95", "nsd")
SUMS = ("assd", "masd")  # summed on the device in another order than NumPy's dot


def _organs(seed: int, shape=(30, 26, 12), k=12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.zeros(shape, np.int64)
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    for c in range(1, k):
        centre = [rng.uniform(0, s) for s in shape]
        radii = [rng.uniform(1.0, s / 3) for s in shape]
        t[sum(((g - ci) / r) ** 2 for g, ci, r in zip(grid, centre, radii)) <= 1] = c
    nd = len(shape)
    p = np.roll(t, (1, -1, 1)[:nd], tuple(range(nd)))
    p[rng.random(shape) < 0.01] = 5 % k  # speckle: far outliers for the percentiles
    p[(0, slice(None), 0)[:nd]] = 3 % k  # a class touching the image border
    return p, t


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(_surface_batched, "FORCE", True)


def _compare(p, t, *, one_hot=False, **kw):
    a = S.segmentation_scores(p, t, backend="kdtree", one_hot=one_hot, **kw)
    tp, tt = torch.from_numpy(p), torch.from_numpy(t)
    b = S.segmentation_scores(tp, tt, backend="torch", one_hot=one_hot, **kw)
    for m in a:
        if m in SUMS:
            torch.testing.assert_close(a[m], b[m], rtol=1e-12, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(a[m], b[m], rtol=0, atol=0, equal_nan=True, msg=m)


@pytest.mark.parametrize("convention", ["default", "monai", "medpy", "metrics_reloaded",
                                        "metrics_reloaded_00219d0", "deepmind", "brats"])
def test_every_convention_equals_kdtree(forced, convention):
    if convention in ("deepmind", "brats"):
        pytest.importorskip("surface_distance")  # the surfel area tables
    p, t = _organs(3)
    _compare(p, t, num_classes=12, spacing=(0.8, 0.8, 2.5), tolerance=2.0, spatial_dims=3,
             convention=convention, metrics=("hausdorff", "hd95", "assd", "masd", "nsd", "dice"))


@pytest.mark.parametrize("options", [dict(percentile=90.0), dict(directed=True), dict(percentile=100.0),
                                     dict(percentile=0.0, directed=True), dict(chunk_mb=0.001)])
def test_options_and_tiny_groups_equal_kdtree(forced, options, monkeypatch):
    p, t = _organs(5)
    if "chunk_mb" in options:  # a budget that puts every class in its own group, chunked passes
        monkeypatch.setattr(_surface_batched, "GROUP_SLACK", 1.0)
    _compare(p, t, num_classes=12, spacing=(1 / 3, 0.7, 1.1), tolerance=1.0, spatial_dims=3,
             metrics=("hausdorff", "hd95", "assd", "nsd"), **options)


@pytest.mark.parametrize("directed", [False, True])
def test_per_class_tolerances_equal_kdtree(forced, directed):
    """One NSD tolerance per class (MONAI's class_thresholds) reaches each class of a group."""
    p, t = _organs(6)
    _compare(p, t, num_classes=12, spacing=(0.8, 0.8, 2.5), spatial_dims=3, directed=directed,
             tolerance=[0.5 + 0.4 * c for c in range(11)], metrics=("nsd", "hd95"))


def test_two_d_one_hot_and_several_cases(forced):
    rng = np.random.default_rng(2)
    t = np.stack([_organs(s, shape=(40, 33), k=6)[1] for s in range(3)])
    p = np.stack([np.roll(x, (2, -1), (0, 1)) for x in t])
    p[rng.random(p.shape) < 0.02] = 2
    oh = lambda x: np.moveaxis(np.eye(6, dtype=np.uint8)[x], -1, 1)  # noqa: E731
    _compare(p, t, num_classes=6, spacing=(0.5, 1.5), spatial_dims=2, metrics=("hd95", "assd", "nsd"))
    _compare(oh(p), oh(t), one_hot=True, spacing=(0.5, 1.5), spatial_dims=2, metrics=("hd95", "assd", "nsd"))
    # the classes of all cases are batched together, grouped by spacing
    _compare(p, t, num_classes=6, spacing=[(0.5, 1.5), (1.0, 0.7), (0.5, 1.5)], spatial_dims=2,
             metrics=("hd95", "assd", "nsd"))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=40),
       q=st.one_of(st.sampled_from([0.0, 5.0, 50.0, 95.0, 99.0, 100.0]), st.floats(0, 100)))
def test_linear_percentile_is_numpys_number(values, q):
    d = np.sort(np.asarray(values, dtype=np.float64))
    lo, hi = percentile_ranks(len(d), q)
    assert numpy_linear_percentile(d[lo], d[hi], len(d), q) == float(np.percentile(d, q))


@settings(max_examples=100, deadline=None)
@given(shapes=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40), st.integers(1, 9)), min_size=1, max_size=30),
       budget=st.integers(1, 10**6), waste=st.sampled_from([0, 500, 10**9]))
def test_groups_cover_every_class_once_within_slack_and_budget(shapes, budget, waste):
    groups = plan_groups(shapes, budget, waste_voxels=waste)
    assert sorted(i for g in groups for i in g) == list(range(len(shapes)))
    for g in groups:
        if len(g) == 1:
            continue  # a box alone is always allowed
        padded = math.prod(max(shapes[i][k] for i in g) for k in range(3)) * len(g)
        own = sum(math.prod(shapes[i]) for i in g)
        assert padded <= _surface_batched.GROUP_SLACK * own or padded - own <= waste
        assert padded * _surface_batched.BYTES_PER_VOXEL <= budget


_TRITON_CHECK = """
import numpy as np, torch
from medimg_bench.metrics import _minplus_triton, _surface_batched
from medimg_bench.metrics import segmentation as S
from tests.metrics.test_surface_batched import _organs
assert _minplus_triton.available(torch.zeros(1))
_surface_batched.FORCE = True
_surface_batched.WINDOW = 2  # the windowed kernel and the far-point search
p, t = _organs(7, shape=(14, 12, 8), k=5)
kw = dict(num_classes=5, spacing=(0.8, 0.8, 2.5), tolerance=2.0, spatial_dims=3, metrics=("hd95", "nsd", "hausdorff"))
a = S.segmentation_scores(p, t, backend="kdtree", **kw)
b = S.segmentation_scores(torch.from_numpy(p), torch.from_numpy(t), backend="torch", chunk_mb=0.01, **kw)
for m in a:
    torch.testing.assert_close(a[m], b[m], rtol=0, atol=0, equal_nan=True)
print("ok")
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="with a GPU the kernel runs for real (test_cuda_*)")
def test_triton_kernel_in_the_interpreter_equals_kdtree():
    """The fused min-plus kernel itself, run by Triton's CPU interpreter (the CPU stand-in for
    the CUDA tests; Triton 3.6's interpreter fails on NumPy 2.5 scalars, 3.8's runs)."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("MEDIMG_BENCH_NO_TRITON", None)
    res = subprocess.run([sys.executable, "-c", _TRITON_CHECK], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("convention", ["default", "medpy", "deepmind"])
@pytest.mark.parametrize("window", [16, 2])
def test_cuda_batched_equals_kdtree(convention, window, monkeypatch):
    if convention == "deepmind":
        pytest.importorskip("surface_distance")
    monkeypatch.setattr(_surface_batched, "WINDOW", window)
    p, t = _organs(11, shape=(60, 50, 24), k=20)
    kw = dict(num_classes=20, spacing=(0.8, 0.8, 2.5), tolerance=2.0, spatial_dims=3, convention=convention,
              metrics=("hausdorff", "hd95", "assd", "nsd"))
    a = S.segmentation_scores(p, t, backend="kdtree", **kw)
    b = S.segmentation_scores(torch.from_numpy(p).cuda(), torch.from_numpy(t).cuda(), backend="torch", **kw)
    for m in a:
        tol = dict(rtol=1e-12, atol=0) if m in SUMS else dict(rtol=0, atol=0)
        torch.testing.assert_close(a[m], b[m].cpu(), equal_nan=True, **tol)


@pytest.mark.parametrize("window,plane_search", [(1, True), (2, True), (3, False)])
def test_windowed_transform_with_exact_far_points_equals_kdtree(forced, monkeypatch, window, plane_search):
    """Narrow windows send many points to the exact plane search (or, when that would cost more
    than the whole transform, make the group redo it over whole axes): the KD-tree's numbers."""
    monkeypatch.setattr(_surface_batched, "WINDOW", window)
    if not plane_search:
        real = _surface_batched._exact_far
        monkeypatch.setattr(_surface_batched, "_exact_far", lambda *a: real(*a[:-1], -1))
    p, t = _organs(9)
    _compare(p, t, num_classes=12, spacing=(0.8, 0.8, 2.5), tolerance=2.0, spatial_dims=3,
             metrics=("hausdorff", "hd95", "assd", "nsd"))
    _compare(p, t, num_classes=12, spacing=(0.8, 0.8, 2.5), spatial_dims=3, convention="medpy",
             metrics=("hd95", "assd"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_several_cases_and_spacings_in_one_call():
    t = np.stack([_organs(s, shape=(40, 36, 20), k=8)[1] for s in range(3)])
    p = np.stack([np.roll(x, (2, -1, 1), (0, 1, 2)) for x in t])
    kw = dict(num_classes=8, spacing=[(0.8, 0.8, 2.5), (1.0, 0.7, 1.5), (0.8, 0.8, 2.5)], tolerance=2.0,
              spatial_dims=3, metrics=("hausdorff", "hd95", "assd", "nsd"))
    a = S.segmentation_scores(p, t, backend="kdtree", **kw)
    b = S.segmentation_scores(torch.from_numpy(p).cuda(), torch.from_numpy(t).cuda(), backend="torch", **kw)
    for m in a:
        tol = dict(rtol=1e-12, atol=0) if m in SUMS else dict(rtol=0, atol=0)
        torch.testing.assert_close(a[m], b[m].cpu(), equal_nan=True, **tol)
