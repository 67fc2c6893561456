"""U-Bench's per-image metrics (``utils/metrics_medpy.get_metrics`` @eafbb9fb, run by
``tools/ubench_metrics_reference.py`` on 64 generated 2D cases: identical, inverted, empty
prediction, empty target, both empty, perturbed) against ours. The named differences
(docs/metrics.md, "U-Bench's Dice / IoU"): two empty masks are IoU 0 in U-Bench and NaN here;
medpy's Dice of two empty masks is 0 in U-Bench's pinned environment (NumPy 1.26.4) and NaN with
NumPy >= 2.3 (the fixture records the NumPy it was made with), 0 under our ``convention=medpy``."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.metrics.segmentation import dice, iou, precision, recall

FIXTURE = Path(__file__).parent / "data" / "ubench_get_metrics.json"


def _cases():
    data = json.loads(FIXTURE.read_text())
    for c in data["cases"]:
        n = c["shape"][0] * c["shape"][1]
        bits = [np.unpackbits(np.frombuffer(bytes.fromhex(c[k]), np.uint8))[:n].reshape(c["shape"])
                for k in ("pred", "target")]
        yield (*bits, c)


def _ours(fn, p, t, **kw) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = fn(torch.from_numpy(p.astype(np.int64))[None], torch.from_numpy(t.astype(np.int64))[None],
               num_classes=2, **kw)
    return float(v.reshape(-1)[0])


def test_fixture_covers_every_kind_of_case():
    kinds = {(bool(p.any()), bool(t.any())) for p, t, _ in _cases()}
    assert kinds == {(True, True), (False, True), (True, False), (False, False)}


@pytest.mark.parametrize("convention", ["default", "medpy"])
def test_iou_equals_ubench_except_two_empty_masks(convention):
    for p, t, ref in _cases():
        ours = _ours(iou, p, t, convention=convention)
        if not (p.any() or t.any()):
            assert ref["iou"] == 0.0 and math.isnan(ours)      # named difference
        else:
            assert ours == pytest.approx(ref["iou"], abs=1e-12)


def test_dice_f1_precision_recall_equal_medpy_convention():
    numpy_major_minor = tuple(int(x) for x in json.loads(FIXTURE.read_text())["meta"]["numpy"].split(".")[:2])
    for p, t, ref in _cases():
        d = _ours(dice, p, t, convention="medpy")
        if not (p.any() or t.any()):
            assert d == 0.0                                        # U-Bench's NumPy 1.26.4 environment
            assert math.isnan(ref["dice"]) == (numpy_major_minor >= (2, 3))
            continue
        assert d == pytest.approx(ref["dice"], abs=1e-12)
        assert ref["F1"] == pytest.approx(ref["dice"], abs=1e-12)  # U-Bench's F1 is Dice per image
        if p.any():
            assert _ours(precision, p, t, convention="medpy") == pytest.approx(ref["PC"], abs=1e-12)
        if t.any():
            assert _ours(recall, p, t, convention="medpy") == pytest.approx(ref["SE"], abs=1e-12)


def test_ubench_mean_iou_is_lower_by_the_empty_share():
    """U-Bench's mean over images counts both-empty images as 0; ours leaves them out."""
    ref = [c["iou"] for _, _, c in _cases()]
    ours = [_ours(iou, p, t) for p, t, _ in _cases()]
    kept = [v for v in ours if not math.isnan(v)]
    n_empty = len(ours) - len(kept)
    assert n_empty > 0
    assert np.mean(ref) == pytest.approx(np.mean(kept) * len(kept) / len(ours), abs=1e-12)
