"""Segmentation metrics against the peer libraries (MONAI, DeepMind, medpy) on the same inputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics._surface import class_surface_distances
from tests.metrics._seg_helpers import ellipsoid, perturbations, sphere, totalseg

monai_metrics = pytest.importorskip("monai.metrics")
sdm = pytest.importorskip("surface_distance")
medpy_binary = pytest.importorskip("medpy.metric.binary")

TEST_SPACING = (0.85, 1.2, 0.9)
REL = 1e-5  # MONAI returns float32; we keep float64


@pytest.fixture(autouse=True)
def _numpy2_inf(monkeypatch):
    # surface-distance 0.1 still spells np.Inf, removed in NumPy 2, on its empty-mask paths
    monkeypatch.setattr(np, "Inf", np.inf, raising=False)
    monkeypatch.setattr(np, "NaN", np.nan, raising=False)
    warnings.filterwarnings("ignore", category=UserWarning)


_ALL = ("hausdorff", "hd95", "assd", "nsd", "dice")


def _monai(pred, target, spacing, tol=2.0, classes=2, metrics=_ALL, keep=None):
    """MONAI 1.6.1's metrics per foreground class of a label map: {name: (C,) tensor}.

    ``keep``: only these class indices (MONAI is slow; the real-volume test samples classes).
    """
    oh = lambda x: torch.nn.functional.one_hot(torch.as_tensor(x), classes).movedim(-1, 0)[None].float()  # noqa: E731
    p, t = oh(pred), oh(target)
    if keep is not None:
        p, t = p[:, [0, *keep]], t[:, [0, *keep]]
    n = p.shape[1] - 1
    kw = dict(include_background=False, spacing=spacing)
    calls = {
        "hausdorff": lambda: monai_metrics.compute_hausdorff_distance(p, t, **kw)[0],
        "hd95": lambda: monai_metrics.compute_hausdorff_distance(p, t, percentile=95, **kw)[0],
        "assd": lambda: monai_metrics.compute_average_surface_distance(p, t, symmetric=True, **kw)[0],
        "nsd": lambda: monai_metrics.compute_surface_dice(p, t, [tol] * n, **kw)[0],
        "dice": lambda: monai_metrics.compute_dice(p, t, include_background=False)[0],
    }
    return {m: calls[m]() for m in metrics}


def _close(ours: torch.Tensor, ref, rel=REL) -> None:
    ref = torch.as_tensor(np.asarray(ref, dtype=np.float64))
    ours = ours.double().cpu().reshape(ref.shape)
    assert torch.allclose(ours, ref, rtol=rel, atol=1e-6, equal_nan=True), (ours, ref)


# -- known answers ported as numbers ------------------------------------------------------------
def test_monai_known_answers_spheres():
    small, big = sphere(20, (20, 33, 22)), sphere(40, (20, 33, 22))
    kw = dict(num_classes=2, spatial_dims=3)
    assert S.hausdorff_distance(small, big, **kw).item() == pytest.approx(20.223748416156685)
    assert S.hausdorff_distance(small, big, directed=True, **kw).item() == pytest.approx(20.09975124224178)
    assert S.hd95(small, big, **kw).item() == pytest.approx(20.09975124224178)
    directed95 = S.hausdorff_distance(small, big, directed=True, percentile=95, **kw).item()
    assert directed95 == pytest.approx(19.924858845171276)
    a = sphere(20, (20, 20, 20), spacing=TEST_SPACING)
    b = sphere(20, (19, 19, 19), spacing=TEST_SPACING)
    hd = S.hausdorff_distance(a, b, num_classes=2, spacing=TEST_SPACING).item()
    ref = monai_metrics.compute_hausdorff_distance(
        torch.as_tensor(a)[None, None], torch.as_tensor(b)[None, None], spacing=TEST_SPACING
    ).item()
    assert hd == pytest.approx(ref, rel=REL)
    assert S.hausdorff_distance(a, b, num_classes=2, spacing=TEST_SPACING).item() == pytest.approx(
        2.2671568, rel=1e-6
    )


def test_deepmind_known_answers_cubes():
    gt = np.zeros((100, 100, 100), np.int64)
    pred = gt.copy()
    gt[0:50] = 1
    pred[0:51] = 1
    kw = dict(num_classes=2, spacing=(2, 1, 1), convention="deepmind")
    # DeepMind reports (gt->pred, pred->gt) = (0.322, 0.339); `directed` keeps pred->gt
    assert S.masd(pred, gt, **kw).item() == pytest.approx((0.322 + 0.339) / 2, abs=1e-3)
    dirs = S.segmentation_scores(pred, gt, metrics=["masd"], directed=True, **kw)["masd"].item()
    assert dirs == pytest.approx(0.339, abs=1e-3)
    assert S.hd95(pred, gt, **kw).item() == pytest.approx(2.0)
    assert S.hausdorff_distance(pred, gt, **kw).item() == pytest.approx(2.0)
    assert S.nsd(pred, gt, tolerance=1.0, **kw).item() == pytest.approx(0.836, abs=1e-3)
    assert S.dice(pred, gt, num_classes=2, spatial_dims=3).item() == pytest.approx(0.990, abs=1e-3)


# -- random shapes vs the libraries --------------------------------------------------------------
shapes3 = st.tuples(st.integers(4, 14), st.integers(4, 14), st.integers(3, 10))
spacings3 = st.tuples(*[st.sampled_from([0.5, 0.8, 1.0, 1.5, 2.5])] * 3)


@settings(max_examples=25, deadline=None)
@given(shape=shapes3, spacing=spacings3, seed=st.integers(0, 2**31 - 1))
def test_default_and_monai_match_monai_random(shape, spacing, seed):
    rng = np.random.default_rng(seed)
    p = ellipsoid(rng, shape) | ((rng.random(shape) < 0.05) if seed % 3 == 0 else False)
    t = ellipsoid(rng, shape)
    p, t = p.astype(np.int64), t.astype(np.int64)
    ref = _monai(p, t, spacing)
    for conv in ("default", "monai"):
        ours = S.segmentation_scores(
            p[None], t[None], num_classes=2, spacing=spacing, convention=conv, tolerance=2.0,
            metrics=["hausdorff", "hd95", "assd", "nsd", "dice"],
        )
        if p.any() and t.any():
            for m in ours:
                _close(ours[m], ref[m])
        elif conv == "monai":
            for m in ours:
                _close(ours[m], ref[m])


@settings(max_examples=25, deadline=None)
@given(h=st.integers(3, 30), w=st.integers(3, 30), sp=st.tuples(st.floats(0.3, 3), st.floats(0.3, 3)),
       seed=st.integers(0, 2**31 - 1))
def test_2d_matches_monai_and_deepmind(h, w, sp, seed):
    rng = np.random.default_rng(seed)
    p, t = ellipsoid(rng, (h, w)), ellipsoid(rng, (h, w))
    if not (p.any() and t.any()):
        return
    ref = _monai(p.astype(np.int64), t.astype(np.int64), sp, tol=1.5, metrics=_ALL[:4])
    ours = S.segmentation_scores(p[None].astype(np.int64), t[None].astype(np.int64), num_classes=2,
                                 spacing=sp, tolerance=1.5, convention="monai",
                                 metrics=["hausdorff", "hd95", "assd", "nsd"])
    sd = class_surface_distances(p, t, tuple(sp), "edge")
    on_tol = np.isclose(np.concatenate([sd.d_pred_to_target, sd.d_target_to_pred]), 1.5, rtol=1e-6).any()
    for m in ours:
        if m == "nsd" and on_tol:
            # a distance within float32 rounding of the tolerance (e.g. 5 x 0.30000000000000004 mm):
            # MONAI's float32 distances put it inside, our float64 ones outside - both right
            continue
        _close(ours[m], ref[m])
    r = sdm.compute_surface_distances(t, p, sp)
    dm = S.segmentation_scores(p[None].astype(np.int64), t[None].astype(np.int64), num_classes=2,
                               spacing=sp, tolerance=1.5, convention="deepmind",
                               metrics=["hausdorff", "hd95", "nsd", "masd"])
    _close(dm["hd95"], sdm.compute_robust_hausdorff(r, 95), 1e-9)
    _close(dm["hausdorff"], sdm.compute_robust_hausdorff(r, 100), 1e-9)
    if not on_tol:  # the same float-rounding tie as above: DeepMind's 5 x 0.30000000000000004 > 1.5
        _close(dm["nsd"], sdm.compute_surface_dice_at_tolerance(r, 1.5), 1e-9)
    _close(dm["masd"], np.mean(sdm.compute_average_surface_distance(r)), 1e-9)


@settings(max_examples=25, deadline=None)
@given(shape=shapes3, spacing=spacings3, seed=st.integers(0, 2**31 - 1), q=st.sampled_from([50, 90, 95, 99]))
def test_deepmind_matches_surface_distance(shape, spacing, seed, q):
    rng = np.random.default_rng(seed)
    p, t = ellipsoid(rng, shape), ellipsoid(rng, shape)
    r = sdm.compute_surface_distances(t, p, spacing)
    ours = S.segmentation_scores(p[None].astype(np.int64), t[None].astype(np.int64), num_classes=2,
                                 spacing=spacing, convention="deepmind", percentile=q, tolerance=1.0,
                                 metrics=["hausdorff", "hd95", "nsd", "masd", "dice"])
    _close(ours["hausdorff"], sdm.compute_robust_hausdorff(r, q), 1e-9)
    _close(ours["hd95"], sdm.compute_robust_hausdorff(r, q), 1e-9)
    with np.errstate(invalid="ignore", divide="ignore"):
        _close(ours["nsd"], sdm.compute_surface_dice_at_tolerance(r, 1.0), 1e-9)
        _close(ours["masd"], np.mean(sdm.compute_average_surface_distance(r)), 1e-9)
        _close(ours["dice"], sdm.compute_dice_coefficient(t, p), 1e-9)
        asd = sdm.compute_average_surface_distance(r)
        overlap = sdm.compute_surface_overlap_at_tolerance(r, 1.0)
    _check_deepmind_directed(p.astype(np.int64), t.astype(np.int64), spacing, asd, overlap, 1.0)


@settings(max_examples=25, deadline=None)
@given(shape=shapes3, spacing=spacings3, seed=st.integers(0, 2**31 - 1))
def test_medpy_matches_medpy(shape, spacing, seed):
    rng = np.random.default_rng(seed)
    p, t = ellipsoid(rng, shape), ellipsoid(rng, shape)
    ours = S.segmentation_scores(p[None].astype(np.int64), t[None].astype(np.int64), num_classes=2,
                                 spacing=spacing, convention="medpy",
                                 metrics=["hausdorff", "hd95", "assd", "dice", "precision", "recall",
                                          "volume_difference"])
    mb = medpy_binary
    _close(ours["dice"], mb.dc(p, t), 1e-12)
    _close(ours["precision"], mb.precision(p, t), 1e-12)
    _close(ours["recall"], mb.recall(p, t), 1e-12)
    if p.any() and t.any():
        _close(ours["hausdorff"], mb.hd(p, t, spacing), 1e-9)
        _close(ours["hd95"], mb.hd95(p, t, spacing), 1e-9)
        _close(ours["assd"], mb.assd(p, t, spacing), 1e-9)
        _close(ours["volume_difference"], mb.ravd(p, t), 1e-9)
    else:  # medpy raises on an empty mask; we report NaN
        assert torch.isnan(ours["hd95"]).all()


def test_border_touching_and_full_masks_match_monai():
    shape = (12, 10, 8)
    p = np.zeros(shape, np.int64)
    t = np.zeros(shape, np.int64)
    p[:6] = 1  # touches three image faces
    t[:, :, :] = 1  # full mask: its surface is the image border
    t[5:7, 4:6, 3:5] = 0
    ref = _monai(p, t, (1.0, 2.0, 0.7))
    ours = S.segmentation_scores(p, t, num_classes=2, spacing=(1.0, 2.0, 0.7), tolerance=2.0,
                                 metrics=["hausdorff", "hd95", "assd", "nsd", "dice"])
    for m in ours:
        _close(ours[m], ref[m])


# -- real organ masks ---------------------------------------------------------------------------
# MONAI needs ~0.15 s per class and metric here, so: Dice on all 41 organs, and a fixed sample
# of organs for the distance metrics.
@pytest.mark.parametrize(
    "kind, metrics, keep",
    [
        ("shifted", ("dice",), None),
        ("shifted", ("hd95",), list(range(1, 42, 3))),
        ("eroded", ("nsd", "hausdorff"), [1, 7, 25, 41]),
        ("dilated", ("assd", "nsd"), [2, 12, 33, 40]),
    ],
)
def test_totalseg_41_classes_vs_monai(kind, metrics, keep):
    seg, spacing, labels = totalseg()
    assert len(labels) == 42  # background + 41 organs
    pred = perturbations(seg)[kind]
    ref = _monai(pred, seg, spacing, tol=2.0, classes=42, metrics=metrics, keep=keep)
    tol = {"tolerance": 2.0} if "nsd" in metrics else {}  # an option no metric reads is an error
    ours = S.segmentation_scores(pred, seg, num_classes=42, spacing=spacing, convention="monai",
                                 metrics=metrics, **tol)
    cols = slice(None) if keep is None else [k - 1 for k in keep]
    for m in metrics:
        _close(ours[m][:, cols], ref[m])


def test_totalseg_deepmind_and_medpy_on_a_few_organs():
    seg, spacing, _ = totalseg()
    pred = perturbations(seg)["shifted"]
    ours_dm = S.segmentation_scores(pred, seg, num_classes=42, spacing=spacing, convention="deepmind",
                                    metrics=["hd95", "nsd"], tolerance=3.0)
    ours_mp = S.segmentation_scores(pred, seg, num_classes=42, spacing=spacing, convention="medpy",
                                    metrics=["hd95", "assd"])
    for lab in (1, 5, 20, 41):  # spleen, liver, a vertebra, costal cartilages
        p, t = pred == lab, seg == lab
        r = sdm.compute_surface_distances(t, p, spacing)
        _close(ours_dm["hd95"][:, lab - 1], sdm.compute_robust_hausdorff(r, 95), 1e-9)
        _close(ours_dm["nsd"][:, lab - 1], sdm.compute_surface_dice_at_tolerance(r, 3.0), 1e-9)
        _close(ours_mp["hd95"][:, lab - 1], medpy_binary.hd95(p, t, spacing), 1e-9)
        _close(ours_mp["assd"][:, lab - 1], medpy_binary.assd(p, t, spacing), 1e-9)


# -- empty masks per convention -----------------------------------------------------------------
def _cases():
    z = np.zeros((10, 9, 8), np.int64)
    o = z.copy()
    o[2:6, 3:7, 2:5] = 1
    return {"pred_empty": (z, o), "target_empty": (o, z), "both_empty": (z, z)}


@pytest.mark.parametrize("case", ["pred_empty", "target_empty", "both_empty"])
def test_monai_convention_empty_masks_equal_monai(case):
    p, t = _cases()[case]
    ref = _monai(p, t, None, tol=1.0)
    ours = S.segmentation_scores(p, t, num_classes=2, spatial_dims=3, convention="monai",
                                 metrics=["hausdorff", "hd95", "assd", "nsd", "dice"])
    for m in ours:
        _close(ours[m], ref[m])


@pytest.mark.parametrize("case", ["pred_empty", "target_empty", "both_empty"])
def test_deepmind_convention_empty_masks_equal_surface_distance(case):
    p, t = (x.astype(bool) for x in _cases()[case])
    r = sdm.compute_surface_distances(t, p, (1, 1, 1))
    ours = S.segmentation_scores(p.astype(np.int64), t.astype(np.int64), num_classes=2, spatial_dims=3,
                                 convention="deepmind", metrics=["hausdorff", "hd95", "nsd", "dice", "masd"])
    with np.errstate(invalid="ignore", divide="ignore"):
        _close(ours["hausdorff"], sdm.compute_robust_hausdorff(r, 100))
        _close(ours["hd95"], sdm.compute_robust_hausdorff(r, 95))
        _close(ours["nsd"], sdm.compute_surface_dice_at_tolerance(r, 1.0))
        _close(ours["dice"], sdm.compute_dice_coefficient(t, p))
        asd = sdm.compute_average_surface_distance(r)  # (gt -> pred, pred -> gt): (inf, nan) ...
        overlap = sdm.compute_surface_overlap_at_tolerance(r, 1.0)
    _close(ours["masd"], np.mean(asd))
    _check_deepmind_directed(p.astype(np.int64), t.astype(np.int64), (1, 1, 1), asd, overlap, 1.0)


def _check_deepmind_directed(p, t, spacing, asd, overlap, tol):
    """Our directed values, both ways round, are DeepMind's tuples as its code returns them."""
    kw = dict(num_classes=2, spatial_dims=p.ndim, spacing=spacing, convention="deepmind", directed=True)
    fwd = S.segmentation_scores(p, t, metrics=["assd", "masd", "nsd"], tolerance=tol, **kw)
    back = S.segmentation_scores(t, p, metrics=["assd", "masd", "nsd"], tolerance=tol, **kw)
    for m in ("assd", "masd"):
        _close(fwd[m], asd[1], 1e-9)
        _close(back[m], asd[0], 1e-9)
    _close(fwd["nsd"], overlap[1], 1e-9)
    _close(back["nsd"], overlap[0], 1e-9)


def test_deepmind_percentile_where_the_cumulative_area_ties_exactly():
    """Found by hypothesis: here half the surfel area ends exactly at the last point at 1.0 mm.
    DeepMind divides by the sum of the *sorted* areas; our sum over the unsorted ones rounded the
    other way and gave the next distance (2.5). Fixed by summing in DeepMind's order."""
    rng = np.random.default_rng(0)
    shape, spacing = (4, 7, 3), (0.5, 2.5, 1.0)
    p, t = ellipsoid(rng, shape), ellipsoid(rng, shape)
    r = sdm.compute_surface_distances(t, p, spacing)
    ours = S.segmentation_scores(p[None].astype(np.int64), t[None].astype(np.int64), num_classes=2,
                                 spacing=spacing, convention="deepmind", percentile=50,
                                 metrics=["hausdorff", "hd95"])
    _close(ours["hd95"], sdm.compute_robust_hausdorff(r, 50), 1e-9)
