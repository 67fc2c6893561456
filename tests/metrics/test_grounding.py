"""3D box IoU and grounding accuracy: against MONAI's box_iou on generated boxes, exact cases by
hand, formats, the stateful metric with missing boxes, and the box parser."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medimg_bench.metrics.grounding import (
    BoxIoU3D,
    box_iou_3d,
    grounding_accuracy,
    parse_box_3d,
)
from medimg_bench.registry import create_metric


def _random_boxes(rng: np.random.Generator, n: int, *, integer: bool = False) -> np.ndarray:
    lo = rng.uniform(0, 60, (n, 3))
    size = rng.uniform(0, 30, (n, 3))
    size[rng.random((n, 3)) < 0.05] = 0.0  # some flat boxes
    boxes = np.concatenate([lo, lo + size], 1)
    return np.round(boxes) if integer else boxes


def test_equals_monai_box_iou_on_generated_boxes():
    from monai.data.box_utils import box_iou

    rng = np.random.default_rng(0)
    n_checked = 0
    for trial in range(20):
        a, b = _random_boxes(rng, 37), _random_boxes(rng, 23)
        if trial % 3 == 0:  # many overlapping pairs: boxes near each other
            b[:20] = a[:20] + rng.normal(0, 3, (20, 6)).clip(-2, 2)
            b[:20, 3:] = np.maximum(b[:20, 3:], b[:20, :3])
        ours = box_iou_3d(a, b, pairwise=True).numpy()
        ref = box_iou(torch.as_tensor(a), torch.as_tensor(b)).numpy()
        # MONAI computes in float32 and adds float32 eps to the union; we compute in float64
        np.testing.assert_allclose(ours, ref, rtol=2e-6, atol=2e-6)
        n_checked += ours.size
        assert (ours > 0).sum() > 0
    assert n_checked > 15_000


def test_integer_boxes_exact_by_hand():
    a = np.array([[0, 0, 0, 2, 2, 2]])
    b = np.array([[1, 1, 1, 3, 3, 3]])
    # intersection 1, union 8 + 8 - 1 = 15
    assert box_iou_3d(a, b).item() == pytest.approx(1 / 15, abs=0)
    # voxel-index boxes, last index inside: 3x3x3 each, overlap 2x2x2 -> 8 / (27 + 27 - 8)
    assert box_iou_3d(a, b, inclusive=True).item() == pytest.approx(8 / 46, abs=0)
    assert box_iou_3d(a, a).item() == 1.0
    assert box_iou_3d(a, np.array([[5, 5, 5, 6, 6, 6]])).item() == 0.0  # disjoint
    assert box_iou_3d(a, np.array([[2, 0, 0, 4, 2, 2]])).item() == 0.0  # touching faces
    flat = np.array([[1, 1, 1, 1, 1, 1]])
    assert box_iou_3d(flat, flat).item() == 0.0  # zero union is 0, never NaN


def test_center_size_format_matches_corners():
    rng = np.random.default_rng(1)
    corners = _random_boxes(rng, 50)
    center = np.concatenate([(corners[:, :3] + corners[:, 3:]) / 2, corners[:, 3:] - corners[:, :3]], 1)
    other = _random_boxes(rng, 50)
    other_c = np.concatenate([(other[:, :3] + other[:, 3:]) / 2, other[:, 3:] - other[:, :3]], 1)
    np.testing.assert_allclose(box_iou_3d(center, other_c, box_format="cccwhd"), box_iou_3d(corners, other),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad, match", [
    (np.array([[0, 0, 0, 1, 1]]), "shape"),
    (np.array([[2, 0, 0, 1, 1, 1]]), "x2 < x1"),
    (np.array([[0, 0, 0, np.nan, 1, 1]]), "NaN"),
    (np.zeros((0, 6)), "empty"),
])
def test_bad_boxes_are_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        box_iou_3d(bad, np.array([[0, 0, 0, 1, 1, 1]]))


def test_grounding_accuracy_thresholds_inclusive():
    acc = grounding_accuracy([0.25, 0.5, 0.49, float("nan"), 0.9])
    assert acc == {"acc@0.25": 0.8, "acc@0.5": 0.4}


def test_stateful_metric_with_missing_boxes_and_registry():
    m = create_metric("box_iou_3d")
    assert isinstance(m, BoxIoU3D)
    target = np.array([[0, 0, 0, 2, 2, 2], [0, 0, 0, 4, 4, 4], [1, 1, 1, 3, 3, 3]], float)
    m.update([np.array([0, 0, 0, 2, 2, 2]), None, np.array([1, 1, 1, 2, 2, 2])], target, ids=["a", "b", "c"])
    values = m.metric_values()
    assert list(values) == ["iou", "acc@0.25", "acc@0.5", "no_box_rate"]
    np.testing.assert_allclose(values["iou"][1][:, 0].numpy(), [1.0, 0.0, 1 / 8])
    np.testing.assert_allclose(m.compute().numpy(), [(1 + 1 / 8) / 3, 1 / 3, 1 / 3, 1 / 3])
    assert values["iou"][0] == ["a", "b", "c"]


def test_parse_box_3d():
    assert parse_box_3d("The box is [10, 20, 30, 40, 50, 60].").tolist() == [10, 20, 30, 40, 50, 60]
    assert parse_box_3d("(1.5; 2; 3e1; 4, 5, 6)").tolist() == [1.5, 2, 30, 4, 5, 6]
    assert parse_box_3d("[1, 2, 3] then [0, 0, 0, 1, 1, 1]").tolist() == [0, 0, 0, 1, 1, 1]
    assert parse_box_3d("[1, 2, 3, 4, 5, 6, 7]") is None  # seven numbers: not a box
    assert parse_box_3d("no box") is None and parse_box_3d(None) is None
