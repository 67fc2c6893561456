"""Cholec80's MATLAB phase evaluation: ours against Main.m / Evaluate.m run under Octave.

Fixtures: tests/metrics/data/phase_cholec80_octave.npz, made by tools/phase_cholec80_octave.py
(TMRNet commit 6a0db47, ``code/eval/result/matlab-eval``) on tests/metrics/_phase_corpus.py.
The one difference, named: ``Main.m`` takes ``mean`` over phases for Jaccard and recall, so a
phase absent from every video makes its headline NaN; our engine summary (nanmean) skips it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.metrics.phase_challenges import cholec80_matlab_eval, cholec80_matlab_video
from medimg_bench.metrics.phase_frames import Cholec80Phase
from tests.metrics._phase_corpus import cholec80_corpus, unpack

DATA = Path(__file__).parent / "data" / "phase_cholec80_octave.npz"


@pytest.fixture(scope="module")
def fx():
    return dict(np.load(DATA))


def test_evaluate_m_per_video(fx):
    videos = unpack(fx["single_gt"], fx["single_pred"], fx["single_lengths"])
    assert len(videos) == 400
    ref = fx["single_out"]
    for (gt, pred), fps, want in zip(videos, fx["single_fps"], ref):
        r = cholec80_matlab_video(pred, gt, fps=float(fps), relaxed=bool(fps > 0))
        got = np.r_[r["jaccard"], r["precision"], r["recall"], r["accuracy"]] * 100
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9, equal_nan=True)
    # the corpus reaches the script's corners: values over 100 %, tp / 0, NaN precision, fps 0
    assert (ref[:, 7:21] > 100).any() and np.isinf(ref[:, 7:14]).any()
    assert np.isnan(ref[:, 7:14][~np.isnan(ref[:, :7])]).any()
    assert set(fx["single_fps"].tolist()) == {0.0, 1.0, 2.5, 3.0}


def test_main_m_aggregates(fx):
    for s in range(int(fx["sets"])):
        videos = unpack(fx[f"main{s}_gt"], fx[f"main{s}_pred"], fx[f"main{s}_lengths"])
        e = cholec80_matlab_eval([p for _, p in videos], [g for g, _ in videos], fps=1.0)
        o = {k.split("_out_")[1]: v for k, v in fx.items() if k.startswith(f"main{s}_out_")}
        for ours, theirs in ((e.jaccard, "meanJacc"), (e.precision, "meanPrec"), (e.recall, "meanRec"),
                             (e.accuracy, "meanAcc"), (e.std["jaccard"], "stdJacc"),
                             (e.std["precision"], "stdPrec"), (e.std["recall"], "stdRec"),
                             (e.std["accuracy"], "stdAcc")):
            assert ours * 100 == pytest.approx(o[theirs].item(), rel=1e-12, abs=1e-9), theirs
        for k, name in (("jaccard", "jaccard"), ("precision", "prec"), ("recall", "rec")):
            np.testing.assert_allclose(e.per_video[k].T * 100, o[name], rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(e.per_phase["jaccard"] * 100, o["meanJaccPerPhase"].ravel(), rtol=1e-12)


def test_script_quirk_matters(fx):
    """The early-transition mask lands on the segment's head: a prediction one phase ahead in the
    last frames of a segment is not forgiven (a correct implementation would forgive it)."""
    gt = np.array([0] * 30 + [1] * 30)
    pred = gt.copy()
    pred[25:30] = 1  # early transition into phase 1, within 10 frames of the boundary
    r = cholec80_matlab_video(pred, gt, fps=1.0)
    assert r["accuracy"] == pytest.approx(55 / 60)
    late = gt.copy()
    late[30:35] = 0  # late transition: forgiven
    assert cholec80_matlab_video(late, gt, fps=1.0)["accuracy"] == 1.0
    # the strict variant counts both
    assert cholec80_matlab_video(late, gt, fps=1.0, relaxed=False)["accuracy"] == pytest.approx(55 / 60)


def test_fps_window_rules():
    gt = np.array([0] * 30 + [1] * 30)
    with pytest.raises(ValueError, match="whole number"):
        cholec80_matlab_video(gt, gt, fps=0.25)
    with pytest.raises(ValueError, match="7 phases"):
        cholec80_matlab_video(gt + 6, gt, fps=1.0)
    with pytest.raises(ValueError, match="differ"):
        cholec80_matlab_video(gt[:-1], gt, fps=1.0)


def _feed(metric, videos, *, fps=1.0, batch=97, seed=0):
    """Frames of ``videos`` in shuffled batches, with the loaders' meta."""
    rows = [(f"v{i:02d}", j, int(p[j]), int(g[j])) for i, (g, p) in enumerate(videos) for j in range(len(g))]
    rng = np.random.default_rng(seed)
    rows = [rows[k] for k in rng.permutation(len(rows))]
    for s in range(0, len(rows), batch):
        chunk = rows[s : s + batch]
        scores = torch.nn.functional.one_hot(torch.tensor([c[2] for c in chunk]), 7).double()
        meta = [{"video_id": v, "frame_index": j * 25, "timestamp": j / fps} for v, j, _, _ in chunk]
        metric.update(scores, torch.tensor([c[3] for c in chunk]), meta,
                      ids=[f"{v}_{j:06d}" for v, j, _, _ in chunk])


@pytest.mark.parametrize("relaxed", [True, False])
def test_stateful_frames_equal_functional(relaxed):
    videos = cholec80_corpus(12, seed=3)
    m = Cholec80Phase(relaxed=relaxed, num_classes=7)  # fps from the frame times: 1
    _feed(m, videos)
    ref = cholec80_matlab_eval([p for _, p in videos], [g for g, _ in videos], fps=1.0, relaxed=relaxed)
    tables = m.metric_values()
    suffix = "_relaxed" if relaxed else ""
    ids, jac = tables[f"cholec80_jaccard{suffix}"]
    assert ids == [f"v{i:02d}" for i in range(12)]
    np.testing.assert_allclose(jac.numpy(), ref.per_video["jaccard"], equal_nan=True)
    np.testing.assert_allclose(tables[f"cholec80_accuracy{suffix}"][1].numpy().ravel(), ref.per_video["accuracy"])
    # the engine's per-phase mean, then mean over phases = Main.m's order
    per_phase = tables[f"cholec80_precision{suffix}"][1].nanmean(0).numpy()
    np.testing.assert_allclose(per_phase, ref.per_phase["precision"], equal_nan=True)


def test_stateful_duplicate_frame_and_fps():
    m = Cholec80Phase(num_classes=7)
    meta = [{"video_id": "v1", "frame_index": 0, "timestamp": 0.0}] * 2
    m.update(torch.tensor([0, 0]), torch.tensor([0, 0]), meta, ids=["a", "b"])
    with pytest.raises(ValueError, match="two frames at position 0.*'a' and 'b'"):
        m.metric_values()
    with pytest.raises(ValueError, match="7 phases"):
        Cholec80Phase(num_classes=8)
    with pytest.raises(ValueError, match="whole number"):
        Cholec80Phase(fps=0.33)
