"""The SOD toolbox convention (``metrics=sod_toolbox``) against the authors' MATLAB toolbox run under
GNU Octave (fixtures from ``tools/sod_toolbox_octave.py``: 1,040 generated maps and every real
COVID-SemiSeg map of the paper), to 1e-10.

Named difference: ``weighted_f_measure`` depends on which of several equidistant foreground pixels
``bwdist`` returns as the nearest. Octave's ``bwdist`` (octave-image, Gustavson's 8-neighbour
sequential EDT) breaks those ties in its own scan order, MATLAB's (exact transform) in another,
ours (scipy's exact transform) in a third. Where no tie is involved the values agree to 1e-10;
the test bounds the difference elsewhere and counts the items that agree exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.metrics._sod_core import N_THRESHOLDS
from medimg_bench.metrics.sod_toolbox import (
    SOD_MEASURES,
    SODToolbox,
    SODToolboxMax,
    matlab_thresholds,
    sod_curves,
    sod_image_scores,
    sod_normalize,
    sod_toolbox,
)
from medimg_bench.registry import create_metric
from tests.metrics._sod_corpus import N_ITEMS, corpus, digest, toolbox_gt

FIXTURE = Path(__file__).parent / "data" / "sod_toolbox_octave.npz"
REAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "infnet_covid_semiseg"
TOL = 1e-10
CURVES = ["precision", "sensitivity", "specificity", "dice", "f1", "iou", "e_measure_gt", "e_measure_ge"]


@pytest.fixture(scope="module")
def octave() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


def _close(ours: np.ndarray, theirs: np.ndarray, tol: float = TOL) -> np.ndarray:
    ours, theirs = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    return (np.isnan(ours) & np.isnan(theirs)) | (np.abs(ours - theirs) <= tol)


def _ours(pred: np.ndarray, gt: np.ndarray) -> dict[str, np.ndarray]:
    pub = sod_curves(pred, gt, version="published")
    head = sod_curves(pred, gt, version="head")
    curves = {c: pub[c] for c in CURVES[:6]}
    curves["e_measure_gt"], curves["e_measure_ge"] = pub["e_measure"], head["e_measure"]
    s_pub = sod_image_scores(pred, gt, version="published")
    s_head = sod_image_scores(pred, gt, version="head", measures=["adaptive_e_measure"])
    return {"curves": np.stack([curves[c] for c in CURVES]), "s_measure": s_pub["s_measure"],
            "weighted_f_measure": s_pub["weighted_f_measure"], "mae": s_pub["mae"],
            "adaptive_dice": s_pub["adaptive_dice"], "adaptive_e_measure_gt": s_pub["adaptive_e_measure"],
            "adaptive_e_measure_ge": s_head["adaptive_e_measure"]}


# -- thresholds -----------------------------------------------------------------------------------
def test_thresholds_are_matlabs_colon_values():
    t = matlab_thresholds()
    k = np.arange(256.0)
    assert t.shape == (N_THRESHOLDS,) and t[0] == 1.0 and t[-1] == 0.0 and np.all(np.diff(t) < 0)
    assert np.array_equal(t[:128], 1.0 + k[:128] * (-1 / 255))
    assert np.array_equal(t[128:], (255 - k[128:]) * (1 / 255))
    octave_range = 1.0 + k * (-1 / 255)  # what Octave's 1:-1/255:0 gives
    differ = t != octave_range
    assert differ.sum() == 72, differ.sum()  # the count tools/sod_toolbox_octave.py prints
    # ...and some 8-bit grey levels k/255 fall on the other side of their threshold
    grey = np.arange(256) / 255
    flips = sum((grey >= a).sum() != (grey >= b).sum() for a, b in zip(t, octave_range))
    assert flips > 0


# -- known answers --------------------------------------------------------------------------------
def test_zero_true_positive_rule():
    gt = np.zeros((4, 5), dtype=bool)
    c = sod_curves(np.zeros((4, 5), dtype=np.uint8), gt)
    assert (c["dice"] == 0).all() and (c["specificity"] == 0).all()  # empty vs empty = 0
    gt[1, 2] = True
    pred = np.where(gt, 255, 0).astype(np.uint8)
    c = sod_curves(pred, gt)
    # every threshold but the last (t = 0: every pixel is positive) separates the map exactly
    assert (c["dice"][:-1] == 1).all() and (c["specificity"][:-1] == 1).all()
    assert c["dice"][-1] == 2 / 21 and c["specificity"][-1] == 0


def test_normalisation_per_image_and_constant_maps():
    assert np.array_equal(sod_normalize(np.array([[10, 20], [30, 30]], dtype=np.uint8)), [[0, 0.5], [1, 1]])
    assert np.array_equal(sod_normalize(np.full((2, 2), 128, dtype=np.uint8)), np.full((2, 2), 128 / 255))
    assert np.array_equal(sod_normalize(np.array([[0, 65535]], dtype=np.uint16)), [[0.0, 1.0]])
    with pytest.raises(ValueError, match="NaN"):
        sod_normalize(np.array([[0.5, np.nan]]))


def test_versions_differ_only_in_the_e_measure():
    sid, pred, gt = corpus()[0]
    a = sod_image_scores(pred, toolbox_gt(gt), version="inf_net_2020_06")
    b = sod_image_scores(pred, toolbox_gt(gt), version="inf_net_2020_11")
    assert a["mean_e_measure"] != b["mean_e_measure"]
    assert {k for k in a if a[k] != b[k]} <= {"mean_e_measure", "adaptive_e_measure"}
    with pytest.raises(ValueError, match="unknown sod_toolbox version"):
        sod_image_scores(pred, toolbox_gt(gt), version="2021")


# -- the Octave fixtures --------------------------------------------------------------------------
def test_corpus_is_the_fixture_corpus(octave):
    items = {i: (p, g) for i, p, g in corpus()}
    ids = octave["corpus_ids"].tolist()
    assert len(items) == N_ITEMS and len(ids) >= 1000, len(ids)
    changed = [sid for sid, d in zip(ids, octave["corpus_digests"]) if digest(*items[sid]) != d]
    assert not changed, f"the generated corpus changed (numpy random streams?): {changed[:5]}"


def test_corpus_equals_octave(octave):
    every = {i: (p, g) for i, p, g in corpus()}
    items = [(sid, *every[sid]) for sid in octave["corpus_ids"].tolist()]
    bad: list[str] = []
    wfm_exact = 0
    wfm_diff = []
    for n, (sid, pred, gt) in enumerate(items):
        ours = _ours(pred, toolbox_gt(gt))
        means = ours["curves"].mean(axis=1)
        for j, c in enumerate(CURVES):
            if not _close(means[j], octave["corpus_curve_means"][n, j]):
                bad.append(f"{sid} mean {c}: {means[j]!r} vs {octave['corpus_curve_means'][n, j]!r}")
        if n < len(octave["corpus_curves_head"]):
            ok = _close(ours["curves"], octave["corpus_curves_head"][n])
            if not ok.all():
                bad.append(f"{sid}: curves differ at {np.argwhere(~ok)[:3].tolist()}")
        for key in ("s_measure", "mae", "adaptive_dice", "adaptive_e_measure_gt", "adaptive_e_measure_ge"):
            if not _close(ours[key], octave[f"corpus_{key}"][n]):
                bad.append(f"{sid} {key}: {ours[key]!r} vs {octave[f'corpus_{key}'][n]!r}")
        w, ow = ours["weighted_f_measure"], octave["corpus_weighted_f_measure"][n]
        wfm_exact += bool(_close(w, ow))
        if not (np.isnan(w) and np.isnan(ow)):
            wfm_diff.append(abs(w - ow))
    assert not bad, f"{len(bad)} differences from the toolbox under Octave:\n" + "\n".join(bad[:20])
    # weighted F: bwdist tie-breaking (see the module docstring)
    assert wfm_exact >= 0.5 * len(items), wfm_exact
    assert max(wfm_diff) < 0.02, max(wfm_diff)


def _real_pair(rid: str) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    task, method, stem = rid.split("/")
    test = REAL / "Dataset" / "TestingSet"
    if task == "binary":
        m = REAL / "Results" / "Lung infection segmentation" / method / f"{stem}.png"
        g = test / "LungInfection-Test" / "GT" / f"{stem}.png"
    else:
        cls = {"GT-1": "Ground-glass opacities", "GT-2": "Consolidation"}[task]
        m = REAL / "Results" / "Multi-class lung infection segmentation" / cls / method / f"{stem}.png"
        g = test / "MultiClassInfection-Test" / task / f"{stem}.png"
    return np.asarray(Image.open(m)), toolbox_gt(np.asarray(Image.open(g)))


@pytest.mark.skipif(not REAL.exists(), reason=f"real data {REAL} is absent (a fresh clone has no ../shared)")
def test_real_maps_equal_octave(octave):
    """The real maps the toolbox was run on under Octave (see ``provenance``): every per-image
    curve mean, S-measure, MAE and adaptive score; main.m's ``column_*`` for complete folders."""
    ids = octave["real_ids"].tolist()
    assert ids, "the fixture holds no real map"
    bad = []
    ours_by_id = {}
    for n, rid in enumerate(ids):
        ours = _ours(*_real_pair(rid))
        ours_by_id[rid] = ours["curves"]
        if not _close(ours["curves"].mean(axis=1), octave["real_curve_means"][n]).all():
            bad.append(f"{rid}: curve means")
        for key in ("s_measure", "mae", "adaptive_dice", "adaptive_e_measure_gt", "adaptive_e_measure_ge"):
            if not _close(ours[key], octave[f"real_{key}"][n]):
                bad.append(f"{rid} {key}: {ours[key]!r} vs {octave[f'real_{key}'][n]!r}")
    assert not bad, bad[:20]
    for f, folder in enumerate(octave["real_folders"].tolist()):
        members = [ours_by_id[r] for r in ids if r.rsplit("/", 1)[0] == folder]
        assert len(members) == 48
        assert _close(np.mean(members, axis=0), octave["real_columns"][f]).all(), folder


@pytest.mark.skipif(not REAL.exists(), reason=f"real data {REAL} is absent (a fresh clone has no ../shared)")
def test_real_maps_give_the_printed_tables():
    """Inf-Net's and FCN8s-consolidation's rows of the authors' printouts (3 decimals)."""
    from PIL import Image

    for folder, gts, printed in [
        ("Lung infection segmentation/Inf-Net", "LungInfection-Test/GT",
         {"mean_dice": 0.682, "mean_sensitivity": 0.692, "mean_specificity": 0.943, "s_measure": 0.781,
          "mean_e_measure": 0.838, "mae": 0.082, "max_dice": 0.746, "adaptive_dice": 0.727,
          "max_e_measure": 0.916, "adaptive_e_measure": 0.885}),
        ("Multi-class lung infection segmentation/Consolidation/FCN8s_1100", "MultiClassInfection-Test/GT-2",
         {"mean_dice": 0.221, "mean_sensitivity": 0.212, "mean_specificity": 0.567, "s_measure": 0.652,
          "mean_e_measure": 0.651, "mae": 0.039})]:
        files = sorted((REAL / "Results" / folder).glob("*.png"))
        preds = [np.asarray(Image.open(f)) for f in files]
        gt_dir = REAL / "Dataset" / "TestingSet" / gts
        masks = [toolbox_gt(np.asarray(Image.open(gt_dir / f.name))) for f in files]
        summary = sod_toolbox(preds, masks)
        for k, v in printed.items():
            assert abs(summary[k] - v) <= 0.0005, (folder, k, summary[k], v)


# -- stateful forms -------------------------------------------------------------------------------
def test_stateful_equals_functional_on_batches_and_lists():
    items = corpus()[:26]
    metric = create_metric("sod_toolbox", num_classes=2, class_names=["fg"])
    assert isinstance(metric, SODToolbox)
    same = [(s, p, g) for s, p, g in items if p.shape == (items[0][1].shape)]
    for sid, pred, gt in items:  # variable sizes: lists of maps (im2double values, as the model gives)
        scale = {np.dtype(bool): 1.0, np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0}[pred.dtype]
        maps = [torch.from_numpy(pred.astype(np.float64) / scale)]
        metric.update(maps, [torch.from_numpy(toolbox_gt(gt).astype(np.int64))], ids=[sid])
    values = metric.metric_values()
    assert set(values) == set(SOD_MEASURES)
    for n, (sid, pred, gt) in enumerate(items):
        want = sod_image_scores(pred, toolbox_gt(gt))
        for m in SOD_MEASURES:
            got = float(values[m][1][n, 0])
            assert (np.isnan(got) and np.isnan(want[m])) or abs(got - want[m]) < 1e-12, (sid, m)
    assert same  # a stacked batch works too
    batch = torch.from_numpy(np.stack([sod_normalize(p) for _, p, _ in same[:1]] * 2))
    masks = torch.from_numpy(np.stack([toolbox_gt(g) for _, _, g in same[:1]] * 2))
    metric.update(batch, masks, ids=["a", "b"])
    assert len(metric.ids) == len(items) + 2


def test_max_metric_equals_summary():
    items = corpus()[:30]
    preds, gts = [p for _, p, _ in items], [toolbox_gt(g) for _, _, g in items]
    summary = sod_toolbox(preds, gts)
    for curve in ("dice", "e_measure"):
        m = create_metric("sod_toolbox_max", curve=curve)
        assert isinstance(m, SODToolboxMax)
        for p, g in zip(preds, gts):
            m.update([p], [g])
        assert abs(float(m.compute()[0]) - summary[f"max_{curve}"]) < 1e-12


def test_one_foreground_class_only():
    with pytest.raises(ValueError, match="one foreground class"):
        create_metric("sod_toolbox", num_classes=3)
    m = create_metric("sod_toolbox")
    with pytest.raises(ValueError, match="sample 'x'.*0/1"):
        m.update([np.zeros((3, 3))], [np.full((3, 3), 2)], ids=["x"])


# -- pysodmetrics (tools/sod_pysodmetrics.py) ---------------------------------------------------
PSM = Path(__file__).parent / "data" / "sod_pysodmetrics.npz"


def test_pysodmetrics_differences():
    """Where pysodmetrics 1.6.2 defines the same quantity, and how it differs (docs/metrics.md)."""
    with np.load(PSM) as f:
        ids, digests, fields, values = f["ids"].tolist(), f["digests"], f["fields"].tolist(), f["values"]
    items = {i: (p, g) for i, p, g in corpus()}
    assert len(ids) >= 900
    equal: dict[str, list[bool]] = {k: [] for k in fields}
    worst: dict[str, float] = dict.fromkeys(fields, 0.0)
    for n, sid in enumerate(ids):
        pred, gt = items[sid]
        assert digest(pred, gt) == digests[n], sid
        pub = sod_image_scores(pred, toolbox_gt(gt), version="published")
        head = sod_image_scores(pred, toolbox_gt(gt), version="head")
        ours = {"mae": pub["mae"], "s_measure": pub["s_measure"], "weighted_f_measure": pub["weighted_f_measure"],
                "adaptive_e_measure": head["adaptive_e_measure"], "e_measure_mean": head["mean_e_measure"],
                "dice_mean": pub["mean_dice"], "iou_mean": pub["mean_iou"],
                "sensitivity_mean": pub["mean_sensitivity"], "specificity_mean": pub["mean_specificity"],
                "adaptive_dice": pub["adaptive_dice"]}
        for j, k in enumerate(fields):
            ok = bool(_close(ours[k], values[n, j]))
            equal[k].append(ok)
            if not ok and not np.isnan(ours[k]) and not np.isnan(values[n, j]):
                worst[k] = max(worst[k], abs(ours[k] - values[n, j]))
    share = {k: float(np.mean(v)) for k, v in equal.items()}
    assert share["mae"] == 1.0  # same quantity, same normalisation
    assert share["s_measure"] > 0.95 and share["adaptive_dice"] > 0.99
    # thresholds: pysodmetrics bins (map * 255).astype(uint8) at the 256 grey levels, the toolbox
    # compares with MATLAB's 1:-1/255:0 -> small differences on most non-binary maps
    assert worst["dice_mean"] < 1e-3 and worst["sensitivity_mean"] < 1e-3 and worst["e_measure_mean"] < 5e-3
    # specificity: pysodmetrics computes TN / (TN + FP) also when TP = 0 (the toolbox sets 0)
    assert share["specificity_mean"] < 0.5
