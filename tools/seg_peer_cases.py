"""Write ``tests/metrics/data/peer_cases/{monai,deepmind,medpy,metrics_reloaded,
metrics_reloaded_00219d0}.json``: the segmentation-metric cases of the peer libraries' own unit
tests, transcribed by hand (their inputs and expected values), each with the file, commit and
test it comes from and the convention and options it maps to.

The peer test files read (``git show <commit>:<path>`` of the GitHub repositories):

* Project-MONAI/MONAI @ d388d1c6fec8 (2025-06-13): ``tests/metrics/test_hausdorff_distance.py``,
  ``test_surface_distance.py``, ``test_surface_dice.py``, ``test_compute_meandice.py``,
  ``test_compute_meaniou.py``;
* google-deepmind/surface-distance @ 1f805cea4468 (2024-12-14): ``surface_distance_test.py``;
* loli/medpy @ d6abf41066cc (2024-07-23, release 0.5.2): ``tests/metric_/binary.py``;
* Project-MONAI/MetricsReloaded @ cb38dfc0a5ed (main, 2025-06-02):
  ``test/test_metrics/test_pairwise_measures.py``;
* Project-MONAI/MetricsReloaded @ 00219d05d09e (2024-06-06, reachable only from pull-request
  refs): ``test/test_metrics/test_pairwise_measures.py`` and
  ``test/test_metrics/test_pairwise_measures_neuropoly.py``.

Expected values are the numbers written in those files (or, where a test computes its expectation
from hand-written arrays or a formula, the same arithmetic done here: DeepMind's two-squares test
evaluates its expected surfel arrays with ``surface_distance``'s own functions, which must be
installed). This script contains no peer code.

Re-run: ``python tools/seg_peer_cases.py`` (writes the five files; the test
``tests/metrics/test_segmentation_peer_cases.py`` reads them).
"""

from __future__ import annotations

import json
import math
from itertools import product
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "metrics" / "data" / "peer_cases"
NAN, INF = math.nan, math.inf

MONAI = {"repo": "Project-MONAI/MONAI", "commit": "d388d1c6fec8cb3a0eebee5b5a0b9776ca59ca83"}
DEEPMIND = {"repo": "google-deepmind/surface-distance",
            "commit": "1f805cea446805e559badc80dd27f34175e4173d", "path": "surface_distance_test.py"}
MEDPY = {"repo": "loli/medpy", "commit": "d6abf41066cce75c84215a237a0be208e8294760",
         "path": "tests/metric_/binary.py"}
MR_MAIN = {"repo": "Project-MONAI/MetricsReloaded",
           "commit": "cb38dfc0a5ed4fa3bdc559e4960b6e2b93c3b967",
           "path": "test/test_metrics/test_pairwise_measures.py"}
MR_OLD = {"repo": "Project-MONAI/MetricsReloaded",
          "commit": "00219d05d09edb2ef5f9d453bd69f0f9fb318cd3",
          "path": "test/test_metrics/test_pairwise_measures.py"}
MR_OLD_NP = {**MR_OLD, "path": "test/test_metrics/test_pairwise_measures_neuropoly.py"}


# -- mask recipes (see tests/metrics/_peer_cases.py) ------------------------------------------------
def zeros(shape, *parts, value=1):
    """Zeros with boxes set; a part is a box ``[[start, stop], ...]`` (set to ``value``) or a
    ``(box, value)`` tuple."""
    fill = []
    for p in parts:
        box, v = p if isinstance(p, tuple) else (p, value)
        fill.append({"box": [list(b) for b in box], "value": v})
    return {"zeros": list(shape), "fill": fill}


def runs(*pairs, as_2d=True):
    spec = {"runs": [list(p) for p in pairs]}
    if as_2d:
        spec["as_2d"] = "column"
    return spec


def arr(a, as_2d=False):
    spec = {"array": np.asarray(a).tolist()}
    if as_2d:
        spec["as_2d"] = "column"
    return spec


def sphere(radius=20.0, centre=(49, 49, 49), shape=(99, 99, 99), spacing=(1.0, 1.0, 1.0)):
    return {"sphere": {"radius": float(radius), "centre": list(centre), "shape": list(shape),
                       "spacing": list(spacing)}}


def enc(x):
    """JSON-safe numbers: NaN / inf as strings."""
    if isinstance(x, dict):
        return {k: enc(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [enc(v) for v in x]
    if isinstance(x, np.ndarray):
        return enc(x.tolist())
    if isinstance(x, float | np.floating):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return float(x)
    return x


def case(cid, source, convention, pred, target, call, expected=None, tol=(0.0, 0.0), **extra):
    """One case: ``call`` = {"metric", "options", optional "swap", "post"}; ``tol`` = (rtol, atol)."""
    c = {"id": cid, "source": source, "convention": convention, "pred": pred, "target": target,
         "call": call, "tol": {"rtol": tol[0], "atol": tol[1]}}
    if expected is not None:
        c["expected"] = expected
    c.update(extra)
    return c


def call(metric, swap=False, post=None, **options):
    c = {"metric": metric, "options": options}
    if swap:
        c["swap"] = True
    if post:
        c["post"] = post
    return c


# -- MONAI --------------------------------------------------------------------------------------------
TS = (0.85, 1.2, 0.9)
Z99 = zeros((99, 99, 99))


def monai_hausdorff() -> list[dict]:
    src = {**MONAI, "path": "tests/metrics/test_hausdorff_distance.py", "test": "TestHausdorffDistance"}
    cases_in = [
        (sphere(), sphere(), None, None, [0, 0, 0, 0, 0, 0]),
        (sphere(20, (20, 20, 20)), sphere(20, (19, 19, 19)), None, None,
         [1.7320508075688772, 1.7320508075688772, 1, 1, 3, 3]),
        (sphere(33, (19, 33, 22)), sphere(33, (20, 33, 22)), None, None, [1, 1, 1, 1, 1, 1]),
        (sphere(20, (20, 33, 22)), sphere(40, (20, 33, 22)), None, None,
         [20.09975124224178, 20.223748416156685, 15, 20, 24, 35]),
        (Z99, sphere(40, (20, 33, 22)), None, None, [INF] * 6),
        (sphere(), Z99, None, None, [INF] * 6),
        (sphere(20, (20, 33, 22)), sphere(40, (20, 33, 22)), None, 95,
         [19.924858845171276, 20.09975124224178, 14, 18, 22, 33]),
        (sphere(20, (20, 20, 20), spacing=TS), sphere(20, (19, 19, 19), spacing=TS), TS, None,
         [2.0808651447296143, 2.2671568, 2, 2, 3, 4]),
        (sphere(15, (20, 33, 22), spacing=TS), sphere(30, (20, 33, 22), spacing=TS), TS, None,
         [15.439640998840332, 15.62594, 11, 17, 20, 28]),
    ]
    out = []
    for k, (p, t, sp, pct, expected) in enumerate(cases_in):
        for i, (metric, directed) in enumerate(product(["euclidean", "chessboard", "taxicab"], [True, False])):
            opts = {"num_classes": 2, "spatial_dims": 3, "distance_metric": metric}
            if sp is not None:
                opts["spacing"] = list(sp)
            if pct is not None:
                opts["percentile"] = pct
            if directed:
                opts["directed"] = True
            out.append(case(
                f"monai/hausdorff/TEST_CASES[{k}]/{metric}/directed={directed}",
                {**src, "case": f"TEST_CASES[{k}], distance_metric={metric!r}, directed={directed}"},
                "monai", p, t, call("hausdorff", **opts), expected[i], (1e-6, 0.0),
                note="MONAI repeats the mask over a (2, 3) batch and class stack and averages the "
                     "identical values; scored once here."))
    for k, sp in enumerate([None, TS]):
        opts = {"num_classes": 2, "spatial_dims": 3}
        if sp is not None:
            opts["spacing"] = list(sp)
        out.append(case(
            f"monai/hausdorff/TEST_CASES_NANS[{k}]",
            {**src, "case": f"TEST_CASES_NANS[{k}] (test_nans)"}, "monai", Z99, Z99,
            call("hausdorff", **opts), 0.0, (1e-7, 0.0),
            reduce="mean", expected_not_nans=0.0))
    return out


def monai_surface_distance() -> list[dict]:
    src = {**MONAI, "path": "tests/metrics/test_surface_distance.py", "test": "TestAllSurfaceMetrics"}
    cases_in = [
        (sphere(), sphere(), "euclidean", None, [0, 0]),
        (sphere(20, (20, 20, 20)), sphere(20, (19, 19, 19)), "taxicab", None,
         [1.0380029806259314, 1.0380029806259314]),
        (sphere(33, (19, 33, 22)), sphere(33, (20, 33, 22)), "euclidean", None, [0.350217, 0.3483278807706289]),
        (sphere(20, (20, 33, 22)), sphere(40, (20, 33, 22)), "euclidean", None, [15.117741, 12.040033513150455]),
        (sphere(20, (20, 33, 22)), sphere(40, (20, 33, 22)), "chessboard", None, [11.492719, 9.605067064083457]),
        (sphere(20, (20, 33, 22)), sphere(40, (20, 33, 22)), "taxicab", None, [20.214613, 12.432687531048186]),
        (Z99, sphere(40, (20, 33, 22)), "euclidean", None, [INF, INF]),
        (sphere(), Z99, "taxicab", None, [INF, INF]),
        (sphere(33, (42, 45, 52), spacing=TS), sphere(33, (43, 45, 52), spacing=TS), "euclidean", TS,
         [0.4951, 0.4951]),
    ]
    out = []
    for k, (p, t, metric, sp, expected) in enumerate(cases_in):
        for i, symmetric in enumerate([True, False]):
            opts = {"num_classes": 2, "spatial_dims": 3, "distance_metric": metric}
            if sp is not None:
                opts["spacing"] = list(sp)
            if not symmetric:
                opts["directed"] = True
            out.append(case(
                f"monai/surface_distance/TEST_CASES[{k}]/symmetric={symmetric}",
                {**src, "case": f"TEST_CASES[{k}], symmetric={symmetric}"}, "monai", p, t,
                call("assd", **opts), expected[i], (1e-5, 0.0),
                note="MONAI's symmetric ASD concatenates both directions (our pooled assd)."))
    for k, sp in enumerate([None, TS]):
        opts = {"num_classes": 2, "spatial_dims": 3}
        if sp is not None:
            opts["spacing"] = list(sp)
        out.append(case(
            f"monai/surface_distance/TEST_CASES_NANS[{k}]",
            {**src, "case": f"TEST_CASES_NANS[{k}] (test_nans)"}, "monai", Z99, Z99,
            call("assd", **opts), 0.0, (1e-5, 0.0), reduce="mean", expected_not_nans=0.0))
    return out


def _nsd_rel(cid, src, p, t, opts, calls_tol, op, select=None):
    """A relation between several NSD calls that differ only in ``tolerance``."""
    calls = [call("nsd", **{**opts, "tolerance": tl}) for tl in calls_tol]
    return case(cid, src, "monai", p, t, calls[0], relation={"op": op, "calls": calls, "select": select})


SURFACE_DICE = "tests/metrics/test_surface_dice.py"


def monai_surface_dice() -> list[dict]:
    return (_surface_dice_half_planes() + _surface_dice_all_distances() + _surface_dice_asserts()
            + _surface_dice_not_present() + _surface_dice_subvoxel())


def _surface_dice_half_planes() -> list[dict]:
    """Half planes / half volumes shifted by 10 voxels (label maps; MONAI one-hot encodes them)."""
    path, out = SURFACE_DICE, []
    p2 = zeros((2, 480, 640), [[0, 1], [None, None], [50, None]])
    t2 = zeros((2, 480, 640), [[0, 1], [None, None], [60, None]])
    exp2 = [[1 - (478 + 480 + 9 * 2) / (480 * 4 + 48 * 2 + 58 * 2),
             1 - (478 + 480 + 9 * 2) / (480 * 4 + 588 * 2 + 578 * 2)], [1.0, NAN]]
    p3 = zeros((2, 200, 110, 80), [[0, 1], [None, None], [None, None], [20, None]])
    t3 = zeros((2, 200, 110, 80), [[0, 1], [None, None], [None, None], [30, None]])
    num = 200 * 110 + 198 * 108 + 9 * 200 * 2 + 9 * 108 * 2
    exp3 = [[1 - num / (200 * 110 * 4 + (28 + 18) * 200 * 2 + (28 + 18) * 108 * 2),
             1 - num / (200 * 110 * 4 + (58 + 48) * 200 * 2 + (58 + 48) * 108 * 2)], [1.0, NAN]]
    variants = [
        ("test_tolerance_euclidean_distance_with_spacing", p2, t2, exp2, [0.85, 1.2], [0, 1, 9, 10, 11], (12, 13), 2),
        ("test_tolerance_euclidean_distance", p2, t2, exp2, None, [0, 1, 9, 10], (10, 11), 2),
        ("test_tolerance_euclidean_distance_3d", p3, t3, exp3, None, [0, 1, 10], (10, 11), 3),
    ]
    for test, p, t, exp, sp, chain, same, nd in variants:
        src = {**MONAI, "path": path, "test": f"TestAllSurfaceDiceMetrics.{test}"}
        opts = {"num_classes": 2, "include_background": True, "spatial_dims": nd}
        if sp is not None:
            opts["spacing"] = sp
        zero = call("nsd", **{**opts, "tolerance": [0, 0]})
        out.append(case(f"monai/surface_dice/{test}/res0", {**src, "case": "expected_res0"}, "monai",
                        p, t, zero, exp, (1e-7, 0.0)))
        out.append(case(f"monai/surface_dice/{test}/agg0", {**src, "case": "agg0 and not_nans"}, "monai",
                        p, t, zero, float(np.nanmean(np.nanmean(np.asarray(exp), axis=1), axis=0)),
                        (1e-7, 0.0), reduce="mean", expected_not_nans=2.0))
        for c in (0, 1):
            out.append(_nsd_rel(f"monai/surface_dice/{test}/increasing[0,{c}]",
                                {**src, "case": f"res{chain[0]}[0, {c}] < ... < res{chain[-1]}[0, {c}]"},
                                p, t, opts, [[v, v] for v in chain], "increasing", [0, c]))
        out.append(_nsd_rel(f"monai/surface_dice/{test}/equal", {**src, "case": f"res{same[0]} == res{same[1]}"},
                            p, t, opts, [[v, v] for v in same], "equal"))
        if sp is not None:
            no_sp = {k: v for k, v in opts.items() if k != "spacing"}
            out.append(case(f"monai/surface_dice/{test}/spacing_irrelevant_at_0",
                            {**src, "case": "res0 (spacing) == res0_nans (no spacing)"}, "monai", p, t, zero,
                            relation={"op": "equal", "calls": [zero, call("nsd", **{**no_sp, "tolerance": [0, 0]})],
                                      "select": None}))
    return out


def _surface_dice_all_distances() -> list[dict]:
    """All three distance metrics, one threshold per class (background included)."""
    out = []
    src = {**MONAI, "path": SURFACE_DICE, "test": "TestAllSurfaceDiceMetrics.test_tolerance_all_distances"}
    p = zeros((1, 10, 10), [[0, 1], [1, 4], [1, 2]])
    t = zeros((1, 10, 10), [[0, 1], [5, 8], [6, 7]])
    table = [
        ("euclidean", [0, 0], [[1 - (8 + 4) / (36 * 2 + 8 + 4), 0]]),
        ("euclidean", [2.8, 5.5], [[1 - 3 / (36 * 2 + 8 + 4), 1 - (2 + 2) / (3 + 3)]]),
        ("euclidean", [3, 6], [[1 - 1 / (36 * 2 + 8 + 4), 1 - 2 / (3 + 3)]]),
        ("chessboard", [0, 0], [[1 - (8 + 4) / (36 * 2 + 8 + 4), 0]]),
        ("chessboard", [1, 4.999], [[1 - (7 + 2) / (36 * 2 + 8 + 4), 0]]),
        ("chessboard", [2, 5], [[1 - 3 / (36 * 2 + 8 + 4), 1]]),
        ("taxicab", [0, 0], [[1 - (8 + 4) / (36 * 2 + 8 + 4), 0]]),
        ("taxicab", [1, 7], [[1 - (7 + 2) / (36 * 2 + 8 + 4), 1 - (2 + 2) / (3 + 3)]]),
        ("taxicab", [3, 9], [[1 - 1 / (36 * 2 + 8 + 4), 1]]),
    ]
    for metric, thr, exp in table:
        opts = {"num_classes": 2, "include_background": True, "spatial_dims": 2, "tolerance": thr}
        if metric != "euclidean":
            opts["distance_metric"] = metric
        out.append(case(f"monai/surface_dice/all_distances/{metric}/{thr}", {**src, "case": f"{metric}, class_thresholds={thr}"},
                        "monai", p, t, call("nsd", **opts), exp, (0.0, 1.5e-6)))
    return out


def _surface_dice_asserts() -> list[dict]:
    """Input checks that must refuse."""
    out = []
    src = {**MONAI, "path": SURFACE_DICE, "test": "TestAllSurfaceDiceMetrics.test_asserts"}
    p = zeros((1, 80, 80), [[0, 1], [10, 20], [10, 20]])
    t = zeros((1, 80, 80), [[0, 1], [20, 30], [20, 30]])
    base = {"num_classes": 2, "include_background": True, "spatial_dims": 2}
    bad_t = zeros((1, 80, 50), [[0, 1], [20, 30], [20, 30]])
    out.append(case("monai/surface_dice/asserts/shape_mismatch", {**src, "case": "y_pred and y should have same shape"},
                    "monai", p, bad_t, call("nsd", **{**base, "tolerance": [1, 1]}), expect_error=True))
    for name, thr in [("count", [1, 1, 1]), ("inf", [INF, 1]), ("nan", [NAN, 1]), ("negative", [-0.22, 1])]:
        out.append(case(f"monai/surface_dice/asserts/thresholds_{name}", {**src, "case": f"class_thresholds={thr}"},
                        "monai", p, t, call("nsd", **{**base, "tolerance": thr}), expect_error=True))
    return out


def _surface_dice_not_present() -> list[dict]:
    """A class present in the labels only, one in neither."""
    out = []
    src = {**MONAI, "path": SURFACE_DICE, "test": "TestAllSurfaceDiceMetrics.test_not_predicted_not_present"}
    p = zeros((1, 80, 80), [[0, 1], [10, 20], [10, 20]])
    t = zeros((1, 80, 80), ([[0, 1], [10, 20], [10, 20]], 2))
    for bg, thr, exp, agg in [(True, [1, 1, 1, 1], [[1, 0, 0, NAN]], 1 / 3), (False, [1, 1, 1], [[0, 0, NAN]], 0.0)]:
        opts = {"num_classes": 4, "include_background": bg, "spatial_dims": 2, "tolerance": thr}
        out.append(case(f"monai/surface_dice/not_present/include_background={bg}", {**src, "case": "per-class"},
                        "monai", p, t, call("nsd", **opts), exp))
        out.append(case(f"monai/surface_dice/not_present/include_background={bg}/aggregate",
                        {**src, "case": "aggregate(reduction='mean')"}, "monai", p, t, call("nsd", **opts), agg,
                        (1e-7, 1e-7), reduce="mean"))
    empty = {"stack": [{"zeros": [3, 1, 1]}] * 2}
    opts = {"one_hot": True, "include_background": True, "tolerance": [1, 1, 1]}
    out.append(case("monai/surface_dice/not_present/empty_1x1", {**src, "case": "predictions_empty"},
                    "monai", empty, empty, call("nsd", **opts), [[NAN] * 3] * 2))
    out.append(case("monai/surface_dice/not_present/empty_1x1/aggregate", {**src, "case": "predictions_empty aggregate"},
                    "monai", empty, empty, call("nsd", **opts), 0.0, reduce="mean", expected_not_nans=0.0))
    return out


def _surface_dice_subvoxel() -> list[dict]:
    """MONAI's use_subvoxels=True is DeepMind's surfel surface dice."""
    out = []
    src = {**MONAI, "path": SURFACE_DICE, "test": "TestAllSurfaceDiceMetrics.test_compute_surface_dice_subvoxel"}
    sub = {"num_classes": 2, "spatial_dims": 3, "spacing": [3, 2, 1], "tolerance": 1.0}
    one = zeros((128, 128, 128), [[50, 51], [60, 61], [70, 71]])
    other = zeros((128, 128, 128), [[50, 51], [60, 61], [72, 73]])
    z128 = zeros((128, 128, 128))
    note = "MONAI's use_subvoxels=True computes DeepMind's surfel areas: convention 'deepmind'"
    for k, (pp, tt, exp) in enumerate([(z128, one, 0.0), (other, z128, 0.0), (other, one, 0.5)]):
        out.append(case(f"monai/surface_dice/subvoxel/{k}", {**src, "case": f"assert {k + 1}"}, "deepmind",
                        pp, tt, call("nsd", **sub), exp, (1e-7, 0.0), note=note))
    cube_t = zeros((100, 100, 100), [[0, 50], [None, None], [None, None]])
    cube_p = zeros((100, 100, 100), [[0, 51], [None, None], [None, None]])
    out.append(case("monai/surface_dice/subvoxel/cubes", {**src, "case": "cubes, spacing (2, 1, 1)"}, "deepmind",
                    cube_p, cube_t, call("nsd", **{**sub, "spacing": [2, 1, 1]}), 0.836145, (1e-3, 1e-3), note=note))
    return out


def _monai_overlap(metric: str, path: str, cls: str, cases: dict) -> list[dict]:
    out = []
    src = {**MONAI, "path": path}
    fn = f"compute_{'dice' if metric == 'dice' else 'iou'}"
    for name, tests in [("test_value", ["1", "2", "9"]), ("test_value_class", ["1", "2", "10"])]:
        for k in tests:
            inp, exp = cases[k]
            bg = inp.get("include_background", True)
            out.append(case(f"monai/{metric}/{name}/TEST_CASE_{k}",
                            {**src, "test": f"{cls}.{name}", "case": f"TEST_CASE_{k} ({fn} / metric class, reduction none)"},
                            "monai", inp["y_pred"], inp["y"],
                            call(metric, one_hot=True, include_background=bg), exp, (0.0, 1e-4)))
    for k in ("11", "12"):  # ignore_empty=False: our convention monai_ignore_empty_false
        inp, exp = cases[k]
        out.append(case(f"monai/{metric}/test_value/TEST_CASE_{k}",
                        {**src, "test": f"{cls}.test_value", "case": f"TEST_CASE_{k} ({fn}, ignore_empty=False)"},
                        "monai_ignore_empty_false", inp["y_pred"], inp["y"],
                        call(metric, one_hot=True, include_background=True), exp, (0.0, 1e-4)))
    inp, isnan = cases["3"]
    out.append(case(f"monai/{metric}/test_nans/TEST_CASE_3", {**src, "test": f"{cls}.test_nans", "case": "TEST_CASE_3"},
                    "monai", inp["y_pred"], inp["y"], call(metric, one_hot=True, include_background=True),
                    expected_isnan=isnan))
    for k in cases["nans_class"]:
        params, inp, exp = cases[k]
        post = None
        if isinstance(exp, dict):  # return_with_label: values rounded to 4 decimals, compared exactly
            exp, post = list(exp.values()), "round4"
        out.append(case(f"monai/{metric}/test_nans_class/TEST_CASE_{k}",
                        {**src, "test": f"{cls}.test_nans_class", "case": f"TEST_CASE_{k} ({params['reduction']})"},
                        "monai", inp["y_pred"], inp["y"],
                        call(metric, one_hot=True, include_background=params["include_background"], post=post),
                        exp, (0.0, 0.0 if post else 1e-4), reduce=params["reduction"]))
    return out


def _oh(a):
    return arr(np.asarray(a, dtype=np.int64))


def monai_dice_iou() -> list[dict]:
    y_pred2 = _oh([[[[0, 1], [0, 0]], [[0, 0], [1, 1]], [[1, 0], [0, 0]]],
                   [[[0, 0], [0, 1]], [[1, 0], [0, 0]], [[0, 1], [1, 0]]]])
    y2 = _oh([[[[0, 0], [0, 1]], [[1, 0], [1, 0]], [[0, 1], [0, 0]]],
              [[[0, 0], [0, 1]], [[1, 1], [0, 0]], [[0, 0], [1, 0]]]])
    y_pred3 = _oh([[[[0, 0], [0, 0]], [[0, 0], [0, 0]], [[1, 1], [1, 1]]],
                   [[[0, 0], [0, 0]], [[0, 0], [0, 0]], [[1, 1], [1, 1]]]])
    y3 = _oh([[[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
              [[[0, 1], [1, 0]], [[1, 0], [0, 1]], [[0, 0], [0, 0]]]])
    y_pred4 = _oh([[[[1, 1], [1, 0]], [[0, 1], [0, 0]], [[0, 1], [1, 1]]],
                   [[[1, 0], [1, 1]], [[0, 1], [1, 1]], [[0, 1], [1, 0]]]])
    y4 = _oh([[[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
              [[[0, 0], [0, 1]], [[1, 1], [0, 0]], [[0, 0], [1, 0]]]])
    y6 = _oh([[[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]],
              [[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[0, 0], [0, 0]]]])
    ones = _oh(np.ones((2, 2, 3, 3)))
    zeros = _oh(np.zeros((2, 2, 3, 3)))
    common = {
        "1": ({"y_pred": _oh([[[[1, 0], [0, 1]]]]), "y": _oh([[[[1, 0], [1, 1]]]]), "include_background": True}, None),
        "2": ({"y_pred": y_pred2, "y": y2, "include_background": False}, None),
        "3": ({"y_pred": y_pred3, "y": y3}, [[False, True, True], [False, False, True]]),
        "9": ({"y_pred": ones, "y": ones}, [[1.0, 1.0], [1.0, 1.0]]),
        "10": ({"y_pred": ones, "y": ones}, [[1.0, 1.0], [1.0, 1.0]]),
        "11": ({"y_pred": zeros, "y": zeros}, [[1.0, 1.0], [1.0, 1.0]]),
        "12": ({"y_pred": ones, "y": zeros}, [[0.0, 0.0], [0.0, 0.0]]),
    }

    def nans_class(bg, red, pred, y, exp):
        return ({"include_background": bg, "reduction": red}, {"y_pred": pred, "y": y}, exp)

    dice = dict(common)
    dice["1"] = (common["1"][0], [[0.8]])
    dice["2"] = (common["2"][0], [[0.5, 0.0], [0.6667, 0.6667]])
    dice.update({
        "4": nans_class(True, "mean_batch", y_pred4, y4, [0.6786, 0.4000, 0.6667]),
        "5": nans_class(True, "mean", y_pred4, y4, 0.689683),
        "6": nans_class(True, "sum_batch", y_pred4, y6, [1.7143, 0.0, 0.0]),
        "7": nans_class(True, "mean", y_pred4, y6, 0.857143),
        "8": nans_class(False, "sum_batch", y_pred4, y6, [0.0, 0.0]),
        "13": nans_class(True, "mean_batch", y_pred4, y4, {"bg": 0.6786, "fg0": 0.4000, "fg1": 0.6667}),
        "14": nans_class(True, "mean_batch", y_pred4, y4, {"label_0": 0.6786, "label_1": 0.4000, "label_2": 0.6667}),
        "15": nans_class(False, "mean_batch", y_pred4, y4, {"label_1": 0.4000, "label_2": 0.6667}),
        "nans_class": ["4", "5", "6", "7", "8", "13", "14", "15"],
    })
    iou = dict(common)
    iou["1"] = (common["1"][0], [[0.6667]])
    iou["2"] = (common["2"][0], [[0.3333, 0.0], [0.5, 0.5]])
    iou.update({
        "4": nans_class(True, "mean_batch", y_pred4, y4, [0.5416, 0.2500, 0.5000]),
        "5": nans_class(True, "mean", y_pred4, y4, 0.5555),
        "6": nans_class(True, "sum_batch", y_pred4, y6, [1.5000, 0.0, 0.0]),
        "7": nans_class(True, "mean", y_pred4, y6, 0.7500),
        "8": nans_class(False, "sum_batch", y_pred4, y6, [0.0, 0.0]),
        "nans_class": ["4", "5", "6", "7", "8"],
    })
    return (_monai_overlap("dice", "tests/metrics/test_compute_meandice.py", "TestComputeMeanDice", dice)
            + _monai_overlap("iou", "tests/metrics/test_compute_meaniou.py", "TestComputeMeanIoU", iou))


MONAI_NOT_APPLICABLE = [
    {"path": "tests/metrics/test_compute_meandice.py", "case": "test_helper",
     "reason": "DiceHelper thresholds / arg-maxes probabilities; our metrics take label maps"},
    {"path": "tests/metrics/test_surface_dice.py", "case": "test_asserts: tensor type and one-hot layout",
     "reason": "MONAI refuses NumPy input and label maps; both are valid input here"},
]


# -- DeepMind surface-distance -----------------------------------------------------------------------
def _dm_metrics(test, gt, pred, spacing, exp, nd) -> list[dict]:
    """The eight checks of DeepMind's ``_assert_metrics`` for one (gt, pred) pair."""
    src = {**DEEPMIND, "test": test}
    opts = {"num_classes": 2, "spatial_dims": nd, "spacing": list(spacing)}
    tol = (0.0, 5e-4)  # assertAlmostEqual(places=3)
    checks = [
        ("average_surface_distance[0] (gt->pred)", call("assd", swap=True, directed=True, **opts), exp["asd"][0]),
        ("average_surface_distance[1] (pred->gt)", call("assd", directed=True, **opts), exp["asd"][1]),
        ("robust_hausdorff(100)", call("hausdorff", **opts), exp["hd100"]),
        ("robust_hausdorff(95)", call("hd95", **opts), exp["hd95"]),
        ("surface_overlap_at_1mm[0] (gt)", call("nsd", swap=True, directed=True, tolerance=1.0, **opts), exp["overlap"][0]),
        ("surface_overlap_at_1mm[1] (pred)", call("nsd", directed=True, tolerance=1.0, **opts), exp["overlap"][1]),
        ("surface_dice_at_1mm", call("nsd", tolerance=1.0, **opts), exp["surface_dice"]),
        ("volumetric_dice", call("dice", num_classes=2, spatial_dims=nd), exp["dice"]),
    ]
    return [case(f"deepmind/{test}/{what.split(' ')[0]}", {**src, "case": what}, "deepmind", pred, gt, c, e, tol)
            for what, c, e in checks]


def deepmind() -> list[dict]:
    import surface_distance as sd

    out = []
    src = {**DEEPMIND}
    for k, (g, p, s) in enumerate([((2, 2, 2), (2, 2), [1, 1]), ((2, 2), (2, 2, 2), [1, 1]), ((2, 2), (2, 2), [1, 1, 1])]):
        out.append(case(f"deepmind/raises_on_incompatible_shapes/{k}",
                        {**src, "test": "SurfaceDistanceTest.test_compute_surface_distances_raises_on_incompatible_shapes",
                         "case": f"parameters[{k}]"}, "deepmind", zeros(p), zeros(g),
                        call("hausdorff", num_classes=2, spacing=s), expect_error=True))
    for k, (shape, s) in enumerate([((2,), [1]), ((2, 2, 2, 2), [1, 1, 1, 1])]):
        out.append(case(f"deepmind/raises_on_invalid_shapes/{k}",
                        {**src, "test": "SurfaceDistanceTest.test_compute_surface_distances_raises_on_invalid_shapes",
                         "case": f"parameters[{k}]"}, "deepmind", zeros(shape), zeros(shape),
                        call("hausdorff", num_classes=2, spacing=s), expect_error=True))
    # 2-D: two pixels 2 mm apart
    diag = 0.5 * math.sqrt(2**2 + 1**2)
    gt = zeros((128, 128), [[50, 51], [70, 71]])
    pr = zeros((128, 128), [[50, 51], [72, 73]])
    t2 = "SurfaceDistance2DTest"
    out.append(case("deepmind/2D.test_on_2_pixels_2mm_away/surfels", {**src, "test": f"{t2}.test_on_2_pixels_2mm_away",
                                                                      "case": "surface_distances dict"},
                    "deepmind", pr, gt, call("surfels", spacing=[2, 1]),
                    {"surfel_areas_gt": [diag] * 4, "surfel_areas_pred": [diag] * 4,
                     "distances_gt_to_pred": [1.0, 1.0, 2.0, 2.0], "distances_pred_to_gt": [1.0, 1.0, 2.0, 2.0]}))
    two_px = {"asd": (1.5, 1.5), "hd100": 2.0, "hd95": 2.0, "overlap": (0.5, 0.5), "surface_dice": 0.5, "dice": 0.0}
    out += _dm_metrics(f"{t2}.test_on_2_pixels_2mm_away", gt, pr, (2, 1), two_px, 2)
    # 2-D: two squares shifted by one pixel; the expectation evaluates hand-written arrays
    gt = zeros((6, 6), [[1, 3], [1, 3]])
    pr = zeros((6, 6), [[1, 4], [1, 3]])
    v, h = 2, 1
    dg = 0.5 * math.sqrt(h**2 + v**2)
    a_gt = np.asarray([dg, h, dg, v, dg, h, dg, v])
    a_pr = np.asarray([dg, h, dg, v, v, dg, h, dg, v, v])
    d_gp = np.asarray([0] * 5 + [h] + [0] * 2, dtype=float)
    d_pg = np.asarray([0] * 5 + [v] * 3 + [0] * 2, dtype=float)
    o_gp, o_pg = np.lexsort((a_gt, d_gp)), np.lexsort((a_pr, d_pg))  # DeepMind's _sort_distances_surfels
    expected = {"distances_gt_to_pred": d_gp[o_gp], "surfel_areas_gt": a_gt[o_gp],
                "distances_pred_to_gt": d_pg[o_pg], "surfel_areas_pred": a_pr[o_pg]}
    out.append(case("deepmind/2D.test_two_squares_shifted_by_one_pixel/surfels",
                    {**src, "test": f"{t2}.test_two_squares_shifted_by_one_pixel", "case": "surface_distances dict"},
                    "deepmind", pr, gt, call("surfels", spacing=[v, h]), {k: x.tolist() for k, x in expected.items()}))
    squares = {"asd": sd.compute_average_surface_distance(expected),
               "hd100": sd.compute_robust_hausdorff(expected, 100), "hd95": sd.compute_robust_hausdorff(expected, 95),
               "overlap": sd.compute_surface_overlap_at_tolerance(expected, 1),
               "surface_dice": sd.compute_surface_dice_at_tolerance(expected, 1),
               "dice": sd.compute_dice_coefficient(build(gt).astype(bool), build(pr).astype(bool))}
    out += _dm_metrics(f"{t2}.test_two_squares_shifted_by_one_pixel", gt, pr, (v, h), squares, 2)
    empties = [
        ("test_empty_prediction_mask", "gt", {"asd": (INF, NAN), "hd100": INF, "hd95": INF, "overlap": (0.0, NAN),
                                               "surface_dice": 0.0, "dice": 0.0}),
        ("test_empty_ground_truth_mask", "pred", {"asd": (NAN, INF), "hd100": INF, "hd95": INF, "overlap": (NAN, 0.0),
                                                   "surface_dice": 0.0, "dice": 0.0}),
        ("test_both_empty_masks", None, {"asd": (NAN, NAN), "hd100": INF, "hd95": INF, "overlap": (NAN, NAN),
                                          "surface_dice": NAN, "dice": NAN}),
    ]
    for nd, cls, shape, at, at_pred, spacing in [
        (2, t2, (128, 128), [[50, 51], [60, 61]], [[50, 51], [60, 61]], (3, 2)),
        (3, "SurfaceDistance3DTest", (128, 128, 128), [[50, 51], [60, 61], [70, 71]], [[50, 51], [60, 61], [72, 73]],
         (3, 2, 1)),
    ]:
        if nd == 3:
            two_px3 = dict(two_px)
            out += _dm_metrics(f"{cls}.test_on_2_pixels_2mm_away", zeros(shape, at), zeros(shape, at_pred),
                               spacing, two_px3, 3)
            cubes = {"asd": (0.322, 0.339), "hd100": 2.0, "hd95": 2.0, "overlap": (0.842, 0.830),
                     "surface_dice": 0.836, "dice": 0.990}
            out += _dm_metrics(f"{cls}.test_two_cubes_shifted_by_one_pixel",
                               zeros((100, 100, 100), [[0, 50], [None, None], [None, None]]),
                               zeros((100, 100, 100), [[0, 51], [None, None], [None, None]]), (2, 1, 1), cubes, 3)
        for test, which, exp in empties:
            g = zeros(shape, at) if which == "gt" else zeros(shape)
            p = zeros(shape, at_pred if nd == 3 else at) if which == "pred" else zeros(shape)
            out += _dm_metrics(f"{cls}.{test}", g, p, spacing, exp, nd)
    return out


def build(spec):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.metrics._peer_cases import build_mask

    return build_mask(spec)


# -- medpy -------------------------------------------------------------------------------------------
def medpy() -> list[dict]:
    src = dict(MEDPY)
    rmin = arr([1, 0], as_2d=True)
    fmin = arr([0, 1], as_2d=True)
    rsym = arr([[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]])
    fsym = arr([[1, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    two = {"num_classes": 2, "spatial_dims": 2}
    note = "1-D arrays embedded as (n, 1) images: a single voxel's surface and distances do not change"
    out = [
        case("medpy/test_asd_identity", {**src, "test": "test_asd_identity"}, "medpy", rmin, rmin,
             call("assd", directed=True, **two), 0.0, note=note),
        case("medpy/test_assd_identity", {**src, "test": "test_assd_identity"}, "medpy", rmin, rmin,
             call("assd", **two), 0.0, note=note),
        case("medpy/test_asd_distance", {**src, "test": "test_asd_distance"}, "medpy", rmin, fmin,
             call("assd", directed=True, **two), 1.0, note=note),
        case("medpy/test_assd_distance", {**src, "test": "test_assd_distance"}, "medpy", rmin, fmin,
             call("assd", **two), 1.0, note=note),
        case("medpy/test_asd_voxelspacing", {**src, "test": "test_asd_voxelspacing"}, "medpy", rmin, fmin,
             call("assd", directed=True, spacing=[2.0, 1.0], **two), 2.0, note=note),
        case("medpy/test_assd_voxelspacing", {**src, "test": "test_assd_voxelspacing"}, "medpy", rmin, fmin,
             call("assd", spacing=[2.0, 1.0], **two), 2.0, note=note),
    ]
    d, s = call("assd", directed=True, **two), call("assd", swap=True, directed=True, **two)
    out.append(case("medpy/test_asd_is_not_symetric", {**src, "test": "test_asd_is_not_symetric"}, "medpy", rsym, fsym,
                    d, relation={"op": "not_equal", "calls": [d, s], "select": None}))
    a, b = call("assd", **two), call("assd", swap=True, **two)
    out.append(case("medpy/test_assd_is_symetric", {**src, "test": "test_assd_is_symetric"}, "medpy", rsym, fsym,
                    a, relation={"op": "equal", "calls": [a, b], "select": None}))
    return out


MEDPY_NOT_APPLICABLE = [
    {"path": MEDPY["path"], "case": "test_obj_asd_identity, test_obj_assd_identity, test_obj_asd_is_not_symetric, "
                                    "test_obj_assd_is_symetric",
     "reason": "object-wise (connected-component) ASD/ASSD: not provided"},
]


# -- MetricsReloaded ---------------------------------------------------------------------------------
P29_1, R29_1 = runs((1, 45), (0, 5), (1, 10), (0, 40)), runs((1, 50), (0, 50))
P29_2, R29_2 = runs((1, 81), (0, 9), (1, 2), (0, 8)), runs((1, 90), (0, 10))
P217_1, P217_2, R217 = runs((1, 6), (0, 94)), runs((0, 100)), runs((1, 3), (0, 97))
R210 = zeros((14, 14), [[5, 9], [5, 9]])
P210_1, P210_2 = zeros((14, 14), [[6, 8], [6, 8]]), zeros((14, 14), [[4, 10], [4, 10]])
R5C = zeros((14, 14), [[1, 2], [1, 2]], [[9, 12], [9, 12]])
P5C = zeros((14, 14), [[9, 12], [9, 12]])
P_REF = zeros((11, 11), [[3, 8], [3, 8]])
P_PRED = zeros((11, 11), [[3, 8], [3, 8]], [[5, 6], [1, 10]], [[1, 10], [5, 6]])
F27_R1, F27_P1 = runs((1, 70), (0, 1)), runs((1, 40), (0, 30), (1, 1))
Z14 = zeros((14, 14))
_R214 = [[[1, 10], [7, 12]], [[10, 12], [3, 19]], [[12, 15], [3, 5]], [[12, 15], [15, 19]], [[14, 20], [15, 17]],
         [[14, 15], [1, 5]], [[14, 17], [2, 3]], [[14, 19], [4, 5]], [[17, 18], [4, 8]], [[14, 15], [15, 24]],
         [[12, 15], [22, 23]], [[14, 17], [21, 22]], [[17, 20], [5, 6]], [[17, 22], [12, 13]], [[19, 20], [12, 17]],
         [[18, 19], [15, 20]], [[17, 18], [19, 20]]]
R214 = zeros((24, 24), *_R214)
P214_1 = zeros((24, 24), [[1, 10], [7, 12]], [[10, 12], [3, 15]])
P214_2 = zeros((24, 24), *_R214, *[(b, 0) for b in [
    [[10, 14], [3, 4]], [[10, 11], [3, 9]], [[10, 11], [10, 19]], [[1, 11], [7, 9]], [[1, 11], [10, 12]],
    [[10, 14], [18, 19]], [[12, 14], [15, 17]], [[14, 19], [15, 16]]]])
P_LARGE_REF = zeros((11, 11), [[2, 5], [2, 9]], [[5, 9], [2, 6]])
P_LARGE_PRED1 = zeros((11, 11), [[2, 5], [2, 9]], [[5, 9], [2, 6]], ([[8, 9], [2, 3]], 0))
TWO = {"num_classes": 2, "spatial_dims": 2}
NOTE_1D = "1-D arrays embedded as (n, 1) images; only overlap counts or empty-mask rules are checked"


def _mr(prefix, src, conv, test, pairs):
    """``pairs``: (label, pred, ref, call, expected, atol[, extra])."""
    out = []
    for label, p, r, c, e, atol, *extra in pairs:
        kw = extra[0] if extra else {}
        note = NOTE_1D if "as_2d" in p or "as_2d" in r else None
        if note:
            kw = {**kw, "note": note}
        out.append(case(f"{prefix}/{test}/{label}", {**src, "test": test, "case": label}, conv, p, r, c, e,
                        (1e-7, atol), **kw))
    return out


def _dist4(empty_value, p, r):
    """MetricsReloaded's ``measured_distance`` tuple (hd, assd, hd_perc, masd) as four calls."""
    return [(m, p, r, call(m, **TWO), empty_value, 0.0) for m in ("hausdorff", "assd", "hd95", "masd")]


def metrics_reloaded_main() -> list[dict]:
    s, conv, pre = MR_MAIN, "metrics_reloaded", "metrics_reloaded"
    cases = []
    add = lambda test, pairs: cases.extend(_mr(pre, s, conv, test, pairs))  # noqa: E731
    add("test_voldiff", [("avdr", zeros((14, 14), [[3, 5], [3, 5]]), zeros((14, 14), [[2, 4], [2, 4]]),
                          call("volume_difference", post="abs", **TWO), 0.0, 0.0)])
    add("test_distance_empty", _dist4(0.0, Z14, Z14))
    add("test_fbeta", [("ppm29_1 (F1 = Dice)", P29_1, R29_1, call("dice", **TWO), 0.86, 0.01),
                       ("ppm29_2 (F1 = Dice)", P29_2, R29_2, call("dice", **TWO), 0.94, 0.01)])
    add("test_dsc_fbeta", [("fbeta (F1 = Dice)", P_PRED, P_REF, call("dice", **TWO), 0.862, 0.001),
                           ("dsc", P_PRED, P_REF, call("dice", **TWO), 0.862, 0.001)])
    add("test_assd", [("assd", P_PRED, P_REF, call("assd", **TWO), 0.44, 0.01)])
    add("test_masd", [("masd", P_PRED, P_REF, call("masd", **TWO), 0.425, 0.001)])
    add("test_nsd", [("nsd tau 1", P_PRED, P_REF, call("nsd", tolerance=1, **TWO), 0.89, 0.01)])
    add("test_nsd2", [("nsd tau 2", P_PRED, P_REF, call("nsd", tolerance=2, **TWO), 1.0, 0.01)])
    add("test_intersection_over_union", [("iou", P_PRED, P_REF, call("iou", **TWO), 0.76, 0.01)])
    add("test_fbeta_beta_value", [("ppm29_1 beta 1", P29_1, R29_1, call("dice", **TWO), 0.86, 0.01),
                                  ("ppm29_2 beta 1", P29_2, R29_2, call("dice", **TWO), 0.94, 0.01)])
    for test in ("test_sensitivity", "test_recall"):
        add(test, [("ppm217_1", P217_1, R217, call("recall", **TWO), 1.0, 0.01),
                   ("ppm217_2 (empty prediction)", P217_2, R217, call("recall", **TWO), 0.0, 0.01)])
    add("test_sens", [("f27", F27_P1, F27_R1, call("recall", **TWO), 0.57, 0.01)])
    add("test_positive_predictive_value", [("ppm29_1", P29_1, R29_1, call("precision", **TWO), 0.82, 0.01),
                                           ("ppm29_2", P29_2, R29_2, call("precision", **TWO), 0.98, 0.01)])
    add("test_hausdorff_distances_s210", [("ppm210_1", P210_1, R210, call("hausdorff", **TWO), 1.41, 0.01),
                                          ("ppm210_2", P210_2, R210, call("hausdorff", **TWO), 1.41, 0.01)])
    add("test_masd_s210", [("ppm210_1", P210_1, R210, call("masd", **TWO), 1.07, 0.01),
                           ("ppm210_2", P210_2, R210, call("masd", **TWO), 1.04, 0.01)])
    add("test_assd_s210", [("ppm210_1", P210_1, R210, call("assd", **TWO), 1.10, 0.01),
                           ("ppm210_2", P210_2, R210, call("assd", **TWO), 1.05, 0.01)])
    add("test_nsd_s210", [("ppm210_1", P210_1, R210, call("nsd", tolerance=1, **TWO), 0.75, 0.01),
                          ("ppm210_2", P210_2, R210, call("nsd", tolerance=1, **TWO), 0.875, 0.01)])
    add("test_hausdorff_distance_5c", [("hd", P5C, R5C, call("hausdorff", **TWO), 11.31, 0.01),
                                       ("hd_perc 95", P5C, R5C, call("hd95", percentile=95, **TWO), 6.79, 0.01)])
    add("test_distance_empty_ref", _dist4(NAN, P29_1, runs((0, 100))))
    add("test_distance_empty_pred", _dist4(NAN, runs((0, 100)), R29_1))
    add("test_distance_empty_pred_and_ref", _dist4(0.0, runs((0, 100)), runs((0, 100))))
    add("test_empty_ref_pred_nsd_biou", [("nsd", Z14, Z14, call("nsd", tolerance=1, **TWO), 1.0, 0.0)])
    add("test_dsc_s214", [("ppm214_1", P214_1, R214, call("dice", **TWO), 0.666, 0.01),
                          ("ppm214_2", P214_2, R214, call("dice", **TWO), 0.685, 0.01)])
    one0 = arr([0], as_2d=True)
    add("test_empty_reference", [("fbeta of [0] vs [0] (F1 = Dice)", one0, one0, call("dice", **TWO), 1.0, 0.0),
                                 ("sensitivity of [0] vs [0]", one0, one0, call("recall", **TWO), NAN, 0.0)])
    return cases


def metrics_reloaded_00219d0() -> list[dict]:
    s, conv, pre = MR_OLD, "metrics_reloaded_00219d0", "metrics_reloaded_00219d0"
    cases = []
    add = lambda test, pairs, src=s: cases.extend(_mr(pre, src, conv, test, pairs))  # noqa: E731
    add("test_voldiff", [("vol_diff", zeros((14, 14), [[3, 5], [3, 5]]), zeros((14, 14), [[2, 4], [2, 4]]),
                          call("volume_difference", post="abs", **TWO), 0.0, 0.0)])
    add("test_distance_empty", _dist4(0.0, Z14, Z14))
    add("test_dsc_fbeta", [("fbeta (F1 = Dice)", P_PRED, P_REF, call("dice", **TWO), 0.862, 0.001),
                           ("dsc", P_PRED, P_REF, call("dice", **TWO), 0.862, 0.001)])
    add("test_assd", [("assd", P_PRED, P_REF, call("assd", **TWO), 0.44, 0.01)])
    add("test_masd", [("masd", P_PRED, P_REF, call("masd", **TWO), 0.425, 0.001)])
    add("test_nsd", [("nsd tau 1", P_PRED, P_REF, call("nsd", tolerance=1, **TWO), 0.89, 0.01)])
    add("test_nsd2", [("nsd tau 2", P_PRED, P_REF, call("nsd", tolerance=2, **TWO), 1.0, 0.01)])
    add("test_iou", [("iou", P_PRED, P_REF, call("iou", **TWO), 0.76, 0.01)])
    add("test_fbeta", [("fbeta (F1 = Dice)", P_LARGE_PRED1, P_LARGE_REF, call("dice", **TWO), 0.986, 0.001),
                       ("fbeta beta 1", P_LARGE_PRED1, P_LARGE_REF, call("dice", **TWO), 0.986, 0.001)])
    add("test_sens", [("f27", F27_P1, F27_R1, call("recall", **TWO), 0.57, 0.01)])
    add("test_ppv", [("f27", F27_P1, F27_R1, call("precision", **TWO), 0.975, 0.001)])
    add("test_hd", [("hd", P5C, R5C, call("hausdorff", **TWO), 11.31, 0.01),
                    ("hd_perc 95", P5C, R5C, call("hd95", percentile=95, **TWO), 6.79, 0.01)])
    one0 = arr([0], as_2d=True)
    add("test_empty_reference", [("fbeta of [0] vs [0] (F1 = Dice)", one0, one0, call("dice", **TWO), 1.0, 0.0),
                                 ("sensitivity of [0] vs [0]", one0, one0, call("recall", **TWO), NAN, 0.0)])
    # the NeuroPoly wrapper's tests (BinaryPairwiseMeasures per label of a 10x10x10 label map)
    three = {"num_classes": 2, "spatial_dims": 3}
    np_src = dict(MR_OLD_NP)
    z10 = zeros((10, 10, 10))
    blocks = {
        "test_empty_ref_and_pred": (z10, z10, {"dsc": 1, "nsd": NAN, "rel_vol_error": 0, "vol_diff": NAN}),
        "test_empty_ref": (zeros((10, 10, 10), [[5, 7], [2, 5]]), z10,
                           {"dsc": 0.0, "nsd": 0.0, "rel_vol_error": 100, "vol_diff": INF}),
        "test_empty_pred": (z10, zeros((10, 10, 10), [[5, 7], [2, 5]]),
                            {"dsc": 0.0, "nsd": 0.0, "rel_vol_error": -100.0, "vol_diff": 1.0}),
        "test_non_empty_ref_and_pred": (zeros((10, 10, 10), [[4, 8], [2, 5]]), zeros((10, 10, 10), [[4, 5], [3, 6]]),
                                        {"dsc": 0.26666666666666666, "fbeta": 0.26666667461395266,
                                         "nsd": 0.5373134328358209, "rel_vol_error": 300.0, "vol_diff": 3.0}),
        "test_non_empty_ref_and_pred_with_full_overlap": (
            zeros((10, 10, 10), [[4, 8], [2, 5]]), zeros((10, 10, 10), [[4, 8], [2, 5]]),
            {"dsc": 1.0, "nsd": 1.0, "rel_vol_error": 0.0, "vol_diff": 0.0}),
    }
    deviations = {
        ("test_empty_ref_and_pred", "vol_diff"): (0.0, "vol_diff = |Vr - Vp| / Vr is 0/0 = NaN there; our signed "
                                                  "volume_difference follows rel_vol_error (0 %), so |.| is 0"),
        ("test_empty_ref", "vol_diff"): (1.0, "vol_diff = |Vr - Vp| / Vr is x/0 = inf there; our signed "
                                         "volume_difference follows rel_vol_error (100 %), so |.| is 1"),
    }
    for test, (p, r, exp) in blocks.items():
        pairs = []
        for key, value in exp.items():
            metric, post, opts = {"dsc": ("dice", None, {}), "fbeta": ("dice", None, {}),
                                  "nsd": ("nsd", None, {"tolerance": 1}),
                                  "rel_vol_error": ("volume_difference", "times100", {}),
                                  "vol_diff": ("volume_difference", "abs", {})}[key]
            extra = {}
            if (test, key) in deviations:
                ours, why = deviations[(test, key)]
                extra = {"deviation": {"ours": ours, "reason": why}}
            if key == "fbeta":
                value = float(value)
            pairs.append((key, p, r, call(metric, post=post, **three, **opts), value, 5e-8, extra))
        if "fbeta" not in exp:
            pairs.append(("fbeta", p, r, call("dice", **three), float(exp["dsc"]), 5e-8))
        add(test, pairs, np_src)
    # multi-class: labels 1 and 2 of one label map
    p = zeros((10, 10, 10), [[4, 8], [2, 8]], ([[4, 8], [2, 5]], 2))
    r = zeros((10, 10, 10), [[4, 5], [3, 10]], ([[4, 5], [3, 6]], 2))
    multi = {"num_classes": 3, "spatial_dims": 3}
    exp = {"dsc": [0.25, 0.26666666666666666], "fbeta": [0.2500000055879354, 0.26666667461395266],
           "nsd": [0.5, 0.5373134328358209], "vol_diff": [2.0, 3.0], "rel_vol_error": [200.0, 300.0]}
    pairs = []
    for key, values in exp.items():
        metric, post, opts = {"dsc": ("dice", None, {}), "fbeta": ("dice", None, {}),
                              "nsd": ("nsd", None, {"tolerance": 1}),
                              "rel_vol_error": ("volume_difference", "times100", {}),
                              "vol_diff": ("volume_difference", "abs", {})}[key]
        pairs.append((key, p, r, call(metric, post=post, **multi, **opts), [values], 5e-8))
    add("test_non_empty_ref_and_pred_multi_class", pairs, np_src)
    return cases


MR_NOT_APPLICABLE = [
    {"case": "counts (fn/fp/tp/tn, n_pos/n_neg, union, intersection), balanced accuracy, specificity, MCC, "
             "accuracy, net benefit, Cohen's kappa, NPV, expected cost, Youden, LR+, boundary IoU, clDice, "
             "pred_in_ref, centre of mass, panoptic quality, multi-class and probabilistic measures",
     "reason": "not segmentation metrics of this package"},
]


def write(name: str, header: dict, cases: list[dict]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {**header, "generated_by": "tools/seg_peer_cases.py", "cases": enc(cases)}
    (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{name}: {len(cases)} cases")


def main() -> None:
    write("monai", {"source": MONAI, "not_applicable": MONAI_NOT_APPLICABLE},
          monai_hausdorff() + monai_surface_distance() + monai_surface_dice() + monai_dice_iou())
    write("deepmind", {"source": DEEPMIND, "not_applicable": []}, deepmind())
    write("medpy", {"source": MEDPY, "not_applicable": MEDPY_NOT_APPLICABLE}, medpy())
    write("metrics_reloaded", {"source": MR_MAIN, "not_applicable": MR_NOT_APPLICABLE}, metrics_reloaded_main())
    write("metrics_reloaded_00219d0", {"source": MR_OLD, "also": MR_OLD_NP, "not_applicable": MR_NOT_APPLICABLE},
          metrics_reloaded_00219d0())


if __name__ == "__main__":
    main()
