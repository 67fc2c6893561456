"""``convention="monai_ignore_empty_false"`` against MONAI's own Dice and IoU with
``ignore_empty=False`` (``tools/seg_monai_ignore_empty.py`` ran ``DiceMetric``, ``MeanIoU``,
``compute_dice`` and ``compute_iou`` of the installed MONAI on a generated corpus and stored their
outputs). Both empty → 1, empty target with a non-empty prediction → 0, everything else as the
``monai`` convention. MONAI ran on float64 one-hot tensors, so the quotients are the same float64
operations: compared to 1e-15. Our label-map and one-hot inputs are both checked."""

from __future__ import annotations

import numpy as np
import pytest

from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics.seg_conventions import CONVENTIONS
from tests.metrics._peer_cases import build_mask, load_doc

DOC = load_doc("monai_ignore_empty_corpus")
CASES = DOC["cases"]
CONV = "monai_ignore_empty_false"


def test_corpus_names_monai_and_covers_every_empty_case():
    assert DOC["source"]["package"] == "monai" and DOC["source"]["version"] == "1.6.1"
    values = np.concatenate([np.ravel(c["monai"]["DiceMetric_bg"]) for c in CASES])
    # both empty (1), one empty (0) and partial overlaps all occur, many times each
    assert (values == 1.0).sum() > 100 and (values == 0.0).sum() > 100
    assert ((values > 0) & (values < 1)).sum() > 100


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["id"] for c in CASES])
@pytest.mark.parametrize("background", [True, False], ids=["bg", "nobg"])
def test_equals_monai(index, background):
    case = CASES[index]
    k = case["num_classes"]
    p_oh, t_oh = build_mask(case["pred"]), build_mask(case["target"])  # (K, *spatial)
    p_lab, t_lab = p_oh.argmax(0), t_oh.argmax(0)
    tag = "bg" if background else "nobg"
    kw = dict(num_classes=k, include_background=background, convention=CONV, spatial_dims=p_lab.ndim)
    for metric, peers in (("dice", ("DiceMetric", "compute_dice")), ("iou", ("MeanIoU", "compute_iou"))):
        from_labels = S.segmentation_scores(p_lab[None], t_lab[None], metrics=[metric], **kw)[metric].numpy()
        from_onehot = S.segmentation_scores(p_oh[None], t_oh[None], metrics=[metric], one_hot=True,
                                            **kw)[metric].numpy()
        for peer in peers:
            expected = np.asarray(case["monai"][f"{peer}_{tag}"])
            np.testing.assert_allclose(from_labels, expected, rtol=1e-15, atol=0, err_msg=f"{peer} {case['id']}")
            np.testing.assert_allclose(from_onehot, expected, rtol=1e-15, atol=0, err_msg=f"{peer} {case['id']}")


def test_differs_from_monai_only_where_the_target_is_empty():
    a, b = CONVENTIONS["monai"], CONVENTIONS[CONV]
    assert a.surface == b.surface and a.percentile_rule == b.percentile_rule
    assert a.distance_metrics == b.distance_metrics and a.chamfer_in_voxels == b.chamfer_in_voxels
    for m in ("hausdorff", "hd95", "assd", "masd", "nsd", "precision", "recall", "volume_difference"):
        for pe, te in ((True, True), (True, False), (False, True)):
            x = a.empty_value(m, pred_empty=pe, target_empty=te)
            y = b.empty_value(m, pred_empty=pe, target_empty=te)
            assert x == y or (x != x and y != y), (m, pe, te)
    for m in ("dice", "iou"):
        assert b.empty_value(m, pred_empty=True, target_empty=True) == 1.0
        assert b.empty_value(m, pred_empty=False, target_empty=True) == 0.0
        assert b.empty_value(m, pred_empty=True, target_empty=False) == 0.0
