"""What a segmentation run keeps for its page (tasks/worst.py): the k lowest mean-Dice cases,
one slice each (the most disagreement), bounded in size, written without pickle."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from medimg_bench.tasks.worst import MAX_SIDE, WorstSlices, case_dice

CLASSES = ["background", "liver", "kidney"]


def _dice_numpy(p, t, k, first=1):
    vals = []
    for c in range(first, k):
        a, b = p == c, t == c
        if a.sum() + b.sum():
            vals.append(2 * (a & b).sum() / (a.sum() + b.sum()))
    return np.mean(vals) if vals else np.nan


def test_case_dice_is_the_mean_foreground_dice_of_present_classes():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 3, size=(5, 6, 7, 4))
    p = np.where(rng.random(t.shape) < 0.3, rng.integers(0, 3, size=t.shape), t)
    p[3], t[3] = 0, 0  # nothing anywhere: NaN
    t[4][t[4] == 2] = 1  # kidney only in the prediction of case 4
    got = case_dice(torch.as_tensor(p), torch.as_tensor(t), 3, 1)
    want = [_dice_numpy(p[i], t[i], 3) for i in range(5)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert np.isnan(got[3])


def _batch(ids, image, pred, target):
    return {"id": ids, "image": image, "mask": target}, torch.as_tensor(pred), torch.as_tensor(target)


def test_keeps_the_k_worst_over_batches_with_the_most_wrong_slice(tmp_path):
    target = torch.zeros(3, 8, 8, 5, dtype=torch.long)
    target[:, 2:6, 2:6, :] = 1
    pred = target.clone()
    pred[0, :, :, 3] = 0          # case a: slice 3 missed entirely (worst slice 3)
    pred[1, 2:6, 2:6, 1] = 2      # case b: slice 1 labelled kidney
    pred[1, 2:4, 2:6, 4] = 0
    image = torch.rand(3, 1, 8, 8, 5)
    keeper = WorstSlices(k=2)
    keeper.offer(*_batch(["a", "b", "c"], image, pred, target), CLASSES, 1)
    more_t = torch.zeros(1, 8, 8, 5, dtype=torch.long)
    more_t[0, 0:4, 0:4, 2] = 2
    keeper.offer(*_batch(["d"], torch.rand(1, 1, 8, 8, 5), torch.zeros_like(more_t), more_t), CLASSES, 1)  # Dice 0
    scores = {sid: _dice_numpy(p.numpy(), t.numpy(), 3) for sid, p, t in zip("abc", pred, target)}
    worst_two = sorted([*scores.items(), ("d", 0.0)], key=lambda kv: kv[1])[:2]
    assert sorted(keeper.kept) == sorted(s for s, _ in worst_two)
    files = keeper.write(tmp_path / "worst")
    info = json.loads((tmp_path / "worst" / "segmentation.json").read_text())
    arrays = np.load(files[0], allow_pickle=False)
    assert [c["id"] for c in info["cases"]] == [s for s, _ in worst_two]  # worst first
    for j, c in enumerate(info["cases"]):
        assert c["dice"] == pytest.approx(dict(worst_two)[c["id"]])
        assert arrays[f"reference_{j}"].shape == (8, 8) and arrays[f"image_{j}"].dtype == np.uint8
    by_id = {c["id"]: c for c in info["cases"]}
    assert by_id["d"]["slice"] == 2  # where the missed kidney is
    if "b" in by_id:
        assert by_id["b"]["slice"] == 1
    assert info["classes"] == CLASSES and info["first_class"] == 1


def test_bounded_slices_empty_cases_and_k_zero(tmp_path):
    big_t = torch.zeros(1, 1000, 600, dtype=torch.long)
    big_t[0, 100:300, 100:300] = 1
    keeper = WorstSlices(k=3)
    keeper.offer(*_batch(["big"], torch.rand(1, 1, 1000, 600), torch.zeros_like(big_t), big_t), CLASSES, 1)
    empty = torch.zeros(1, 10, 10, dtype=torch.long)
    keeper.offer(*_batch(["empty"], torch.rand(1, 1, 10, 10), empty, empty), CLASSES, 1)  # nothing to show
    assert list(keeper.kept) == ["big"]
    ref = keeper.kept["big"]["reference"]
    assert max(ref.shape) <= MAX_SIDE and keeper.kept["big"]["slice"] is None  # a 2-D case
    none = WorstSlices(k=0)
    none.offer(*_batch(["big"], None, torch.zeros_like(big_t), big_t), CLASSES, 1)
    assert none.write(tmp_path / "none") == [] and not (tmp_path / "none").exists()
