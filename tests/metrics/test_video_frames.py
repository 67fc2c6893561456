"""The per-frame phase metrics keep their states through a checkpoint (parts read with
weights_only=True) and a distributed gather (duplicates of a padding sampler dropped)."""

from __future__ import annotations

import numpy as np
import torch

from medimg_bench.engine.checkpoint import Checkpoint, restore_metrics
from medimg_bench.engine.results import Records
from medimg_bench.metrics.phase_frames import Cholec80Phase, PhaseFrames, PitVisPhase
from tests.metrics._phase_corpus import cholec80_corpus


def _batches(videos, size=50):
    rows = [(f"v{i}", j, int(p[j]), int(g[j])) for i, (g, p) in enumerate(videos) for j in range(len(g))]
    for s in range(0, len(rows), size):
        c = rows[s : s + size]
        yield (torch.tensor([r[2] for r in c]), torch.tensor([r[3] for r in c]),
               [{"video_id": v, "frame_index": j, "timestamp": float(j)} for v, j, _, _ in c],
               [f"{v}_{j}" for v, j, _, _ in c])


def _metrics():
    return {"c": Cholec80Phase(num_classes=7), "p": PitVisPhase(num_classes=7, exclude=(0,)),
            "f": PhaseFrames(num_classes=7)}


def _tables(metrics):
    return {k: {c: (ids, v.numpy()) for c, (ids, v) in m.metric_values().items()} for k, m in metrics.items()}


def _assert_same(a, b):
    for k in a:
        for c in a[k]:
            assert a[k][c][0] == b[k][c][0]
            np.testing.assert_array_equal(a[k][c][1], b[k][c][1])


def test_checkpoint_round_trip(tmp_path):
    videos = cholec80_corpus(5, seed=2)
    batches = list(_batches(videos))
    ref = _metrics()
    for b in batches:
        for m in ref.values():
            m.update(b[0], b[1], b[2], ids=b[3])
    first = _metrics()
    ck = Checkpoint(tmp_path / "ck", key={"run": "x"})
    ck.begin_segment("now", index=0)
    half = len(batches) // 2
    for i, b in enumerate(batches[:half]):
        for m in first.values():
            m.update(b[0], b[1], b[2], ids=b[3])
        if i % 3 == 2:
            ck.save(done=[], records=Records([]), failures=[], metrics=first, elapsed_s=0.0)
    ck.save(done=[], records=Records([]), failures=[], metrics=first, elapsed_s=0.0)
    resumed = _metrics()
    restore_metrics(resumed, Checkpoint(tmp_path / "ck", key={"run": "x"}).load()["metrics"])
    for b in batches[half:]:
        for m in resumed.values():
            m.update(b[0], b[1], b[2], ids=b[3])
    _assert_same(_tables(ref), _tables(resumed))


def test_two_ranks_with_padding_equal_one():
    videos = cholec80_corpus(4, seed=9)
    batches = list(_batches(videos, size=40))
    ref = _metrics()
    ranks = [_metrics(), _metrics()]
    for i, b in enumerate(batches):
        for m in ref.values():
            m.update(b[0], b[1], b[2], ids=b[3])
        for m in ranks[i % 2].values():
            m.update(b[0], b[1], b[2], ids=b[3])
    for m in ranks[1].values():  # a padding sampler repeats the first batch on the last rank
        b = batches[0]
        m.update(b[0], b[1], b[2], ids=b[3])
    merged = _metrics()
    for k, m in merged.items():
        m.load_state(ranks[0][k].state_dict())
        m.merge_state([r[k].state_dict() for r in ranks[1:]])
    _assert_same(_tables(ref), _tables(merged))
