"""engine/loader.py: the in-process batches give what a DataLoader with no workers gives."""

from __future__ import annotations

import pytest
import torch

from medimg_bench.engine.loader import InProcessBatches, SafeDataset, make_loader, split_collate


class _Data(torch.utils.data.Dataset):
    """Samples whose id names their position; ``bad`` positions raise; every call is logged."""

    def __init__(self, n: int, bad: tuple[int, ...] = ()) -> None:
        self.n, self.bad, self.calls = n, set(bad), []

    def __len__(self) -> int:
        return self.n

    def sample_id(self, i: int) -> str:
        return f"s{i}"

    def __getitem__(self, i: int) -> dict:
        self.calls.append(i)
        if i in self.bad:
            raise OSError(f"cannot read s{i}")
        g = torch.Generator().manual_seed(i)
        return {"id": f"s{i}", "image": torch.rand(1, 4, 4, generator=g), "label": torch.tensor([i % 2.0]),
                "meta": {}}


def _batches(loader) -> list:
    out = []
    for batch, failed in loader:
        out.append((None if batch is None else {k: v for k, v in batch.items()}, failed))
    return out


def _same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (ba, fa), (bb, fb) in zip(a, b):
        assert fa == fb
        assert (ba is None) == (bb is None)
        if ba is not None:
            assert ba.keys() == bb.keys()
            for k in ba:
                if isinstance(ba[k], torch.Tensor):
                    assert torch.equal(ba[k], bb[k])
                else:
                    assert ba[k] == bb[k]


@pytest.mark.parametrize("n, batch_size, indices, bad", [
    (10, 4, None, ()),                     # a last partial batch
    (8, 4, None, ()),                      # whole batches only
    (9, 16, None, ()),                     # one batch larger than the data
    (12, 3, [11, 2, 5, 7, 0], ()),         # a shard's or a resume's positions, in their order
    (10, 4, None, (1, 2, 9)),              # failures inside batches and a batch of one failure
    (6, 2, None, (2, 3)),                  # a batch where every sample fails
    (0, 4, None, ()),                      # nothing to do
])
def test_same_batches_calls_and_random_state_as_a_dataloader(n, batch_size, indices, bad):
    ds_a, ds_b = _Data(n, bad), _Data(n, bad)
    torch.manual_seed(123)
    ref = torch.utils.data.DataLoader(SafeDataset(ds_a, False), batch_size=batch_size, sampler=indices,
                                      shuffle=False, num_workers=0, collate_fn=split_collate)
    want, want_len = _batches(ref), len(ref)
    after_ref = torch.rand(3)
    torch.manual_seed(123)
    positions = indices if indices is not None else range(n)
    ours = InProcessBatches(SafeDataset(ds_b, False), positions, batch_size=batch_size, collate_fn=split_collate)
    got, got_len = _batches(ours), len(ours)
    after_ours = torch.rand(3)
    _same(got, want)
    assert got_len == want_len
    assert ds_b.calls == ds_a.calls  # the same samples loaded, in the same order
    assert torch.equal(after_ours, after_ref)  # one base-seed draw per iteration, as a DataLoader


def test_make_loader_chooses_the_dataloader_only_for_workers_or_pinned_memory():
    ds = _Data(5)
    loader, _ = make_loader(ds, None, batch_size=2, num_workers=0, fail_fast=False, pin_memory=False)
    assert isinstance(loader, InProcessBatches) and len(loader.sampler) == 5 and len(loader) == 3
    loader, _ = make_loader(ds, [4, 1], batch_size=2, num_workers=0, fail_fast=False, pin_memory=True)
    assert isinstance(loader, torch.utils.data.DataLoader) and len(loader.sampler) == 2


def test_fail_fast_raises_the_loader_error():
    loader, _ = make_loader(_Data(4, bad=(2,)), None, batch_size=2, num_workers=0, fail_fast=True,
                            pin_memory=False)
    with pytest.raises(OSError, match="cannot read s2"):
        list(loader)


def test_refetch_loads_a_batch_again():
    ds = _Data(7, bad=(5,))
    loader, refetch = make_loader(ds, [6, 5, 4, 3, 2], batch_size=2, num_workers=0, fail_fast=False,
                                  pin_memory=False)
    first = _batches(loader)
    again = refetch(2)  # positions 4 and 3
    assert again["id"] == ["s4", "s3"] == first[1][0]["id"]
    assert refetch(["s6", "s5"])["id"] == ["s6"]  # by ids: a sample that does not load is left out


def test_a_batch_size_below_one_is_refused():
    with pytest.raises(ValueError, match="batch_size"):
        InProcessBatches(SafeDataset(_Data(3), False), range(3), batch_size=0, collate_fn=split_collate)
