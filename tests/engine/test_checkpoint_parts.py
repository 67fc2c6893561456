"""What a checkpoint part stores: metrics that hold the same scores and labels share one stored
copy, text columns of the records read back as they were, a part (safetensors, or ``.pt`` where
that cannot represent the state) reads back bit for bit, and the parts of the previous release
(version 3, ``.pt``) are read as before."""

import importlib.util
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from medimg_bench.engine.checkpoint import (
    Checkpoint,
    _records_state,
    read_part,
    restore_metrics,
    unpack,
)
from medimg_bench.engine.partfile import Unencodable, read_part_file, write_part
from medimg_bench.engine.results import Records
from medimg_bench.registry import create_metric

ROOT = Path(__file__).resolve().parents[2]

KEY = {"dataset": "d", "task": "classification"}


def _metrics(n_metrics: int, preds: torch.Tensor, target: torch.Tensor) -> dict:
    names = ["auroc", "auprc", "sensitivity", "specificity", "ece"][:n_metrics]
    metrics = {n: create_metric(n) for n in names}
    for rows in (slice(0, 100), slice(100, 320)):  # two blocks: a part joins each state's items
        for m in metrics.values():
            m.update(preds[rows], target[rows])  # the same tensors in every metric, as block scoring does
    return metrics


def _storages(path) -> int:
    with safe_open(path, framework="pt") as f:
        return len(list(f.keys()))


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
        for s in m.state_reductions:
            value, back = getattr(m, s), saved[name][s]
            if isinstance(value, list):
                assert len(back) == len(value)
                for a, b in zip(value, back):
                    assert (torch.equal(a, b) and a.dtype == b.dtype) if isinstance(a, torch.Tensor) else a == b
            else:
                assert torch.equal(value, back)


def _same(a, b) -> bool:
    """Equal values of equal types, tensors equal in dtype, shape and bits (NaN equal to NaN)."""
    if isinstance(a, torch.Tensor):
        return (type(b) is torch.Tensor and a.dtype == b.dtype and a.shape == b.shape
                and (not a.numel() or torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))


def _every_dtype() -> dict:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    out = {str(dt): (x * 100).to(dt) for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                                torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)}
    out.update(bool=x > 0, uint16=torch.arange(7).to(torch.uint16), uint32=torch.arange(7).to(torch.uint32),
               uint64=torch.tensor([0, 2**64 - 1], dtype=torch.uint64), scalar=torch.tensor(2.5),
               empty=torch.empty(0, 14), view=x.t()[1:], nan=torch.tensor([float("nan"), -0.0, float("inf")]))
    return out


def test_a_state_reads_back_exactly(tmp_path):
    """Every dtype, a 0-d, an empty and a non-contiguous tensor, tuples, NaN / -0.0 / huge ints in
    the JSON, long and short text (non-ASCII, a lone surrogate, the separator), the same tensor
    twice (stored once)."""
    shared = torch.arange(6.0)
    state = {"version": 4, "tensors": _every_dtype(), "pair": ("append", [shared, shared]),
             "numbers": [float("nan"), -0.0, 1e308, 2**80, -3, True, None],
             "text": {"short": "é\x1f$x", "long": "ids\x1f" * 400 + "\ud800 ü", "empty": ""},
             "nested": [{"a": ({"b": []},)}, [], {}]}
    path = tmp_path / "p.safetensors"
    write_part(state, path)
    back = read_part(path)
    assert _same(state, back)
    # one buffer per tensor, the shared one once, plus the long string and the JSON skeleton
    assert _storages(path) == len(state["tensors"]) + 1 + 2


@pytest.mark.parametrize("bad", [{1: "int key"}, {"$t": "a tag"}, np.float64(1.0), torch.tensor([1j]),
                                 {1, 2}, b"bytes", torch.zeros(2).to_sparse()])
def test_what_the_format_cannot_hold_is_refused_not_changed(tmp_path, bad):
    with pytest.raises(Unencodable):
        write_part({"x": [bad]}, tmp_path / "p.safetensors")
    assert not (tmp_path / "p.safetensors").exists()


def test_a_part_the_format_cannot_hold_is_saved_pickle_free_as_before(tmp_path):
    """A failure record holding a dict with integer keys: that part is a ``.pt`` part
    (torch.save, read with weights_only), the others safetensors; the checkpoint reads both."""
    metrics = {"auroc": create_metric("auroc")}
    ck = Checkpoint(tmp_path / "c", key=KEY)
    ck.begin_segment("t0", index=0)
    failures = []
    for part in range(3):
        metrics["auroc"].update(torch.rand(4, 2), torch.ones(4, 2), ids=[f"s{part}{i}" for i in range(4)])
        if part == 1:
            failures.append({"id": "x", "stage": "load", "error": "e", "codes": {404: "missing"}})
        ck.save(done=[f"s{p}{i}" for p in range(part + 1) for i in range(4)], records=Records(),
                failures=failures, metrics=metrics, elapsed_s=0.0)
    names = sorted(p.name for p in (tmp_path / "c").iterdir())
    assert names == ["part-000001.safetensors", "part-000002.pt", "part-000003.safetensors"]
    saved = Checkpoint(tmp_path / "c", key=KEY).load()
    assert saved["failures"] == failures and len(saved["done"]) == 12
    assert torch.equal(torch.cat(saved["metrics"]["auroc"]["preds"]), torch.cat(metrics["auroc"].preds))


def test_broken_or_foreign_safetensors_parts_are_refused_naming_the_file(tmp_path):
    from safetensors.torch import save_file

    ck = tmp_path / "c"
    ck.mkdir()
    save_file({"w": torch.zeros(2)}, ck / "part-000001.safetensors")  # model weights, not a part
    with pytest.raises(ValueError, match=r"part-000001.safetensors.*not a medimg_bench checkpoint part"):
        Checkpoint(ck, key=KEY).load()
    write_part({"version": 4, "x": torch.arange(100)}, ck / "part-000001.safetensors")
    data = (ck / "part-000001.safetensors").read_bytes()
    (ck / "part-000001.safetensors").write_bytes(data[:-10])  # torn: a save cut short by a power loss
    with pytest.raises(ValueError, match=r"part-000001.safetensors.*cannot be read safely"):
        Checkpoint(ck, key=KEY).load()
    (ck / "part-000001.safetensors").write_bytes(data)
    (ck / "part-000001.pt").write_bytes(b"x")
    with pytest.raises(ValueError, match="two parts numbered 1"):
        Checkpoint(ck, key=KEY).load()


COLUMNS = [
    np.array(["a", "b", "c"], dtype=object),
    np.array(["a", None, "c"], dtype=object),
    np.array(["a", "b\x1fc"], dtype=object),  # holds the separator: kept as a list
    np.array([np.str_("x"), "y"], dtype=object),
    np.array(["u", "v"]),  # a unicode array, not object
    np.array([1.5, 2.5]),
    np.array([1, 2], dtype=np.int64),
]


def _repeat_and_tile():
    ids = np.empty(5, dtype=object)
    ids[:] = [f"s{i}" for i in range(5)]
    names = np.asarray(["n0", "n1", "n2"], dtype=object)
    uneven = np.repeat(ids, [1, 4, 2, 3, 3])
    equal_not_same = np.array([f"s{i // 3}" for i in range(15)], dtype=object)  # equal, other objects
    with_none = np.repeat(np.array(["a", None], dtype=object), 3)
    return [np.repeat(ids, 3), np.tile(names, 5), uneven, equal_not_same, with_none,
            np.repeat(np.array(["a\x1fb", "c"], dtype=object), 4), np.tile(names, 1)]


@pytest.mark.parametrize("column", COLUMNS + _repeat_and_tile())
def test_record_columns_read_back_as_they_were(tmp_path, column):
    """Text columns are stored as runs (``np.repeat(ids, k)``), one period (``np.tile(names, b)``)
    or joined; whatever the form, the column that comes back holds the same values and types."""
    records = Records([{"id": np.array(["s0"] * len(column), dtype=object), "v": column}])
    state = _records_state(records, 0)
    write_part({"records": state}, tmp_path / "p.safetensors")
    back = Records.from_state([{k: unpack(v) for k, v in c.items()}
                               for c in read_part_file(tmp_path / "p.safetensors")["records"]])
    want = Records.from_state(records.to_state())  # what the previous release read back
    got, exp = back.chunks[0]["v"], want.chunks[0]["v"]
    assert got.dtype == exp.dtype and list(map(type, got)) == list(map(type, exp))
    assert [x for x in got] == [x for x in exp]


def test_runs_and_periods_are_stored_compactly():
    ids = np.empty(320, dtype=object)
    ids[:] = [f"s{i:07d}" for i in range(320)]
    names = np.asarray([f"c{j}" for j in range(14)], dtype=object)
    state = _records_state(Records([{"id": np.repeat(ids, 14), "class": np.tile(names, 320)}]), 0)[0]
    assert state["id"]["runs"]["n"] == 320 and state["id"]["lengths"].tolist() == [14] * 320
    assert state["class"]["tile"]["n"] == 14 and state["class"]["reps"] == 320


def _tool():
    spec = importlib.util.spec_from_file_location("v3_fixture", ROOT / "tools" / "make_v3_checkpoint_fixture.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_a_checkpoint_of_the_previous_release_reads_as_the_same_run_written_now(tmp_path):
    """``tests/engine/data/checkpoint_v3``: three ``.pt`` parts of version 3, written by the code
    of bf777f4 (``tools/make_v3_checkpoint_fixture.py``). Read now, they give what the same run
    saved by this code gives; a resume appends safetensors parts after them."""
    tool = _tool()
    new = Checkpoint(tmp_path / "now", key=tool.KEY)
    new.begin_segment("2026-11-25T00:00:00", index=0)
    tool.replay(new.save)
    assert sorted(p.suffix for p in (tmp_path / "now").iterdir()) == [".safetensors"] * 3
    old_dir = ROOT / "tests" / "engine" / "data" / "checkpoint_v3"
    assert sorted(p.name for p in old_dir.iterdir()) == [f"part-00000{i}.pt" for i in (1, 2, 3)]
    assert all(read_part(p)["version"] == 3 for p in old_dir.iterdir())
    a, b = Checkpoint(old_dir, key=tool.KEY).load(), Checkpoint(tmp_path / "now", key=tool.KEY).load()
    assert a["done"] == b["done"] and a["failures"] == b["failures"] and a["segments"] == b["segments"]
    for k in ("id", "class", "score", "label"):
        x, y = a["records"].columns()[k], b["records"].columns()[k]
        assert x.dtype == y.dtype and x.tolist() == y.tolist()
    assert _same(a["metrics"], b["metrics"])
    # a resume of the old checkpoint appends part 4 in the new format
    shutil.copytree(old_dir, tmp_path / "old")
    resumed = Checkpoint(tmp_path / "old", key=tool.KEY)
    state = resumed.load()
    resumed.begin_segment("2026-11-25T01:00:00", index=1)
    metrics = {n: create_metric(n) for n in ("auroc", "ece")}
    restore_metrics(metrics, state["metrics"])
    resumed.mark_saved(done=state["done"], records=state["records"], failures=state["failures"], metrics=metrics)
    for m in metrics.values():
        m.update(torch.full((2, 3), 0.5), torch.ones(2, 3), ids=["t0", "t1"])
    resumed.save(done=[*state["done"], "t0", "t1"], records=state["records"], failures=state["failures"],
                 metrics=metrics, elapsed_s=1.0)
    assert (tmp_path / "old" / "part-000004.safetensors").exists()
    again = Checkpoint(tmp_path / "old", key=tool.KEY).load()
    assert again["done"] == [*a["done"], "t0", "t1"]
    assert torch.equal(torch.cat(again["metrics"]["auroc"]["preds"])[-2:], torch.full((2, 3), 0.5))
