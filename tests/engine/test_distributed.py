"""evaluate() under torch.distributed (gloo, 2 processes) equals the single-process run."""

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from medimg_bench.engine.distributed import ShardSampler
from tests.engine._models import MeanModel


def _run(root):
    from medimg_bench.datasets import create
    from medimg_bench.engine.runner import evaluate

    ds = create("synthetic_cxr", cache_dir=root, split="all", n=11, size=16)
    return evaluate(MeanModel(), ds, task="classification", metrics={"auroc": {}, "ece": {}},
                    batch_size=2, progress=False, n_resamples=50)


def _worker(rank, port, root, queue):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        res = _run(root)
        if rank == 0:
            queue.put((res.summary, res.samples.to_dict("list")))
    finally:
        dist.destroy_process_group()


def test_shard_sampler_covers_every_index_once():
    shards = [list(ShardSampler(11, rank=r, world_size=3)) for r in range(3)]
    assert sorted(i for s in shards for i in s) == list(range(11))
    assert [len(s) for s in shards] == [4, 4, 3]
    with pytest.raises(ValueError):
        ShardSampler(5, rank=2, world_size=2)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_process_evaluation_equals_single_process(tmp_path):
    single = _run(tmp_path)  # also writes the phantoms both ranks read
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=_worker, args=(r, port, tmp_path, queue)) for r in range(2)]
    for p in procs:
        p.start()
    summary, samples = queue.get(timeout=180)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert summary == single.summary  # values, CIs, counts: identical
    assert samples == single.samples.to_dict("list")


class CrashingMeanModel(MeanModel):
    def __init__(self, crash_at_call=None):
        self.calls, self.crash_at_call, self.seen = 0, crash_at_call, []

    def predict(self, batch):
        self.calls += 1
        if self.calls == self.crash_at_call:
            raise KeyboardInterrupt  # the job is killed mid-run, on every rank
        self.seen.extend(batch["id"])
        return super().predict(batch)


def _resume_worker(rank, port, root, ckpt, crash_at, queue):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        from medimg_bench.datasets import create
        from medimg_bench.engine.runner import evaluate

        ds = create("synthetic_cxr", cache_dir=root, split="all", n=11, size=16)
        model = CrashingMeanModel(crash_at)
        try:
            res = evaluate(model, ds, task="classification", metrics={"auroc": {}, "ece": {}}, batch_size=2,
                           progress=False, n_resamples=50, checkpoint=ckpt, checkpoint_every=1)
        except KeyboardInterrupt:
            queue.put((rank, "killed", None, None))
            return
        queue.put((rank, "done", len(model.seen), (res.summary, res.samples.to_dict("list"))))
    finally:
        dist.destroy_process_group()


def _spawn(target, args):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [ctx.Process(target=target, args=(r, port, *args, queue)) for r in range(2)]
    for p in procs:
        p.start()
    out = sorted((queue.get(timeout=180) for _ in procs), key=lambda x: x[0])
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return out


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_process_run_killed_and_resumed_gives_the_uninterrupted_result(tmp_path):
    single = _run(tmp_path)
    ckpt = tmp_path / "checkpoint"
    killed = _spawn(_resume_worker, (tmp_path, ckpt, 3))
    assert [k[1] for k in killed] == ["killed", "killed"]
    assert sorted(p.name for p in ckpt.iterdir()) == ["rank0-of-2", "rank1-of-2"]
    resumed = _spawn(_resume_worker, (tmp_path, ckpt, None))
    # each rank predicted only what its own checkpoint did not hold: 11 samples, 2 batches of 2 each saved
    assert [r[2] for r in resumed] == [6 - 4, 5 - 4]
    summary, samples = resumed[0][3]
    assert summary == single.summary
    assert samples == single.samples.to_dict("list")
