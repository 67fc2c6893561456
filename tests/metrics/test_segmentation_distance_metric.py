"""``distance_metric="euclidean" | "chessboard" | "taxicab"`` (MONAI's option and spellings).

``convention="monai"`` equals MONAI 1.6.1's ``compute_hausdorff_distance`` (max, percentile,
directed), ``compute_average_surface_distance`` (symmetric or not) and ``compute_surface_dice``
on generated masks, 2-D and 3-D, with and without spacing: like MONAI it counts chessboard and
taxicab distances in voxel steps whatever the spacing (and warns that it does). Under
``convention="default"`` the same distances are measured in mm (``max_i |Δ_i s_i|`` and
``Σ_i |Δ_i s_i|``), checked against a brute force written here; every backend gives the same
numbers.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics import _surface_batched
from medimg_bench.metrics import segmentation as S
from tests.metrics._seg_helpers import ellipsoid

monai_metrics = pytest.importorskip("monai.metrics")

REL = 1e-5  # MONAI returns float32
METRICS = ("euclidean", "chessboard", "taxicab")


def _pair(seed: int, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = ellipsoid(rng, shape) | (rng.random(shape) < 0.04)
    t = ellipsoid(rng, shape)
    p.flat[rng.integers(0, p.size)] = True
    t.flat[rng.integers(0, t.size)] = True
    return p.astype(np.int64), t.astype(np.int64)


def _oh(x: np.ndarray) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.as_tensor(x), 2).movedim(-1, 0)[None].float()


def _monai(p, t, metric, spacing, directed, percentile, tol):
    a, b = _oh(p), _oh(t)
    kw = dict(include_background=False, distance_metric=metric, spacing=spacing)
    return {
        "hausdorff": monai_metrics.compute_hausdorff_distance(a, b, directed=directed, **kw).item(),
        "hd95": monai_metrics.compute_hausdorff_distance(a, b, directed=directed, percentile=percentile,
                                                         **kw).item(),
        "assd": monai_metrics.compute_average_surface_distance(a, b, symmetric=not directed, **kw).item(),
        "nsd": monai_metrics.compute_surface_dice(a, b, [tol], **kw).item(),
    }


def _ours(p, t, metric, spacing, directed, percentile, tol, **kw):
    common = dict(num_classes=2, spatial_dims=p.ndim, spacing=spacing, convention="monai",
                  distance_metric=metric, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = S.segmentation_scores(p, t, metrics=["hausdorff", "assd"], directed=directed, **common)
        out["hd95"] = S.hd95(p, t, percentile=percentile, directed=directed, **common)
        out["nsd"] = S.nsd(p, t, tolerance=tol, **common)
    return {m: v.item() for m, v in out.items()}


shapes = st.one_of(st.tuples(st.integers(3, 24), st.integers(3, 24)),
                   st.tuples(st.integers(3, 12), st.integers(3, 12), st.integers(2, 9)))


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**31 - 1), metric=st.sampled_from(METRICS),
       directed=st.booleans(), percentile=st.sampled_from([50, 90, 95]),
       with_spacing=st.booleans(), tol=st.sampled_from([0.77, 1.37, 2.61]))
def test_monai_convention_equals_monai(shape, seed, metric, directed, percentile, with_spacing, tol):
    p, t = _pair(seed, shape)
    rng = np.random.default_rng(seed + 1)
    spacing = tuple(float(rng.choice([0.6, 1.0, 1.7])) for _ in shape) if with_spacing else None
    ref = _monai(p, t, metric, spacing, directed, percentile, tol)
    ours = _ours(p, t, metric, spacing, directed, percentile, tol)
    for m, v in ref.items():
        assert ours[m] == pytest.approx(v, rel=REL, abs=1e-6), (m, ours[m], v)


def test_monai_chamfer_counts_voxels_and_says_so():
    p, t = _pair(3, (9, 11, 7))
    sp = (0.5, 2.0, 3.0)
    with pytest.warns(UserWarning, match="voxel steps"):
        a = S.hausdorff_distance(p, t, num_classes=2, spacing=sp, distance_metric="taxicab", convention="monai")
    b = S.hausdorff_distance(p, t, num_classes=2, spatial_dims=3, distance_metric="taxicab",
                             convention="monai")
    assert a.item() == b.item() == float(int(a.item()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Euclidean distances use the spacing: no note
        S.hausdorff_distance(p, t, num_classes=2, spacing=sp, convention="monai")


def _brute(p: np.ndarray, t: np.ndarray, spacing, order) -> tuple[np.ndarray, np.ndarray]:
    """Directed edge-surface distances by brute force (mm, Minkowski ``order``)."""
    from scipy import ndimage

    def edges(m):
        m = m.astype(bool)
        return np.argwhere(m & ~ndimage.binary_erosion(m)) * np.asarray(spacing, dtype=float)

    a, b = edges(p), edges(t)
    d = np.linalg.norm(a[:, None, :] - b[None, :, :], ord=order, axis=-1)
    return d.min(1), d.min(0)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**31 - 1), metric=st.sampled_from(["chessboard", "taxicab"]))
def test_default_convention_measures_chamfer_distances_in_mm(shape, seed, metric):
    p, t = _pair(seed, shape)
    rng = np.random.default_rng(seed)
    spacing = tuple(float(rng.choice([0.6, 1.0, 1.7, 2.5])) for _ in shape)
    d_pt, d_tp = _brute(p, t, spacing, np.inf if metric == "chessboard" else 1)
    out = S.segmentation_scores(p, t, num_classes=2, spatial_dims=p.ndim, spacing=spacing,
                                distance_metric=metric, metrics=["hausdorff", "assd", "nsd"], tolerance=1.9)
    directed = S.segmentation_scores(p, t, num_classes=2, spatial_dims=p.ndim, spacing=spacing,
                                     distance_metric=metric, metrics=["hausdorff", "masd"], directed=True)
    assert out["hausdorff"].item() == pytest.approx(max(d_pt.max(), d_tp.max()), rel=1e-12)
    assert out["assd"].item() == pytest.approx(np.concatenate([d_pt, d_tp]).mean(), rel=1e-12)
    within = (np.sum(d_pt <= 1.9) + np.sum(d_tp <= 1.9)) / (len(d_pt) + len(d_tp))
    assert out["nsd"].item() == pytest.approx(within, rel=1e-12)
    assert directed["hausdorff"].item() == pytest.approx(d_pt.max(), rel=1e-12)
    assert directed["masd"].item() == pytest.approx(d_pt.mean(), rel=1e-12)


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("forced", [False, True])
def test_backends_agree_for_every_distance_metric(metric, forced, monkeypatch):
    """KD-tree and torch (per class; the batched path hands non-Euclidean classes to it) give the
    same numbers bit for bit."""
    monkeypatch.setattr(_surface_batched, "FORCE", forced)
    rng = np.random.default_rng(7)
    p = np.stack([rng.integers(0, 3, (10, 12, 8)) for _ in range(2)])
    t = np.stack([rng.integers(0, 3, (10, 12, 8)) for _ in range(2)])
    kw = dict(num_classes=3, spacing=(0.7, 1.3, 2.0), distance_metric=metric, tolerance=[1.1, 2.2],
              metrics=["hausdorff", "hd95", "assd", "masd", "nsd"])
    a = S.segmentation_scores(p, t, backend="kdtree", **kw)
    b = S.segmentation_scores(torch.as_tensor(p), torch.as_tensor(t), backend="torch", **kw)
    for m in a:
        assert torch.allclose(a[m], b[m], rtol=1e-12, atol=0), (m, a[m], b[m])
    assert torch.equal(a["hausdorff"], b["hausdorff"]) and torch.equal(a["nsd"], b["nsd"])


def test_distance_metric_refused_where_the_library_has_none():
    p, t = _pair(1, (8, 8))
    for conv in ("deepmind", "medpy", "metrics_reloaded", "metrics_reloaded_00219d0", "brats"):
        with pytest.raises(ValueError, match=f"distance_metric='taxicab' is not offered by convention '{conv}'"):
            S.hd95(p, t, num_classes=2, distance_metric="taxicab", convention=conv)
        S.hd95(p, t, num_classes=2, distance_metric="euclidean", convention=conv)
    with pytest.raises(ValueError, match="unknown distance_metric 'manhattan'"):
        S.hd95(p, t, num_classes=2, distance_metric="manhattan")
