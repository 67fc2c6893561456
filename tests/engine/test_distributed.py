"""evaluate() under torch.distributed (gloo, 2 processes) equals the single-process run."""

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from medimg_bench.engine.distributed import ShardSampler


class MeanModel:
    task = "classification"
    name = "mean"

    def to(self, device):
        return self

    def eval(self):
        return self

    def predict(self, batch):
        m = batch["image"].mean(dim=(1, 2, 3))
        return {"probs": torch.stack([m, 1 - m, m * m], dim=1)}


def _run(root):
    from medimg_bench.datasets import create
    from medimg_bench.engine.runner import evaluate

    ds = create("synthetic_cxr", root, split="all", n=11, size=16)
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
