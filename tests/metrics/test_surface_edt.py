"""The batched GPU-path surface distances: exact distance transform == brute force == KD-tree."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics import _surface_torch
from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics._surface import class_surface_distances
from medimg_bench.metrics._surface_torch import squared_edt, surface_distance_tensors


def _blobs(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    c = [rng.uniform(0, s) for s in shape]
    r = [rng.uniform(1.0, max(1.5, s / 2)) for s in shape]
    t = sum(((g - ci) / ri) ** 2 for g, ci, ri in zip(grid, c, r)) <= 1
    p = sum(((g - ci - rng.uniform(-2, 2)) / (ri * rng.uniform(0.7, 1.3)) ** 1) ** 2
            for g, ci, ri in zip(grid, c, r)) <= 1
    p ^= rng.random(shape) < 0.03  # speckle: isolated surface points far from the other surface
    t[tuple(rng.integers(0, s) for s in shape)] = True
    p[tuple(rng.integers(0, s) for s in shape)] = True
    return p, t


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), ndim=st.sampled_from([2, 3]),
       surface=st.sampled_from(["edge", "surfel"]),
       spacing=st.sampled_from([None, (0.8, 0.8, 2.5), (1 / 3, 0.7, 1.1), (3.0, 0.1, 0.3)]))
def test_edt_brute_and_kdtree_give_the_same_float64_distances(seed, ndim, surface, spacing):
    if surface == "surfel":
        pytest.importorskip("surface_distance")  # its surfel lookup table
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.integers(2, 16 if ndim == 3 else 40, ndim))
    sp = tuple((spacing or (1.0, 1.0, 1.0))[:ndim])
    p, t = _blobs(rng, shape)
    ref = class_surface_distances(p, t, sp, surface)
    pt, tt = torch.from_numpy(p), torch.from_numpy(t)
    # windows of 1 and 2 voxels send many points to the exact search beyond the window
    for method, window in (("edt", 8), ("edt", 2), ("edt", 1), ("brute", 8)):
        _surface_torch.EDT_WINDOW = window
        try:
            got = [x.numpy() for x in surface_distance_tensors(pt, tt, sp, surface, method=method,
                                                                  chunk_bytes=4096)]
        finally:
            _surface_torch.EDT_WINDOW = 8
        got[0], got[2] = np.sqrt(got[0]), np.sqrt(got[2])
        for a, b in zip(got, (ref.d_pred_to_target, ref.w_pred, ref.d_target_to_pred, ref.w_target)):
            np.testing.assert_array_equal(a, b, err_msg=f"{method} (window {window}) differs from the KD-tree")


def test_squared_edt_against_scipy_and_without_seeds():
    from scipy.ndimage import distance_transform_edt

    rng = np.random.default_rng(0)
    seeds = rng.random((2, 9, 7, 5)) < 0.05
    seeds[1] = False
    seeds[1, 4, 3, 2] = True
    sp = (0.5, 1.5, 2.0)
    coords = [torch.arange(n, dtype=torch.float64) * s for n, s in zip(seeds.shape[1:], sp)]
    got = squared_edt(torch.from_numpy(seeds), coords, chunk_bytes=1000).sqrt().numpy()
    wide = squared_edt(torch.from_numpy(seeds), coords, window=[None, 20, 20]).sqrt().numpy()
    np.testing.assert_array_equal(got, wide)  # a window wider than the axis is the full search
    for b in range(2):
        want = distance_transform_edt(~seeds[b], sampling=sp)
        np.testing.assert_allclose(got[b], want, rtol=1e-12)
    none = squared_edt(torch.zeros(1, 4, 4, dtype=torch.bool), [torch.arange(4.0)] * 2)
    assert torch.isinf(none).all()


def test_torch_backend_on_a_many_class_volume_equals_kdtree():
    """All classes of a case through the batched path (one host copy), against the KD-tree."""
    rng = np.random.default_rng(3)
    shape = (30, 26, 12)
    t = np.zeros(shape, np.int64)
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    for c in range(1, 12):
        centre = [rng.uniform(0, s) for s in shape]
        radii = [rng.uniform(1.0, s / 3) for s in shape]
        t[sum(((g - ci) / r) ** 2 for g, ci, r in zip(grid, centre, radii)) <= 1] = c
    p = np.roll(t, (1, -1, 1), (0, 1, 2))
    p[rng.random(shape) < 0.01] = 5
    kw = dict(num_classes=12, spacing=(0.8, 0.8, 2.5), tolerance=2.0, spatial_dims=3,
              metrics=("hausdorff", "hd95", "assd", "nsd", "dice"))
    a = S.segmentation_scores(p, t, backend="kdtree", **kw)
    b = S.segmentation_scores(torch.from_numpy(p), torch.from_numpy(t), backend="torch", chunk_mb=0.01, **kw)
    for m in a:
        torch.testing.assert_close(a[m], b[m], rtol=0, atol=0, equal_nan=True)
    _surface_torch.EDT_WINDOW = 2
    try:
        c = S.segmentation_scores(torch.from_numpy(p), torch.from_numpy(t), backend="torch", **kw)
    finally:
        _surface_torch.EDT_WINDOW = 8
    for m in a:
        torch.testing.assert_close(a[m], c[m], rtol=0, atol=0, equal_nan=True)


def test_bad_chunk_option_is_refused():
    x = torch.zeros(1, 4, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="chunk_mb"):
        S.segmentation_scores(x, x, num_classes=2, chunk_mb=0, backend="torch")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_edt_equals_kdtree():
    rng = np.random.default_rng(1)
    p, t = _blobs(rng, (40, 36, 20))
    sp = (0.8, 0.8, 2.5)
    ref = class_surface_distances(p, t, sp, "edge")
    got = surface_distance_tensors(torch.from_numpy(p).cuda(), torch.from_numpy(t).cuda(), sp, "edge", method="edt")
    np.testing.assert_array_equal(np.sqrt(got[0].cpu().numpy()), ref.d_pred_to_target)
    np.testing.assert_array_equal(np.sqrt(got[2].cpu().numpy()), ref.d_target_to_pred)


def test_out_of_memory_names_case_class_and_chunk_option(monkeypatch):
    from medimg_bench.metrics import _seg_core

    def oom(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(_seg_core, "surface_distance_tensors", oom)
    x = torch.zeros(2, 8, 8, dtype=torch.long)
    x[:, 2:5, 2:5] = 1
    with pytest.raises(RuntimeError, match=r"case 0, class 1: out of GPU memory .*chunk_mb"):
        S.segmentation_scores(x, x, num_classes=2, metrics=("hd95",), backend="torch", chunk_mb=64)
