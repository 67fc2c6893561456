"""The peer libraries' own segmentation-metric unit tests, run through our matching convention.

Cases are transcribed from MONAI, DeepMind surface-distance, medpy and MetricsReloaded (two
commits) into ``tests/metrics/data/peer_cases/*.json`` by ``tools/seg_peer_cases.py``; each
names its source file, commit and test. A case passes when our value equals the peer test's
expected value within that test's own tolerance (or, for a relation, when the relation holds;
for an input the peer refuses, when we raise ``ValueError``). A case with a ``deviation`` is a
documented, deliberate difference: the test checks that ours is the documented value (and not
the peer's), and ``docs/metrics.md`` names it.
"""

from __future__ import annotations

import math
import warnings
from functools import cache

import numpy as np
import pytest

from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics._surface import class_surface_distances
from tests.metrics._peer_cases import build_mask, close, load_cases, load_doc, monai_reduce

PEERS = ("monai", "deepmind", "medpy", "metrics_reloaded", "metrics_reloaded_00219d0")
CASES = {peer: load_cases(peer) for peer in PEERS}
PARAMS = [pytest.param(peer, i, id=c["id"]) for peer in PEERS for i, c in enumerate(CASES[peer])]


def _surfels(case: dict) -> dict[str, np.ndarray]:
    """Our DeepMind surfel distances and areas, sorted by (distance, area) as DeepMind sorts."""
    pred = build_mask(case["pred"]).astype(bool)
    gt = build_mask(case["target"]).astype(bool)
    sd = class_surface_distances(pred, gt, tuple(case["call"]["options"]["spacing"]), "surfel")
    o_p = np.lexsort((sd.w_pred, sd.d_pred_to_target))
    o_t = np.lexsort((sd.w_target, sd.d_target_to_pred))
    return {"distances_pred_to_gt": sd.d_pred_to_target[o_p], "surfel_areas_pred": sd.w_pred[o_p],
            "distances_gt_to_pred": sd.d_target_to_pred[o_t], "surfel_areas_gt": sd.w_target[o_t]}


def run_call(case: dict, call: dict) -> np.ndarray:
    """Our value for one call of a case, ``(B, C)`` (after the case's ``post`` step)."""
    pred, target = build_mask(case["pred"]), build_mask(case["target"])
    if call.get("swap"):
        pred, target = target, pred
    metric = call["metric"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MONAI-chamfer spacing note, undefined-value notes
        out = S.segmentation_scores(pred, target, metrics=[metric], convention=case["convention"],
                                    **call["options"])[metric].cpu().numpy()
    post = call.get("post")
    if post == "abs":
        out = np.abs(out)
    elif post == "times100":
        out = out * 100
    return out


def _check_value(case: dict) -> tuple[bool, float, str]:
    ours = run_call(case, case["call"])
    tol = case["tol"]
    if "expected_isnan" in case:
        ok = bool(np.array_equal(np.isnan(ours), np.asarray(case["expected_isnan"])))
        return ok, 0.0, f"isnan {np.isnan(ours).tolist()} vs {case['expected_isnan']}"
    not_nans = None
    if "reduce" in case:
        ours, not_nans = monai_reduce(ours, case["reduce"])
    if case["call"].get("post") == "round4":  # MONAI's return_with_label rounds the aggregate
        ours = np.round(ours, 4)
    expected = case["expected"]
    ok = close(ours, expected, tol["rtol"], tol["atol"])
    if not_nans is not None and "expected_not_nans" in case:
        ok = ok and close(not_nans, case["expected_not_nans"], 0, 0)
    a, e = np.asarray(ours, dtype=float).ravel(), np.asarray(expected, dtype=float).ravel()
    diff = 0.0
    if a.size == e.size:
        finite = np.isfinite(a) & np.isfinite(e)
        diff = float(np.max(np.abs(a[finite] - e[finite]), initial=0.0))
    return ok, diff, f"ours {np.asarray(ours).tolist()} vs expected {expected} (tol {tol})"


def _check_relation(case: dict) -> tuple[bool, float, str]:
    rel = case["relation"]
    values = [run_call(case, c) for c in rel["calls"]]
    if rel.get("select") is not None:
        values = [v[tuple(rel["select"])] for v in values]
    if rel["op"] == "increasing":
        ok = all(a < b for a, b in zip(values, values[1:]))
    elif rel["op"] == "equal":
        ok = all(close(v, values[0], 0, 0) for v in values[1:])
    else:  # not_equal
        ok = not close(values[1], values[0], 0, 0)
    return ok, 0.0, f"{rel['op']}: {[np.asarray(v).tolist() for v in values]}"


@cache
def evaluate(peer: str, index: int) -> tuple[bool, float, str]:
    """(agrees, largest |ours - expected| over finite values, detail) for one case."""
    case = CASES[peer][index]
    try:
        if case.get("expect_error"):
            try:
                run_call(case, case["call"])
            except ValueError as err:
                return True, 0.0, f"refused: {err}"
            return False, 0.0, "accepted an input the peer refuses"
        if case["call"]["metric"] == "surfels":
            ours = _surfels(case)
            ok = all(close(ours[k], v, 0, 0) for k, v in case["expected"].items())
            return ok, 0.0, f"{ {k: v.tolist() for k, v in ours.items()} }"
        if "relation" in case:
            return _check_relation(case)
        return _check_value(case)
    except Exception as err:  # an option we lack counts as a disagreement, named
        return False, math.nan, f"{type(err).__name__}: {err}"


@pytest.mark.parametrize("peer, index", PARAMS)
def test_peer_case(peer: str, index: int) -> None:
    case = CASES[peer][index]
    ok, _, detail = evaluate(peer, index)
    if "deviation" in case:
        dev = case["deviation"]
        ours = run_call(case, case["call"])
        assert not ok and close(ours, dev["ours"], 0, 0), (
            f"documented difference no longer holds ({dev['reason']}): {detail}")
        return
    src = case["source"]
    assert ok, f"{src['repo']}@{src['commit'][:7]} {src['path']} {src.get('test', '')} {src.get('case', '')}: {detail}"


def test_counts_and_sources() -> None:
    """Every case names its source; prints agreement per peer (the table of docs/reliability.md)."""
    lines = []
    for peer in PEERS:
        doc = load_doc(peer)
        n = len(CASES[peer])
        agree = sum(evaluate(peer, i)[0] for i in range(n))
        named = sum("deviation" in c for c in CASES[peer])
        worst = max((evaluate(peer, i)[1] for i in range(n) if evaluate(peer, i)[0]), default=0.0)
        for c in CASES[peer]:
            assert {"repo", "commit", "path"} <= set(c["source"]), c["id"]
        lines.append(f"{peer}: {agree} of {n} agree, {named} named differences, largest |diff| "
                     f"{worst:.3g}; not applicable: {len(doc['not_applicable'])} groups")
    print("\npeer test cases: " + "; ".join(lines))
