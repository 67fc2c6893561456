"""The torch surface-distance backend against the KD-tree backend on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics import _seg_core
from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics._surface_torch import nearest_distances
from medimg_bench.metrics.seg_conventions import CONVENTIONS
from tests.metrics._seg_helpers import sphere

pytest.importorskip("surface_distance")  # surfel tables of the deepmind / brats conventions

DIST = ("hausdorff", "hd95", "assd", "masd", "nsd")
ALL = (*DIST, "dice", "iou", "precision", "recall", "volume_difference")
REL = 1e-9


def _both(pred, target, **kw) -> tuple[dict, dict]:
    a = S.segmentation_scores(pred, target, metrics=ALL, backend="kdtree", **kw)
    b = S.segmentation_scores(pred, target, metrics=ALL, backend="torch", **kw)
    return a, b


def _same(a: dict, b: dict, rel: float = REL) -> None:
    for m in a:
        x, y = a[m].cpu(), b[m].cpu()
        assert x.dtype == y.dtype == torch.float64
        assert torch.allclose(x, y, rtol=rel, atol=1e-12, equal_nan=True), (m, x, y)


def _noisy(rng: np.random.Generator, shape, k: int, flip: float) -> tuple[np.ndarray, np.ndarray]:
    """A blobby label map and a copy with a fraction ``flip`` of voxels relabelled."""
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    t = np.zeros(shape, np.int64)
    for c in range(1, k):
        centre = [rng.uniform(0, s) for s in shape]
        radii = [rng.uniform(1.0, max(1.5, s / 2)) for s in shape]
        t[sum(((g - ci) / r) ** 2 for g, ci, r in zip(grid, centre, radii)) <= 1] = c
    p = np.where(rng.random(shape) < flip, rng.integers(0, k, shape), t)
    return p, t


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    ndim=st.sampled_from([2, 3]),
    convention=st.sampled_from(sorted(CONVENTIONS)),
    flip=st.sampled_from([0.0, 0.05, 0.3]),
    one_hot=st.booleans(),
)
def test_random_label_maps_match(seed, ndim, convention, flip, one_hot):
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.integers(3, 14 if ndim == 3 else 30, ndim))
    k = 3
    p, t = _noisy(rng, shape, k, flip)
    spacing = tuple(float(v) for v in rng.uniform(0.4, 3.0, ndim))
    pt, tt = torch.as_tensor(p), torch.as_tensor(t)
    if one_hot:
        pt = torch.nn.functional.one_hot(pt, k).movedim(-1, 0)[None]
        tt = torch.nn.functional.one_hot(tt, k).movedim(-1, 0)[None]
    kw = dict(num_classes=k, spacing=spacing, spatial_dims=ndim, convention=convention,
              one_hot=one_hot, include_background=True, tolerance=float(rng.uniform(0, 3)))
    _same(*_both(pt, tt, **kw))


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("percentile", [None, 50.0, 95.0])
def test_spheres_anisotropic(convention, directed, percentile):
    # tolerance 1.5 mm = sqrt(0.9² + 1.2²) lies exactly on lattice distances: NSD only agrees
    # when both backends round every distance the same way
    spacing = (0.85, 1.2, 0.9)
    shape = (31, 27, 33)
    a = sphere(8.0, (13.0, 15.0, 14.0), shape, spacing)
    b = sphere(11.0, (14.0, 16.5, 15.0), shape, spacing)
    kw = dict(num_classes=2, spacing=spacing, convention=convention, directed=directed,
              percentile=percentile, tolerance=1.5)
    _same(*_both(a, b, **kw))


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_border_touching_empty_and_full(convention):
    shape = (9, 11, 7)
    full = np.ones(shape, np.int64)
    corner = np.zeros(shape, np.int64)
    corner[:4, :5, :] = 1  # touches three faces of the image
    slab = np.zeros(shape, np.int64)
    slab[:, :, 3:] = 1
    empty = np.zeros(shape, np.int64)
    pairs = [(full, corner), (corner, slab), (full, full), (empty, corner), (corner, empty),
             (empty, empty), (full, empty)]
    pred = np.stack([p for p, _ in pairs])
    target = np.stack([t for _, t in pairs])
    a, b = _both(pred, target, num_classes=2, spacing=(1.5, 0.7, 2.0), convention=convention)
    _same(a, b)
    assert torch.isfinite(a["dice"][:3]).all()


def test_2d_batch_of_cases_with_per_case_spacing():
    rng = np.random.default_rng(3)
    cases = [_noisy(rng, (17, 23), 4, 0.1), _noisy(rng, (12, 9), 4, 0.2)]
    preds, targets = [c[0] for c in cases], [c[1] for c in cases]
    for conv in ("default", "deepmind"):
        _same(*_both(preds, targets, num_classes=4, spacing=[(0.5, 1.0), (2.0, 0.3)],
                     convention=conv))


def test_functional_and_stateful_thread_backend(monkeypatch):
    rng = np.random.default_rng(5)
    p, t = _noisy(rng, (10, 12, 8), 3, 0.1)
    p, t = torch.as_tensor(p)[None], torch.as_tensor(t)[None]
    sp = (1.0, 0.5, 2.0)
    ref = S.hd95(p, t, num_classes=3, spacing=sp, backend="kdtree")
    calls = []
    real = _seg_core.surface_distance_tensors

    def spy(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(_seg_core, "surface_distance_tensors", spy)
    got = S.hd95(p, t, num_classes=3, spacing=sp, backend="torch")
    assert calls and torch.allclose(got, ref, rtol=REL, equal_nan=True)
    n = len(calls)
    S.hd95(p, t, num_classes=3, spacing=sp)  # auto on CPU tensors stays on the KD-tree
    assert len(calls) == n
    m = S.SegmentationMetrics(num_classes=3, metrics=("hd95", "nsd"), backend="torch")
    m.update(p, t, meta=[{"spacing": sp}], ids=["a"])
    assert len(calls) > n
    assert torch.allclose(m.metric_values()["hd95"][1], ref, rtol=REL, equal_nan=True)


def test_unknown_backend_raises():
    x = torch.zeros(1, 4, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="unknown backend 'gpu'"):
        S.segmentation_scores(x, x, num_classes=2, backend="gpu")
    with pytest.raises(ValueError, match="unknown backend"):
        S.HD95(num_classes=2, backend="cuda")


@pytest.mark.parametrize("chunk_bytes", [16, 1000, 1 << 20])
def test_nearest_distances_chunking(chunk_bytes):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(57, 3)) * 10, rng.normal(size=(41, 3)) * 10
    ref = np.sqrt(((a[:, None, :] - b[None]) ** 2).sum(-1)).min(1)
    got = nearest_distances(torch.as_tensor(a), torch.as_tensor(b), chunk_bytes=chunk_bytes)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12)
    assert nearest_distances(torch.empty(0, 3, dtype=torch.float64),
                             torch.as_tensor(b)).shape == (0,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("convention", ["default", "deepmind"])
def test_cuda_matches_cpu(convention):
    rng = np.random.default_rng(11)
    p, t = _noisy(rng, (40, 36, 30), 4, 0.05)
    sp = (0.8, 0.8, 2.5)
    kw = dict(num_classes=4, spacing=sp, convention=convention, metrics=ALL)
    cpu = S.segmentation_scores(torch.as_tensor(p)[None], torch.as_tensor(t)[None],
                                backend="kdtree", **kw)
    gpu = S.segmentation_scores(torch.as_tensor(p)[None].cuda(), torch.as_tensor(t)[None].cuda(),
                                **kw)  # auto -> torch on CUDA
    for m in ALL:
        assert gpu[m].device.type == "cuda"
    _same(cpu, gpu, rel=1e-5)


def test_huge_point_sets_fall_back_to_the_kdtree():
    from medimg_bench.metrics._surface_torch import nearest_distances

    g = torch.Generator().manual_seed(1)
    src = torch.rand(300, 3, generator=g, dtype=torch.float64) * 20
    dst = torch.rand(200, 3, generator=g, dtype=torch.float64) * 20
    brute = nearest_distances(src, dst)
    tree = nearest_distances(src, dst, max_pairs=0)
    ref = torch.cdist(src, dst).amin(1)
    assert torch.allclose(brute, ref, rtol=0, atol=1e-12)
    assert torch.allclose(tree, ref, rtol=0, atol=1e-12)
