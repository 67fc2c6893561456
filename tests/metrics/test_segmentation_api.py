"""Segmentation metrics: hand-derived values, input errors, stateful forms, devices."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from medimg_bench.metrics import segmentation as S
from medimg_bench.metrics.seg_conventions import CONVENTIONS
from medimg_bench.registry import create_metric


def _pair():
    t = torch.zeros(2, 6, 7, 5, dtype=torch.long)
    p = t.clone()
    t[:, 1:4, 1:4, 1:3] = 1
    p[:, 1:4, 1:5, 1:3] = 1
    t[0, 4:6, 5:7, 3:5] = 2  # class 2 present in case 0 only
    return p, t


def test_overlap_metrics_hand_derived():
    p, t = _pair()
    out = S.segmentation_scores(p, t, num_classes=3, metrics=["dice", "iou", "precision", "recall",
                                                              "volume_difference"],
                                spacing=(1.0, 2.0, 0.5))
    # class 1: |T| = 18, |P| = 24, TP = 18
    assert out["dice"][0, 0].item() == pytest.approx(36 / 42)
    assert out["iou"][0, 0].item() == pytest.approx(18 / 24)
    assert out["precision"][0, 0].item() == pytest.approx(18 / 24)
    assert out["recall"][0, 0].item() == pytest.approx(1.0)
    assert out["volume_difference"][0, 0].item() == pytest.approx(6 / 18)
    mm3 = S.volume_difference(p, t, num_classes=3, spacing=(1.0, 2.0, 0.5), relative=False)
    assert mm3[0, 0].item() == pytest.approx(6 * 1.0)
    # class 2: missed in case 0 (pred empty), absent in case 1
    assert out["dice"][0, 1].item() == 0.0 and math.isnan(out["dice"][1, 1].item())
    assert out["recall"][0, 1].item() == 0.0 and math.isnan(out["precision"][0, 1].item())
    assert out["volume_difference"][0, 1].item() == -1.0


def test_default_empty_distance_is_image_diagonal_and_configurable():
    p, t = _pair()
    sp = (1.0, 2.0, 0.5)
    hd = S.hd95(p, t, num_classes=3, spacing=sp)
    diag = math.sqrt((6 * 1.0) ** 2 + (7 * 2.0) ** 2 + (5 * 0.5) ** 2)
    assert hd[0, 1].item() == pytest.approx(diag)
    assert math.isnan(hd[1, 1].item())
    assert S.nsd(p, t, num_classes=3, spacing=sp)[0, 1].item() == 0.0
    assert S.hd95(p, t, num_classes=3, spacing=sp, empty_distance=50.0)[0, 1].item() == 50.0
    assert S.hd95(p, t, num_classes=3, convention="brats")[0, 1].item() == pytest.approx(373.13)
    # BraTS: both empty is a perfect score
    assert S.dice(p, t, num_classes=3, convention="brats")[1, 1].item() == 1.0
    assert S.hd95(p, t, num_classes=3, convention="brats")[1, 1].item() == 0.0


def test_surface_distances_hand_derived():
    # two 1-voxel-thick slabs 3 voxels apart along axis 0 (spacing 2 mm): every distance is 6 mm
    t = torch.zeros(1, 10, 4, 4, dtype=torch.long)
    p = t.clone()
    t[0, 2] = 1
    p[0, 5] = 1
    out = S.segmentation_scores(p, t, num_classes=2, spacing=(2.0, 1.0, 1.0),
                                metrics=["hausdorff", "hd95", "assd", "masd", "nsd"], tolerance=5.9)
    for m in ("hausdorff", "hd95", "assd", "masd"):
        assert out[m].item() == pytest.approx(6.0)
    assert out["nsd"].item() == 0.0
    assert S.nsd(p, t, num_classes=2, spacing=(2.0, 1.0, 1.0), tolerance=6.0).item() == 1.0


def test_one_hot_and_label_map_agree_and_list_of_sizes():
    p, t = _pair()
    oh = lambda x: torch.nn.functional.one_hot(x, 3).movedim(-1, 1)  # noqa: E731
    a = S.segmentation_scores(p, t, num_classes=3, metrics=["dice", "hd95", "nsd"])
    b = S.segmentation_scores(oh(p), oh(t), one_hot=True, metrics=["dice", "hd95", "nsd"])
    for m in a:
        assert torch.equal(a[m].isnan(), b[m].isnan())
        assert torch.allclose(a[m].nan_to_num(), b[m].nan_to_num())
    # a list of differently sized cases with one spacing each
    cases = [p[0], p[1, :5]]
    refs = [t[0], t[1, :5]]
    c = S.hd95(cases, refs, num_classes=3, spacing=[(1, 1, 1), (1, 1, 2)])
    assert c.shape == (2, 2)
    one = S.hd95(p[1, :5], t[1, :5], num_classes=3, spacing=(1, 1, 2))
    assert torch.allclose(c[1:].nan_to_num(), one.nan_to_num())


def test_background_and_2d():
    img = torch.zeros(8, 8, dtype=torch.long)
    img[2:5, 2:6] = 1
    out = S.dice(img, img, num_classes=2, include_background=True)
    assert out.shape == (1, 2) and torch.all(out == 1)


@pytest.mark.parametrize(
    "pred, target, kwargs, match",
    [
        (torch.zeros(1, 4, 4, 4, dtype=torch.long), torch.zeros(1, 4, 4, 5, dtype=torch.long), {}, "shapes differ"),
        (torch.full((1, 4, 4, 4), 3), torch.zeros(1, 4, 4, 4, dtype=torch.long), {}, r"label outside \[0, 3\)"),
        (torch.zeros(1, 4, 4, 4), torch.zeros(1, 4, 4, 4, dtype=torch.long), {}, "integer label map"),
        (torch.full((1, 4, 4, 4), float("nan")), torch.zeros(1, 4, 4, 4), {}, "NaN"),
        (torch.zeros(1, 4, 4, 4, dtype=torch.long), torch.zeros(1, 4, 4, 4, dtype=torch.long),
         {"spacing": [(1, 1)]}, "2 values for 3 spatial axes"),
        (torch.zeros(1, 4, 4, 4, dtype=torch.long), torch.zeros(1, 4, 4, 4, dtype=torch.long),
         {"spacing": (1, 0, 1)}, "> 0"),
        ([np.zeros((4, 4, 4), np.int64), np.zeros((4, 4), np.int64)],
         [np.zeros((4, 4, 4), np.int64), np.zeros((4, 4), np.int64)], {}, "disagree on dimensionality"),
        (torch.zeros(1, 4, 4, 4, dtype=torch.long), torch.zeros(1, 4, 4, 4, dtype=torch.long),
         {"convention": "nope"}, "unknown segmentation convention"),
    ],
)
def test_invalid_input_raises(pred, target, kwargs, match):
    with pytest.raises(ValueError, match=match):
        S.segmentation_scores(pred, target, num_classes=3, metrics=["dice", "hd95"], **kwargs)


def test_every_convention_runs_and_documents_empty_values():
    p, t = _pair()
    for name in CONVENTIONS:
        out = S.segmentation_scores(p, t, num_classes=3, convention=name,
                                    metrics=["dice", "hd95", "assd", "masd", "nsd", "iou"])
        for v in out.values():
            assert v.shape == (2, 2) and v.dtype == torch.float64


def test_stateful_metrics_and_status():
    p, t = _pair()
    meta = [{"spacing": (1.0, 2.0, 0.5)}, {}]
    m = create_metric("segmentation", num_classes=3, metrics=["dice", "hd95", "nsd"],
                      class_names=["a", "b"], tolerance=2.0)
    m.update(p, t, meta, ids=["x", "y"])
    m.update(p[:1], t[:1], None, ids=["z"])
    vals = m.metric_values()
    ids, dice = vals["dice"]
    assert ids == ["x", "y", "z"] and dice.shape == (3, 2)
    ref = S.segmentation_scores(p, t, num_classes=3, spacing=[(1.0, 2.0, 0.5), (1, 1, 1)],
                                metrics=["hd95"])["hd95"]
    assert torch.allclose(vals["hd95"][1][:2].nan_to_num(), ref.nan_to_num())
    st = m.status()
    assert st["absent"] == [0, 1] and st["missed"] == [0, 2]
    assert torch.allclose(m.compute_all()["dice"], dice.nanmean(0))
    single = create_metric("hd95", num_classes=3)
    single.update(p, t, meta)
    assert single.per_sample and single.values()[1].shape == (2, 2)
    for name in ("dice", "iou", "hausdorff", "assd", "masd", "nsd", "precision", "recall",
                 "volume_difference"):
        mm = create_metric(name, num_classes=3, include_background=True, convention="default")
        mm.update(p, t)
        assert mm.compute().shape == (3,)


def test_distributed_merge_counts_each_sample_once():
    p, t = _pair()
    ranks = []
    for ids, sl in ((["a", "b"], slice(0, 2)), (["b", "c"], slice(1, 2))):
        m = S.SegmentationMetrics(num_classes=3, metrics=["dice", "hd95"])
        m.update(p[sl], t[sl], ids=ids[: sl.stop - sl.start])
        ranks.append(m.state_dict())
    m.load_state(ranks[0])
    m.merge_state(ranks[1:])
    assert m.ids == ["a", "b"]
    assert torch.cat(m.scores_dice).shape[0] == 2
    assert torch.cat(m.status_codes).shape[0] == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_equals_cpu():
    p, t = _pair()
    names = ["dice", "iou", "hd95", "hausdorff", "assd", "masd", "nsd", "precision", "recall"]
    cpu = S.segmentation_scores(p, t, num_classes=3, spacing=(1, 2, 0.5), metrics=names)
    gpu = S.segmentation_scores(p.cuda(), t.cuda(), num_classes=3, spacing=(1, 2, 0.5), metrics=names)
    for m in names:
        assert gpu[m].is_cuda
        assert torch.allclose(gpu[m].cpu().nan_to_num(), cpu[m].nan_to_num(), rtol=1e-5)
