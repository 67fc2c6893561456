"""Issue 35's examples for 2D prediction maps and 2D masks, each reproduced end to end: what used to
give a plausible number with no error now scores right or fails naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medimg_bench.registry import create_dataset

H, W = 16, 20
_yy, _xx = np.mgrid[0:H, 0:W]
MASKS = {f"s{i}": (_yy - 5 - i) ** 2 + (_xx - 8 - i) ** 2 < 14 for i in range(3)}


def _folder(root: Path, *, fg: int = 255) -> None:
    for sid, m in MASKS.items():
        (root / "images").mkdir(parents=True, exist_ok=True)
        (root / "masks").mkdir(parents=True, exist_ok=True)
        Image.fromarray((np.arange(H * W).reshape(H, W) % 200).astype(np.uint8)).save(root / "images" / f"{sid}.png")
        Image.fromarray(np.where(m, fg, 0).astype(np.uint8)).save(root / "masks" / f"{sid}.png")


def _run(ds, preds: Path, **options):
    from medimg_bench.engine.results import EvaluationFailed
    from medimg_bench.engine.runner import evaluate
    from medimg_bench.models.predictions import predictions

    model = predictions(root=str(preds), kind="maps", **options)
    try:
        return evaluate(model, ds, task="segmentation", metrics={"dice": {"metric": "dice"}}, device="cpu",
                        progress=False, n_resamples=10)
    except EvaluationFailed as exc:  # every sample failed: the run says so; its records are what we check
        return exc.results


def _dice(res) -> float:
    per_class = res.summary["metrics"]["dice"]["per_class"]
    return per_class.get("foreground", per_class.get("lesion"))["mean"]


def test_perfect_01_png_maps_score_dice_1(tmp_path):
    """Was: 0/1 PNG maps thresholded at 128 -> Dice 0.000, 0 failed (0/255 maps: 1.000)."""
    _folder(tmp_path)
    for fg in (1, 255):
        preds = tmp_path / f"preds{fg}"
        preds.mkdir()
        for sid, m in MASKS.items():
            Image.fromarray(np.where(m, fg, 0).astype(np.uint8)).save(preds / f"{sid}.png")
        res = _run(create_dataset("seg2d_folder", root=tmp_path), preds)
        assert res.summary["n_failed"] == 0 and _dice(res) == pytest.approx(1.0), fg


@pytest.mark.parametrize("scale, declared", [(255.0, {"scale": 255}), (100.0, {"scale": "percent"}),
                                             (None, {"encoding": "logits"})])
def test_npy_maps_on_another_scale_are_refused_until_declared(tmp_path, scale, declared):
    """Was: .npy maps on 0-255, in percent or as logits scored 0.206 / 0.206 / 0.000, unchecked."""
    _folder(tmp_path)
    preds = tmp_path / "preds"
    preds.mkdir()
    rng = np.random.default_rng(1)
    for sid, m in MASKS.items():
        p = np.where(m, 0.8, 0.1) + rng.uniform(-0.05, 0.05, m.shape)
        np.save(preds / f"{sid}.npy", p * scale if scale else np.log(p / (1 - p)))
    ds = create_dataset("seg2d_folder", root=tmp_path)
    res = _run(ds, preds)
    assert res.summary["n_failed"] == 3
    err = str(res.samples.set_index("id").loc["s0", "error"])
    assert "s0.npy" in err and "not probabilities" in err and "declare" in err
    res = _run(ds, preds, **declared)
    assert res.summary["n_failed"] == 0 and _dice(res) == pytest.approx(1.0)


def test_01_masks_with_perfect_predictions_score_dice_1_and_check_is_honest(tmp_path):
    """Was: the ISIC/COVID/polyp/Kvasir/BUSI loaders applied > 128, so 0/1 masks became empty (Dice 0
    with perfect predictions) and ``datasets check`` said OK."""
    from medimg_bench.datasets.check import check_dataset

    gt, preds = tmp_path / "ISIC2018_Task1_Training_GroundTruth", tmp_path / "preds"
    for d in (gt, preds, tmp_path / "ISIC2018_Task1-2_Training_Input"):
        d.mkdir()
    for sid, m in MASKS.items():
        Image.fromarray((np.arange(H * W).reshape(H, W) % 200).astype(np.uint8)).convert("RGB").save(
            tmp_path / "ISIC2018_Task1-2_Training_Input" / f"{sid}.jpg")
        Image.fromarray(m.astype(np.uint8)).save(gt / f"{sid}_segmentation.png")
        Image.fromarray(np.where(m, 255, 0).astype(np.uint8)).save(preds / f"{sid}.png")
    ds = create_dataset("isic2018_task1", root=tmp_path)
    res = _run(ds, preds)
    assert res.summary["n_failed"] == 0 and _dice(res) == pytest.approx(1.0)
    # a mask declared 0/255 that holds 0/1 is an error check reports, naming the file and values
    declared = create_dataset("isic2018_task1", root=tmp_path, mask_foreground=255)
    report = check_dataset(declared)
    unreadable = next(iter(report.splits.values())).unreadable
    assert len(unreadable) == 3 and "values 0, 1" in unreadable[0]["problem"] and "_segmentation.png" in unreadable[0]["problem"]


def test_a_folder_of_npy_reconstructions_says_kind_reconstruction(tmp_path):
    """Was: a folder of .npy volumes was read as 2D maps with a message that did not say why."""
    _folder(tmp_path)
    preds = tmp_path / "preds"
    preds.mkdir()
    for sid in MASKS:
        np.save(preds / f"{sid}.npy", np.ones((4, H, W), np.float32))
    res = _run(create_dataset("seg2d_folder", root=tmp_path), preds)
    err = str(res.samples.set_index("id").loc["s1", "error"])
    assert res.summary["n_failed"] == 3 and "s1.npy" in err and "kind=reconstruction" in err
    np.save(preds / "s1.npy", np.ones((H, W), np.complex64))
    res = _run(create_dataset("seg2d_folder", root=tmp_path), preds)
    assert "kind=reconstruction" in str(res.samples.set_index("id").loc["s1", "error"])


def test_encoding_options_reach_the_reader_and_bad_ones_fail_early(tmp_path):
    from medimg_bench.models.predictions import MapsFromFolder, predictions

    model = predictions(root=str(tmp_path), kind="maps", encoding="probability", scale="percent", threshold=0.3)
    assert isinstance(model, MapsFromFolder) and (model.encoding, model.scale, model.threshold) == (
        "probability", "percent", 0.3)
    with pytest.raises(ValueError, match="encoding of maps"):
        predictions(root=str(tmp_path), kind="maps", encoding="label_map")
    with pytest.raises(ValueError, match="scale"):
        predictions(root=str(tmp_path), kind="maps", scale="permille")


def test_sod_toolbox_maps_stay_im2double(tmp_path):
    """Grey-level PNG maps keep MATLAB's im2double (value / 255), exactly, for the SOD toolbox."""
    from medimg_bench.models.predictions import read_map

    a = (np.arange(H * W).reshape(H, W) % 256).astype(np.uint8)
    Image.fromarray(a).save(tmp_path / "m.png")
    assert np.array_equal(read_map(tmp_path / "m.png"), a / 255.0)
    Image.fromarray(a.astype(np.uint16) * 257).save(tmp_path / "m16.png")
    assert np.array_equal(read_map(tmp_path / "m16.png"), (a.astype(np.uint16) * 257) / 65535.0)
