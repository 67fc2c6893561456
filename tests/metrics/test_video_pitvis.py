"""PitVis-2023 step evaluation: ours against the organisers' evaluation_steps.py.

Fixtures: tests/metrics/data/phase_pitvis_eval.npz, made by tools/phase_pitvis_eval.py
(github.com/dreets/pitvis commit b1cb307, scikit-learn 1.9.1) on tests/metrics/_phase_corpus.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.metrics.phase_challenges import pitvis_eval, pitvis_video
from medimg_bench.metrics.phase_frames import PitVisPhase
from tests.metrics._phase_corpus import unpack

DATA = Path(__file__).parent / "data" / "phase_pitvis_eval.npz"


@pytest.fixture(scope="module")
def fx():
    return dict(np.load(DATA))


def test_per_video_equals_evaluation_steps(fx):
    videos = unpack(fx["gt"], fx["pred"], fx["lengths"])
    assert len(videos) == 600
    r = pitvis_eval([p for _, p in videos], [g for g, _ in videos])
    np.testing.assert_allclose(r["score_per_video"], fx["score"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r["edit_per_video"], fx["edit"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r["f1_per_video"], fx["f1"], rtol=1e-9, atol=1e-12)
    # the corpus holds excluded steps and predictions of classes absent from the truth
    gt = fx["gt"]
    assert np.isin(gt, [0, 11, 13]).mean() > 0.05
    assert (fx["f1"] < 1).sum() > 100 and (fx["f1"] == 1).sum() >= 10


def test_rules():
    gt = np.array([0, 0, 1, 1, 2, 2, 11, 13, 3, 3])
    pred = np.array([5, 5, 1, 1, 2, 0, 7, 7, 3, 3])
    r = pitvis_video(pred, gt)
    # kept frames: targets 1 1 2 2 3 3, preds 1 1 2 0 3 3 → labels {0,1,2,3}: F1 0, 1, 2/3, 1
    assert r["f1"] == pytest.approx((0 + 1 + 2 / 3 + 1) / 4)
    # segments: pred 1 2 0 3 vs truth 1 2 3 → 1 edit over 4 segments
    assert r["edit"] == pytest.approx(0.75)
    assert r["score"] == pytest.approx((r["f1"] + r["edit"]) / 2)
    with pytest.warns(UserWarning, match="only excluded"):
        assert np.isnan(pitvis_video(np.array([1, 2]), np.array([0, 11]))["score"])


def test_stateful_per_video_rows(fx):
    videos = unpack(fx["gt"], fx["pred"], fx["lengths"])[:20]
    m = PitVisPhase(num_classes=15)
    for i, (g, p) in enumerate(videos):
        half = len(g) // 2
        for lo, hi in ((half, len(g)), (0, half)):  # second half first: order comes from the times
            meta = [{"video_id": f"video_{i:02d}", "frame_index": j * 25, "timestamp": float(j)} for j in range(lo, hi)]
            m.update(torch.from_numpy(p[lo:hi]), torch.from_numpy(g[lo:hi]), meta,
                     ids=[f"video_{i:02d}_{j}" for j in range(lo, hi)])
    tables = m.metric_values()
    ids, score = tables["pitvis_score"]
    assert ids == [f"video_{i:02d}" for i in range(20)]
    np.testing.assert_allclose(score.numpy().ravel(), fx["score"][:20], rtol=1e-12)
    assert m.compute().item() == pytest.approx(np.mean(fx["score"][:20]))
