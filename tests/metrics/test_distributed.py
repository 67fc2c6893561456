"""Real torch.distributed (gloo, 2 processes): metric states gathered from uneven shards, with the
duplicate a padding sampler adds, give exactly the single-process numbers."""

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from medimg_bench.registry import create_metric

N = 7  # odd: shards of 4 and 3, and a padding sampler repeats sample 0 on rank 1


def _data():
    g = torch.Generator().manual_seed(0)
    seg_pred = torch.randint(0, 3, (N, 12, 12, 6), generator=g)
    seg_true = torch.randint(0, 3, (N, 12, 12, 6), generator=g)
    scores = torch.rand(N, 2, generator=g)
    labels = (torch.rand(N, 2, generator=g) > 0.5).float()
    labels[0] = torch.tensor([0.0, 1.0])
    labels[1] = torch.tensor([1.0, 0.0])
    return seg_pred, seg_true, scores, labels


def _metrics():
    return {
        "seg": create_metric("segmentation", num_classes=3, metrics=["dice", "hd95", "nsd"]),
        "auroc": create_metric("auroc"),
    }


def _update(metrics, idx):
    seg_pred, seg_true, scores, labels = _data()
    ids = [f"s{i}" for i in idx]
    meta = [{"spacing": (1.0, 1.0, 2.0)} for _ in idx]
    metrics["seg"].update(seg_pred[idx], seg_true[idx], meta, ids=ids)
    metrics["auroc"].update(scores[idx], labels[idx], ids=ids)


def _summaries(metrics):
    seg = metrics["seg"].metric_values()
    order = sorted(range(len(seg["dice"][0])), key=lambda i: seg["dice"][0][i])
    return (
        {k: (sorted(v[0]), v[1][order]) for k, v in seg.items()},
        metrics["auroc"].compute(),
    )


def _worker(rank, port, queue):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.set_num_threads(1)
        metrics = _metrics()
        shard = [0, 2, 4, 6] if rank == 0 else [1, 3, 5, 0]  # rank 1 pads with a duplicate of s0
        _update(metrics, shard)
        for m in metrics.values():
            m.sync()
        if rank == 0:
            # tensors by value: a tensor shared through a file descriptor dies with this process
            # if it exits before the parent has read it (a race seen under load)
            seg, auroc = _summaries(metrics)
            queue.put(({k: (ids, v.numpy()) for k, (ids, v) in seg.items()}, auroc.numpy()))
    finally:
        dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_two_processes_equal_one_process():
    single = _metrics()
    _update(single, list(range(N)))
    seg_ref, auroc_ref = _summaries(single)

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    seg, auroc = queue.get(timeout=120)
    seg = {k: (ids, torch.from_numpy(v)) for k, (ids, v) in seg.items()}
    auroc = torch.from_numpy(auroc)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert torch.equal(auroc, auroc_ref)
    for name, (ids, values) in seg_ref.items():
        assert seg[name][0] == ids  # every sample exactly once
        assert torch.equal(seg[name][1], values)
