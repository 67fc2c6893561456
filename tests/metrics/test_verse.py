"""VerSe id.rate / localisation distance against the official ``get_hits`` (anjany/verse@02b292b8)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.metrics.verse import (
    VerSeIdRate,
    VerSeLocalisationDistance,
    centroids_from_labels,
    verse_hits,
    verse_id_rate,
    verse_localisation_distance,
)
from medimg_bench.registry import create_metric

DATA = Path(__file__).parent / "data" / "verse_get_hits.npz"


def test_hits_equal_official_get_hits():
    d = np.load(DATA)
    assert len(d["hits"]) == 600
    for c in range(len(d["hits"])):
        hits, hit_list = verse_hits(d["gt"][c], d["pred"][c])
        assert hits == d["hits"][c], c
        np.testing.assert_array_equal(hit_list, d["hit_list"][c])
    # the corpus exercises every outcome, the 20 mm edge and label shifts included
    assert np.nansum(d["hit_list"] == 1) > 1000 and np.nansum(d["hit_list"] == 0) > 1000


def test_rules_by_hand():
    gt = {1: (0, 0, 0), 2: (0, 0, 25), 3: (0, 0, 50)}
    assert verse_id_rate(gt, {1: (20, 0, 0), 2: (0, 0, 25)}) == pytest.approx(2 / 3)  # 20 mm is a hit
    assert verse_id_rate(gt, {1: (20.001, 0, 0)}) == 0.0
    # label 1 predicted nearer vertebra 2: missed, although within 20 mm of its own centroid
    assert verse_id_rate(gt, {1: (0, 0, 13), 2: (0, 0, 25)}) == pytest.approx(1 / 3)
    # the competitor set is the vertebrae in both: without a prediction of 2 the same point hits
    assert verse_id_rate(gt, {1: (0, 0, 13)}) == pytest.approx(1 / 3)
    assert np.isnan(verse_id_rate({}, {1: (0, 0, 0)}))
    assert verse_localisation_distance(gt, {1: (3, 4, 0), 3: (0, 0, 60)}) == pytest.approx(7.5)
    assert np.isnan(verse_localisation_distance(gt, {5: (0, 0, 0)}))


def _spine_volume() -> tuple[torch.Tensor, np.ndarray]:
    lab = torch.zeros(20, 20, 60, dtype=torch.long)
    for v in range(1, 6):
        lab[6:14, 6:14, (v - 1) * 12 + 2:(v - 1) * 12 + 10] = v
    affine = np.diag([2.0, 2.0, 1.5, 1.0])
    affine[:3, 3] = (-10, 5, 30)
    return lab, affine


def test_stateful_metrics_from_label_maps():
    target, affine = _spine_volume()
    pred = target.clone()
    pred[pred == 2] = 3  # vertebra 2 labelled as 3: two labels on 3, no 2
    meta = [{"affine": affine}, {"affine": affine}]
    idr = create_metric("verse_id_rate", num_classes=29, class_names=["x"] * 28)
    loc = create_metric("verse_localisation_distance", num_classes=29)
    assert isinstance(idr, VerSeIdRate) and isinstance(loc, VerSeLocalisationDistance)
    for m in (idr, loc):
        m.update(torch.stack([target, pred]), torch.stack([target, target]), meta, ids=["a", "b"])
    ids, v = idr.values()
    assert ids == ["a", "b"] and v[:, 0].tolist() == [1.0, pytest.approx(4 / 5)]  # 3 still nearest its own, 9 mm
    # vertebra 3's predicted centroid moves 6 voxels × 1.5 mm = 9 mm towards 2; 2 is missing
    assert loc.values()[1][:, 0].tolist() == [0.0, pytest.approx(9.0 / 4)]
    assert idr.compute().item() == pytest.approx(0.9)


def test_centroid_file_is_the_reference_when_given():
    target, affine = _spine_volume()
    gt = centroids_from_labels(target, affine)
    moved = {k: v + np.array([0, 0, 30.0]) for k, v in gt.items()}  # 30 mm off: no hit
    m = VerSeIdRate()
    m.update(target[None], target[None], [{"affine": affine, "centroids_world": moved}], ids=["a"])
    assert m.values()[1].item() == 0.0


def test_centroids_from_labels_world_coordinates():
    target, affine = _spine_volume()
    c = centroids_from_labels(target, affine)
    np.testing.assert_allclose(c[1], [-10 + 2 * 9.5, 5 + 2 * 9.5, 30 + 1.5 * 5.5])
    assert centroids_from_labels(torch.zeros(3, 3, 3, dtype=torch.long)) == {}


def test_bad_input():
    with pytest.raises(ValueError, match="3 finite"):
        verse_id_rate({1: (0, 0, float("nan"))}, {})
    with pytest.raises(ValueError, match="shapes differ"):
        VerSeIdRate().update(torch.zeros(1, 4, 4, 4), torch.zeros(1, 4, 4, 5))
    with pytest.raises(ValueError, match="2D or 3D"):
        centroids_from_labels(np.zeros(4))


def test_metrics_verse_config_through_the_engine(tmp_path):
    """``metrics=verse``: Dice/HD per vertebra and the two VerSe values from one segmentation run."""
    import nibabel as nib
    import yaml

    from medimg_bench.engine.runner import evaluate
    from medimg_bench.registry import create_dataset, create_model
    from medimg_bench.resources import config_dir

    target, affine = _spine_volume()
    pred = target.clone()
    pred[pred == 2] = 3
    for d in ("images", "labels", "preds"):
        (tmp_path / d).mkdir()
    for case, p in (("a", target), ("b", pred)):
        nib.save(nib.Nifti1Image(np.zeros(target.shape, np.float32), affine), str(tmp_path / "images" / f"{case}.nii.gz"))
        nib.save(nib.Nifti1Image(target.numpy().astype(np.uint8), affine), str(tmp_path / "labels" / f"{case}.nii.gz"))
        nib.save(nib.Nifti1Image(p.numpy().astype(np.uint8), affine), str(tmp_path / "preds" / f"{case}.nii.gz"))
    classes = ["background", *[f"v{i}" for i in range(1, 6)]]
    ds = create_dataset("nifti_pairs", root=tmp_path, classes=classes)
    spec = yaml.safe_load((config_dir() / "metrics" / "verse.yaml").read_text())
    res = evaluate(create_model("predictions", root=tmp_path / "preds"), ds, task="segmentation",
                   metrics=spec, device="cpu", progress=False, n_resamples=20)
    m = res.summary["metrics"]
    assert m["verse_id_rate"]["per_class"]["0"]["mean"] == pytest.approx(0.9)
    assert m["verse_localisation_distance"]["per_class"]["0"]["mean"] == pytest.approx(9.0 / 8)
    assert m["dice"]["per_class"]["v1"]["mean"] == pytest.approx(1.0) and "hausdorff" in m
