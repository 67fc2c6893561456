"""seg-metrics 1.2.8 on the same inputs. It differs from the other libraries by its own rules,
named here: (1) distances use SimpleITK's fully connected contours (not reproduced as a
convention: only overlap metrics are compared exactly); (2) empty masks give distance 0 (a
perfect score), where every convention of ours gives a finite penalty or NaN."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench import metrics as M

sg = pytest.importorskip("seg_metrics.seg_metrics")


def _segm(gt, pred, metrics, spacing):
    out = sg.write_metrics(labels=[1], gdth_img=gt.astype(np.uint8), pred_img=pred.astype(np.uint8),
                           spacing=list(spacing), metrics=metrics, verbose=False)
    return {k: float(v[0]) for k, v in out[0].items() if k != "label"}


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), shape=st.sampled_from([(12, 14, 6), (9, 9, 9), (16, 10, 4)]))
def test_overlap_metrics_equal_seg_metrics(seed, shape):
    rng = np.random.default_rng(seed)
    gt = rng.random(shape) > 0.55
    pred = rng.random(shape) > 0.55
    if not gt.any() or not pred.any():
        return
    ref = _segm(gt, pred, ["dice", "jaccard", "precision", "recall"], (1.0, 1.0, 2.0))
    p, t = torch.from_numpy(pred.astype(np.int64)), torch.from_numpy(gt.astype(np.int64))
    assert float(M.dice(p, t, num_classes=2, spatial_dims=3)[0, 0]) == pytest.approx(ref["dice"], rel=1e-12)
    assert float(M.iou(p, t, num_classes=2, spatial_dims=3)[0, 0]) == pytest.approx(ref["jaccard"], rel=1e-12)
    assert float(M.precision(p, t, num_classes=2, spatial_dims=3)[0, 0]) == pytest.approx(ref["precision"], rel=1e-12)
    assert float(M.recall(p, t, num_classes=2, spatial_dims=3)[0, 0]) == pytest.approx(ref["recall"], rel=1e-12)


def test_empty_target_rule_differs_by_name():
    pred = np.zeros((10, 10, 6), bool)
    pred[3:6, 3:6, 2:4] = True
    gt = np.zeros_like(pred)
    ref = _segm(gt, pred, ["dice", "hd95"], (1.0, 1.0, 1.0))
    assert ref["hd95"] == 0.0  # seg-metrics: a missed structure scores a perfect distance
    ours = M.hd95(torch.from_numpy(pred.astype(np.int64)), torch.from_numpy(gt.astype(np.int64)),
                  num_classes=2, spatial_dims=3)
    diagonal = float(np.sqrt(10**2 + 10**2 + 6**2))
    assert float(ours[0, 0]) == pytest.approx(diagonal)  # default: the image diagonal in mm
    assert ref["dice"] == 0.0 and float(M.dice(torch.from_numpy(pred.astype(np.int64)),
                                              torch.from_numpy(gt.astype(np.int64)), num_classes=2,
                                              spatial_dims=3)[0, 0]) == 0.0
