"""``convention="metrics_reloaded"`` / ``"metrics_reloaded_00219d0"`` against MetricsReloaded's
own outputs on a generated corpus (``tools/seg_mr_corpus.py`` ran the code of commits cb38dfc,
main, and 00219d0 and stored its numbers and exceptions).

Mapping: ``dice`` = ``dsc`` = ``fbeta`` (β = 1), ``iou`` = ``intersection_over_union``,
``precision`` = PPV, ``recall`` = ``recall``, ``hausdorff`` / ``hd95`` (``hd_perc``) / ``assd`` /
``masd`` = ``measured_distance``'s four values, ``nsd`` = ``normalised_surface_distance``;
``|volume_difference|`` = AVDR (main) and ``vol_diff`` (00219d0), ``100 × volume_difference`` =
``rel_vol_error`` (00219d0). Named differences: where 00219d0 raises (``np.percentile`` of an empty
array: a one-sided miss) we return NaN; 00219d0's ``vol_diff`` of an empty reference is ``x / 0``
(inf or NaN) while our signed volume difference follows its ``rel_vol_error`` (+100 %, 0 %).
MetricsReloaded counts TP / FP / FN on float32 maps, so its PPV and recall are float32 quotients:
ours (float64) rounded to float32 equal them exactly; its F-beta, built from those float32 values,
agrees to 1e-6 relative. Every other value agrees to 1e-12 relative (distances: SciPy's distance
transform vs our KD-tree, the same float64 operations).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from medimg_bench.metrics import segmentation as S
from tests.metrics._peer_cases import build_mask, load_doc

DOC = load_doc("metrics_reloaded_corpus")
CONVS = ("metrics_reloaded", "metrics_reloaded_00219d0")
REL = 1e-12
_MAIN = ("dice", "iou", "precision", "recall", "volume_difference", "hausdorff", "assd", "masd", "nsd")


def ours_for(case: dict, conv: str) -> dict[str, float]:
    """Our values for one corpus case under ``conv``."""
    pred, ref = build_mask(case["pred"]), build_mask(case["ref"])
    kw = dict(num_classes=2, spatial_dims=pred.ndim, spacing=case["spacing"], convention=conv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = S.segmentation_scores(pred, ref, metrics=_MAIN, tolerance=case["tau"], **kw)
        out["hd95"] = S.segmentation_scores(pred, ref, metrics=["hd95"], percentile=case["perc"],
                                            **kw)["hd95"]
    return {m: float(v.item()) for m, v in out.items()}


def comparisons(case: dict, conv: str) -> list[tuple[str, float, float | str, str | None]]:
    """(quantity, ours, MetricsReloaded's value or exception, named difference or None)."""
    ours, mr = ours_for(case, conv), case[conv]
    rows = [("dsc", ours["dice"], mr["dice"]), ("fbeta", ours["dice"], mr["fbeta"])]
    rows += [(m, ours[m], mr[m]) for m in ("iou", "precision", "recall", "hausdorff", "hd95",
                                           "assd", "masd", "nsd")]
    vd = ours["volume_difference"]
    if conv == "metrics_reloaded":
        rows.append(("avdr", abs(vd), mr["avdr"]))
    else:
        rows += [("rel_vol_error", 100 * vd, mr["rel_vol_error"]), ("vol_diff", abs(vd), mr["vol_diff"])]
    out = []
    for name, a, e in rows:
        why = None
        if isinstance(e, str) and e.startswith("raises"):
            why = f"MetricsReloaded {e}; we return NaN"
        elif name == "vol_diff" and case["kind"] in ("ref_empty", "both_empty"):
            why = "vol_diff divides by an empty reference; ours follows rel_vol_error"
        out.append((name, a, float(e) if not (isinstance(e, str) and e.startswith("raises")) else e, why))
    return out


#: MetricsReloaded's single-precision quantities: how ours is compared with them
FLOAT32 = {"precision": "float32", "recall": "float32", "fbeta": 1e-6}


def _same(a: float, e: float, name: str = "") -> bool:
    if math.isnan(e) or math.isinf(e):
        return (math.isnan(a) and math.isnan(e)) or a == e
    rule = FLOAT32.get(name)
    if rule == "float32":
        return float(np.float32(a)) == e
    return abs(a - e) <= (rule or REL) * max(1.0, abs(e))


@pytest.mark.parametrize("conv", CONVS)
def test_corpus_equals_metrics_reloaded(conv: str) -> None:
    bad, named, compared, worst = [], 0, 0, 0.0
    for case in DOC["cases"]:
        for name, a, e, why in comparisons(case, conv):
            if why is not None:
                named += 1
                if "NaN" in why:
                    assert math.isnan(a), (case["id"], name, a, why)
                else:  # vol_diff of an empty reference: ours is |rel_vol_error| / 100
                    assert a == abs(case[conv]["rel_vol_error"]) / 100, (case["id"], name, a)
                continue
            compared += 1
            if not _same(a, e, name):
                bad.append((case["id"], name, a, e))
            elif math.isfinite(e) and name not in FLOAT32:
                worst = max(worst, abs(a - e))
    print(f"\n{conv} vs MetricsReloaded@{DOC['commits'][conv][:7]}: {len(DOC['cases'])} cases, "
          f"{compared} values compared, {len(bad)} differ, largest |diff| {worst:.3g} (float64 "
          f"quantities), "
          f"{named} named differences")
    assert not bad, bad[:10]


def test_corpus_covers_the_empty_mask_rules() -> None:
    kinds = {c["kind"] for c in DOC["cases"]}
    assert {"pred_empty", "ref_empty", "both_empty", "corner", "border", "full"} <= kinds
    assert {len(c["pred"]["shape"]) for c in DOC["cases"]} == {2, 3}
    assert any(c["spacing"] is None for c in DOC["cases"])
    assert any(c["spacing"] and len(set(c["spacing"])) > 1 for c in DOC["cases"])
    # the one-sided NSD that MetricsReloaded's border map of an empty mask makes non-zero
    assert any(c["kind"] in ("pred_empty", "ref_empty") and 0 < c["metrics_reloaded"]["nsd"] < 1
               or c["kind"] in ("pred_empty", "ref_empty") and c["metrics_reloaded"]["nsd"] == 1
               for c in DOC["cases"])
