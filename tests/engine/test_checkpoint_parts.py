"""What a checkpoint part stores: metrics that hold the same scores and labels share one stored
copy, text columns of the records are packed exactly as before, and a part reads back bit for
bit."""

import pickle
import zipfile

import numpy as np
import pytest
import torch

from medimg_bench.engine.checkpoint import Checkpoint, _pack, _records_state
from medimg_bench.engine.results import Records
from medimg_bench.registry import create_metric

KEY = {"dataset": "d", "task": "classification"}


def _metrics(n_metrics: int, preds: torch.Tensor, target: torch.Tensor) -> dict:
    names = ["auroc", "auprc", "sensitivity", "specificity", "ece"][:n_metrics]
    metrics = {n: create_metric(n) for n in names}
    for rows in (slice(0, 100), slice(100, 320)):  # two blocks: a part joins each state's items
        for m in metrics.values():
            m.update(preds[rows], target[rows])  # the same tensors in every metric, as block scoring does
    return metrics


def _storages(path) -> int:
    with zipfile.ZipFile(path) as z:
        return sum(1 for n in z.namelist() if "/data/" in n and not n.endswith("/"))


def test_metrics_sharing_scores_store_them_once(tmp_path):
    g = torch.Generator().manual_seed(0)
    preds = torch.rand(320, 14, generator=g)
    target = (torch.rand(320, 14, generator=g) > 0.7).float()
    sizes = []
    for n in (1, 5):
        ck = Checkpoint(tmp_path / f"c{n}", key=KEY)
        path = ck.save(done=[f"s{i}" for i in range(320)], records=Records(), failures=[],
                       metrics=_metrics(n, preds, target), elapsed_s=0.0)
        sizes.append((path.stat().st_size, _storages(path)))
    (size1, st1), (size5, st5) = sizes
    assert st5 == st1, sizes  # five metrics, the storages of one
    assert size5 < size1 + 320 * 14 * 4, sizes  # not five copies of the 18 KB of scores


def test_a_part_reads_back_bit_for_bit(tmp_path):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.rand(16, 3, generator=g), (torch.rand(16, 3, generator=g) > 0.5).float())
               for _ in range(4)]
    metrics = {n: create_metric(n) for n in ("auroc", "auprc", "ece")}
    for p, t in batches:
        for m in metrics.values():
            m.update(p, t)
    ck = Checkpoint(tmp_path / "c", key=KEY)
    ck.begin_segment("2026-11-25T00:00:00", index=0)
    ck.save(done=[f"s{i}" for i in range(64)], records=Records(), failures=[], metrics=metrics, elapsed_s=0.0)
    saved = Checkpoint(tmp_path / "c", key=KEY).load()["metrics"]
    for name, m in metrics.items():
        for s in m._reductions:
            value, back = getattr(m, s), saved[name][s]
            if isinstance(value, list):
                assert len(back) == len(value)
                for a, b in zip(value, back):
                    assert (torch.equal(a, b) and a.dtype == b.dtype) if isinstance(a, torch.Tensor) else a == b
            else:
                assert torch.equal(value, back)


@pytest.mark.parametrize("column", [
    np.array(["a", "b", "c"], dtype=object),
    np.array(["a", None, "c"], dtype=object),
    np.array(["a", "b\x1fc"], dtype=object),  # holds the separator: kept as a list
    np.array([np.str_("x"), "y"], dtype=object),
    np.array(["u", "v"]),  # a unicode array, not object
    np.array([1.5, 2.5]),
    np.array([1, 2], dtype=np.int64),
])
def test_records_are_packed_as_to_state_then_pack(column):
    records = Records([{"id": np.array(["s0"] * len(column), dtype=object), "v": column}])
    old = [{k: _pack(v) if isinstance(v, list) else v for k, v in c.items()} for c in records.to_state()]
    new = _records_state(records, 0)
    assert list(new[0]) == list(old[0])
    for k in old[0]:
        a, b = old[0][k], new[0][k]
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b) and a.dtype == b.dtype
        else:
            assert pickle.dumps(a) == pickle.dumps(b), (a, b)
