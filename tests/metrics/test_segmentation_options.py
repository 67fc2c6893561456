"""No option is silently ignored: every segmentation metric (each registered stateful class, each
functional form, and ``segmentation_scores`` with each metric name) either uses an option — the
result changes — or refuses it with an error naming it.

The input is built so that every option changes something it applies to: an asymmetric,
diagonally shifted pair (``directed``, ``distance_metric``, ``percentile``, ``tolerance``), a class
the prediction misses (``empty_distance``) and unequal volumes (``relative``).
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest
import torch

from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics.seg_conventions import CONVENTIONS, OPTION_USERS, SEG_METRIC_NAMES
from medimg_bench.registry import METRICS, create_metric

#: a value other than the default for each option
OPTIONS = {
    "percentile": 50.0,
    "tolerance": 0.6,
    "directed": True,
    "empty_distance": 7.0,
    "relative": False,
    "distance_metric": "taxicab",
}
SPACING = (0.5, 0.6, 1.3)
FUNCTIONAL = {"dice": S.dice, "iou": S.iou, "precision": S.precision, "recall": S.recall,
              "volume_difference": S.volume_difference, "hausdorff": S.hausdorff_distance,
              "hd95": S.hd95, "assd": S.assd, "masd": S.masd, "nsd": S.nsd}


def _pair() -> tuple[np.ndarray, np.ndarray]:
    t = np.zeros((2, 14, 13, 11), np.int64)
    p = t.copy()
    t[:, 2:10, 3:11, 2:9] = 1
    p[:, 4:9, 4:9, 4:8] = 1  # smaller, off-centre: the two directions differ
    p[:, 9:11, 9:12, 3:5] = 1  # a diagonal bump
    t[:, 11:13, 1:4, 1:4] = 2  # missed by the prediction
    return p, t


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


def _refuses(err: Exception, option: str) -> bool:
    return option in str(err)


def _call_or_error(fn, option: str):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except (ValueError, TypeError) as err:
        assert _refuses(err, option), f"refused {option} without naming it: {err}"
        return None


@pytest.mark.parametrize("name", METRICS.list(tag="segmentation"))
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_registered_metric_uses_or_refuses_each_option(name, option):
    p, t = _pair()
    meta = [{"spacing": SPACING}] * 2

    def scores(**kw):
        m = create_metric(name, num_classes=3, **kw)
        m.update(torch.as_tensor(p), torch.as_tensor(t), meta, ids=["a", "b"])
        return m.metric_values() if hasattr(m, "metric_values") else {name: m.values()}

    got = _call_or_error(lambda: scores(**{option: OPTIONS[option]}), option)
    if got is None:
        return
    base = scores()
    changed = [k for k in got if not _same(got[k][1], base[k][1])]
    assert changed, f"{name} accepted {option}={OPTIONS[option]!r} and nothing changed"


@pytest.mark.parametrize("metric", SEG_METRIC_NAMES)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_functional_uses_or_refuses_each_option(metric, option):
    p, t = _pair()
    fn = FUNCTIONAL[metric]
    kw = dict(num_classes=3, spatial_dims=3)
    if "spacing" in inspect.signature(fn).parameters:
        kw["spacing"] = SPACING
    got = _call_or_error(lambda: fn(p, t, **kw, **{option: OPTIONS[option]}), option)
    if got is not None:
        assert not _same(got, fn(p, t, **kw)), f"{fn.__name__} ignored {option}"
    kw = dict(num_classes=3, spatial_dims=3, spacing=SPACING, metrics=[metric])
    got = _call_or_error(lambda: S.segmentation_scores(p, t, **kw, **{option: OPTIONS[option]})[metric],
                         option)
    if got is not None:
        base = S.segmentation_scores(p, t, **kw)[metric]
        assert not _same(got, base), f"segmentation_scores({metric!r}) ignored {option}"
    # the table of option users is what the code does
    assert (got is not None) == (metric in OPTION_USERS[option])


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_empty_distance_only_where_the_convention_uses_it(convention):
    if CONVENTIONS[convention].surface == "surfel":
        pytest.importorskip("surface_distance")
    p, t = _pair()
    kw = dict(num_classes=3, spacing=SPACING, convention=convention, metrics=["hd95", "assd"])
    if convention in ("default", "brats"):
        out = S.segmentation_scores(p, t, empty_distance=7.0, **kw)
        assert (out["hd95"][:, 1] == 7.0).all()
    else:
        with pytest.raises(ValueError, match=f"empty_distance=7.0 is not used by convention '{convention}'"):
            S.segmentation_scores(p, t, empty_distance=7.0, **kw)
        with pytest.raises(ValueError, match="empty_distance"):
            create_metric("hd95", num_classes=3, convention=convention, empty_distance=7.0)


def test_option_errors_name_the_option_and_its_users():
    p, t = _pair()
    with pytest.raises(ValueError, match=r"option directed=True is not used by metric\(s\) \['dice'\]"):
        S.segmentation_scores(p, t, metrics=("dice",), directed=True, num_classes=3)
    with pytest.raises(ValueError, match=r"tolerance=2.0 is not used .*\['hd95'\].*applies to \['nsd'\]"):
        S.segmentation_scores(p, t, metrics=("hd95",), tolerance=2.0, num_classes=3)
    with pytest.raises(ValueError, match="dice: option percentile=90"):
        create_metric("dice", num_classes=3, percentile=90)
    # an option read by one of several metrics is fine
    S.segmentation_scores(p, t, metrics=("dice", "nsd"), tolerance=2.0, num_classes=3, spatial_dims=3)
    with pytest.raises(ValueError, match="tolerance: 3 values for 2 scored classes"):
        S.nsd(p, t, num_classes=3, spatial_dims=3, tolerance=[1, 2, 3])
    with pytest.raises(ValueError, match="percentile must be in"):
        S.hd95(p, t, num_classes=3, spatial_dims=3, percentile=101)


def test_directed_nsd_is_the_prediction_side_surface_overlap():
    """``nsd(directed=True)`` = share of the prediction's surface within the tolerance; with the
    masks swapped, the target's; their area-weighted mean is the symmetric NSD."""
    p, t = _pair()
    kw = dict(num_classes=3, spatial_dims=3, spacing=SPACING, tolerance=1.1)
    fwd, back = S.nsd(p, t, directed=True, **kw), S.nsd(t, p, directed=True, **kw)
    both = S.nsd(p, t, **kw)
    from medimg_bench.metrics._surface import class_surface_distances

    sd = class_surface_distances(p[0] == 1, t[0] == 1, SPACING, "edge")
    n_p, n_t = len(sd.d_pred_to_target), len(sd.d_target_to_pred)
    assert fwd[0, 0].item() == np.mean(sd.d_pred_to_target <= 1.1)
    assert back[0, 0].item() == np.mean(sd.d_target_to_pred <= 1.1)
    assert both[0, 0].item() == pytest.approx((fwd[0, 0] * n_p + back[0, 0] * n_t).item() / (n_p + n_t))
    assert fwd[0, 0] != back[0, 0]
    assert math.isclose(fwd[0, 1].item(), 0.0)  # default: a missed class scores 0 either way
