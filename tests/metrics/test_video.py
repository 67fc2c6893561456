"""Phase recognition metrics: hand-derived values, scikit-learn on pooled frames, properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, jaccard_score, precision_recall_fscore_support

from medimg_bench.metrics.video import (
    PHASE_SUMMARY_NAMES,
    PhaseMetricsState,
    edit_score,
    frame_accuracy,
    phase_metrics,
    relax_boundaries,
)
from medimg_bench.registry import create_metric

TARGET = np.array([0, 0, 0, 1, 1, 1, 2, 2])
PRED = np.array([0, 0, 1, 1, 1, 1, 2, 0])


def _naive_levenshtein(a, b):
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return d[-1][-1]


def _segments(x):
    return [int(v) for i, v in enumerate(x) if i == 0 or x[i - 1] != v]


def test_hand_derived_single_video():
    res = phase_metrics([PRED], [TARGET], num_classes=3)
    assert res.accuracy == pytest.approx(6 / 8)
    assert res.per_phase["precision"].tolist() == pytest.approx([2 / 3, 3 / 4, 1.0])
    assert res.per_phase["recall"].tolist() == pytest.approx([2 / 3, 1.0, 1 / 2])
    assert res.per_phase["jaccard"].tolist() == pytest.approx([1 / 2, 3 / 4, 1 / 2])
    assert res.per_phase["f1"].tolist() == pytest.approx([2 / 3, 6 / 7, 2 / 3])
    assert res.f1 == pytest.approx((2 / 3 + 6 / 7 + 2 / 3) / 3)
    # segments: target 0,1,2 ; pred 0,1,2,0 -> one insertion, 4 segments
    assert res.edit == pytest.approx(0.75) == pytest.approx(edit_score(PRED, TARGET))
    assert frame_accuracy(torch.from_numpy(PRED), TARGET) == pytest.approx(0.75)


def test_relaxed_boundary_hand_case_and_fps_pitfall():
    # frame 2 predicts the next phase 1 frame before the transition: tolerated with a 1-frame window
    assert relax_boundaries(PRED, TARGET, window=1).tolist() == [0, 0, 0, 1, 1, 1, 2, 0]
    res = phase_metrics([PRED], [TARGET], num_classes=3, fps=1.0, relaxed_seconds=1.0)
    assert res.relaxed_window == 1 and res.accuracy == pytest.approx(7 / 8)
    # the last frame predicting the *previous-to-previous* phase is never tolerated
    assert relax_boundaries(PRED, TARGET, window=100)[-1] == 0
    # 1 fps labels: a 10 s window is 10 frames; the 25-fps window (250 frames) swallows whole phases
    t = np.repeat([0, 1, 2], 300)
    p = np.roll(t, 60)  # predictions lag a minute behind
    p[:60] = 0
    right = phase_metrics([p], [t], num_classes=3, fps=1, relaxed_seconds=10).accuracy
    wrong = phase_metrics([p], [t], num_classes=3, fps=25, relaxed_seconds=10).accuracy
    strict = phase_metrics([p], [t], num_classes=3).accuracy
    assert strict < right < wrong
    assert right == pytest.approx((900 - 2 * 50) / 900)
    assert wrong == pytest.approx(1.0)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 100_000), n_videos=st.integers(1, 5), k=st.integers(2, 6))
def test_pooled_frames_equal_sklearn(seed, n_videos, k):
    rng = np.random.default_rng(seed)
    targets = [np.sort(rng.integers(0, k, rng.integers(5, 60))) for _ in range(n_videos)]
    preds = [np.where(rng.random(t.size) < 0.7, t, rng.integers(0, k, t.size)) for t in targets]
    res = phase_metrics(preds, targets, num_classes=k, average="frames")
    t_all, p_all = np.concatenate(targets), np.concatenate(preds)
    labels = np.arange(k)
    pr, rc, f1, _ = precision_recall_fscore_support(t_all, p_all, labels=labels, zero_division=0)
    jac = jaccard_score(t_all, p_all, labels=labels, average=None, zero_division=0)
    present = np.isin(labels, t_all)
    # named difference: phases absent from the ground truth are NaN here, 0 in scikit-learn
    assert np.isnan(res.per_phase["recall"][~present]).all()
    for ours, ref in ((res.per_phase["precision"], pr), (res.per_phase["recall"], rc),
                      (res.per_phase["f1"], f1), (res.per_phase["jaccard"], jac)):
        assert ours[present] == pytest.approx(ref[present], abs=1e-12)
    assert res.accuracy == pytest.approx(accuracy_score(t_all, p_all))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 100_000), n_videos=st.integers(1, 6))
def test_per_video_average_and_permutation_invariance(seed, n_videos):
    rng = np.random.default_rng(seed)
    k = 4
    targets = [np.sort(rng.integers(0, k, rng.integers(4, 40))) for _ in range(n_videos)]
    preds = [np.where(rng.random(t.size) < 0.6, t, rng.integers(0, k, t.size)) for t in targets]
    res = phase_metrics(preds, targets, num_classes=k)
    accs, macro_f1, edits = [], [], []
    for p, t in zip(preds, targets):
        present = np.unique(t)
        _, _, f1, _ = precision_recall_fscore_support(t, p, labels=present, zero_division=0)
        accs.append(accuracy_score(t, p))
        macro_f1.append(f1.mean())
        sp, stt = _segments(p), _segments(t)
        edits.append(1 - _naive_levenshtein(sp, stt) / max(len(sp), len(stt)))
    assert res.accuracy == pytest.approx(np.mean(accs))
    assert res.f1 == pytest.approx(np.mean(macro_f1))
    assert res.edit == pytest.approx(np.mean(edits))
    perm = rng.permutation(n_videos)
    res2 = phase_metrics([preds[i] for i in perm], [targets[i] for i in perm], num_classes=k)
    for name in PHASE_SUMMARY_NAMES:
        assert getattr(res2, name) == pytest.approx(getattr(res, name))
    for key in res.per_phase:
        np.testing.assert_allclose(res2.per_phase[key], res.per_phase[key])


@settings(max_examples=40, deadline=None)
@given(a=st.lists(st.integers(0, 3), max_size=25), b=st.lists(st.integers(0, 3), min_size=1, max_size=25))
def test_edit_distance_matches_naive_dp(a, b):
    from medimg_bench.metrics.video import levenshtein

    assert levenshtein(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)) == _naive_levenshtein(a, b)


def test_scores_input_and_ignore_index():
    scores = np.eye(3)[PRED] + 0.1
    res = phase_metrics([torch.from_numpy(scores)], [TARGET], num_classes=3)
    assert res.accuracy == pytest.approx(0.75)
    t = TARGET.copy()
    t[2] = -1  # unlabelled frame: dropped
    assert phase_metrics([PRED], [t], num_classes=3, ignore_index=-1).accuracy == pytest.approx(6 / 7)


def test_invalid_inputs():
    with pytest.raises(ValueError, match="video 1: pred and target lengths differ"):
        phase_metrics([PRED, PRED[:5]], [TARGET, TARGET], num_classes=3)
    with pytest.raises(ValueError, match=r"video 0: target has labels outside \[0, 3\)"):
        phase_metrics([PRED], [TARGET + 1], num_classes=3)
    with pytest.raises(ValueError, match="NaN"):
        phase_metrics([np.full((8, 3), np.nan)], [TARGET], num_classes=3)
    with pytest.raises(ValueError, match="fps"):
        phase_metrics([PRED], [TARGET], num_classes=3, relaxed_seconds=10)
    with pytest.raises(ValueError, match="lengths differ: 1 vs 2 videos"):
        phase_metrics([PRED], [TARGET, TARGET], num_classes=3)
    with pytest.raises(ValueError, match="integers"):
        phase_metrics([PRED + 0.5], [TARGET], num_classes=3)


def test_stateful_phase_metrics():
    rng = np.random.default_rng(1)
    targets = [np.sort(rng.integers(0, 4, 30)) for _ in range(3)]
    preds = [np.where(rng.random(30) < 0.7, t, rng.integers(0, 4, 30)) for t in targets]
    m = create_metric("phase_metrics", num_classes=4, fps=1, relaxed_seconds=2)
    assert isinstance(m, PhaseMetricsState)
    m.update(preds[:2], targets[:2], ids=["v1", "v2"])
    m.update(torch.from_numpy(np.stack(preds[2:])), torch.from_numpy(np.stack(targets[2:])), ids=["v3"])
    ref = phase_metrics(preds, targets, num_classes=4, fps=1, relaxed_seconds=2)
    ids, vals = m.values()
    assert ids == ["v1", "v2", "v3"] and vals.shape == (3, 6)
    np.testing.assert_allclose(vals.numpy(), ref.per_video)
    assert m.compute().tolist() == pytest.approx([getattr(ref, k) for k in PHASE_SUMMARY_NAMES])
    pooled = m.summary(average="frames")
    ref_pooled = phase_metrics(preds, targets, num_classes=4, fps=1, relaxed_seconds=2, average="frames")
    assert pooled.jaccard == pytest.approx(ref_pooled.jaccard)
    # a distributed gather with a duplicated video counts it once
    r0 = {"ids": ["v1", "v2"], "confusions": m.confusions[:2], "edits": m.edits[:2]}
    r1 = {"ids": ["v3", "v1"], "confusions": [m.confusions[2], m.confusions[0]], "edits": [m.edits[2], m.edits[0]]}
    m.load_state(r0)
    m.merge_state([r1])
    assert m.ids == ["v1", "v2", "v3"] and len(m.confusions) == 3
