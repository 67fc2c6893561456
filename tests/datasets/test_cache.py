"""Opt-in caches: in-memory LRU bounded by bytes, on-disk safetensors cache shared by workers."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from medimg_bench.datasets.base import ManifestDataset, TableDataset
from medimg_bench.datasets.cache import CachedDataset, DiskCache, sample_nbytes


class CountingDataset(ManifestDataset):
    """Reads ``.npy`` files and counts the loads (to see cache hits)."""

    def __init__(self, manifest: pd.DataFrame, root: Path, **kw: Any) -> None:
        super().__init__(manifest, root=root, path_columns=["image"], classes=["a", "b"], **kw)
        self.loads = 0

    def load(self, row):
        self.loads += 1
        array = np.load(self.resolve(row["image"]), allow_pickle=False)
        return {
            "id": row["id"],
            "image": torch.from_numpy(array.astype(np.float32))[None],
            "label": int(row["label"]),
            "meta": {
                **self.meta_for(row),
                "spacing": (0.5, 0.75),
                "affine": np.diag([0.5, 0.75, 1.0, 1.0]),
                "view": None,
                "weight": float("nan"),
            },
            "report": "no acute findings",
            "extra": [torch.arange(3), (1, "x")],
        }


def _write(tmp_path: Path, n: int = 6, size: int = 16) -> CountingDataset:
    rows = []
    for i in range(n):
        arr = np.random.default_rng(i).normal(size=(size, size))
        np.save(tmp_path / f"img{i}.npy", arr)
        rows.append({"id": f"s{i}", "patient_id": f"p{i}", "image": f"img{i}.npy", "label": i % 2})
    return CountingDataset(pd.DataFrame(rows), tmp_path)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    return a == b and type(a) is type(b)


def test_sample_nbytes_counts_tensor_bytes():
    s = {"image": torch.zeros(2, 4, 4), "mask": np.zeros((4, 4), np.uint8), "id": "abc"}
    assert sample_nbytes(s) == 2 * 16 * 4 + 16 + len("image") + len("mask") + len("id") + 3


def test_memory_cache_hits_and_stays_within_budget(tmp_path):
    ds = _write(tmp_path, n=6)
    one = sample_nbytes(ds[0])
    ds.loads = 0
    cached = CachedDataset(ds, max_bytes=int(one * 3.5))
    first = [cached[i] for i in range(3)]
    again = [cached[i] for i in range(3)]
    assert ds.loads == 3 and all(_same(a, b) for a, b in zip(first, again))
    info = cached.cache_info()
    assert info["hits"] == 3 and info["misses"] == 3 and info["items"] == 3
    for i in range(6):  # three more samples evict the three oldest
        cached[i]
    info = cached.cache_info()
    assert info["bytes"] <= cached.max_bytes and info["items"] == 3 and info["evictions"] >= 3
    assert len(cached) == 6 and cached.classes == ["a", "b"]  # attributes forwarded


def test_memory_cache_returns_copies_and_applies_outer_transform(tmp_path):
    ds = _write(tmp_path, n=2)
    flips = []

    def augment(sample):
        flips.append(sample["id"])
        sample["image"].mul_(-1)  # in place: must not reach the cache
        return sample

    cached = CachedDataset(ds, max_bytes=1 << 20, transform=augment)
    a = cached[0]
    b = cached[0]
    assert torch.equal(a["image"], b["image"]) and ds.loads == 1 and flips == ["s0", "s0"]
    assert torch.equal(-a["image"], ds[0]["image"])


def test_sample_larger_than_budget_is_not_kept(tmp_path):
    ds = _write(tmp_path, n=2)
    cached = CachedDataset(ds, max_bytes=10)
    cached[0]
    cached[0]
    assert ds.loads == 2 and cached.cache_info()["items"] == 0
    with pytest.raises(ValueError, match="max_bytes"):
        CachedDataset(ds, max_bytes=-1)


def test_warm_then_dataloader_workers_share_nothing_new(tmp_path):
    ds = _write(tmp_path, n=4)
    cached = CachedDataset(ds, max_bytes=1 << 20)
    assert cached.warm() == 4 and ds.loads == 4
    loader = torch.utils.data.DataLoader(cached, batch_size=2, num_workers=0, collate_fn=list)
    assert sum(len(b) for b in loader) == 4 and ds.loads == 4


def test_disk_cache_round_trip_preserves_types(tmp_path):
    ds = _write(tmp_path, n=3)
    cache = DiskCache(ds, tmp_path / "cache")
    fresh = [ds[i] for i in range(3)]
    ds.loads = 0
    first = [cache[i] for i in range(3)]
    assert ds.loads == 3
    second = [cache[i] for i in range(3)]
    assert ds.loads == 3 and cache.cache_info()["hits"] == 3 and cache.cache_info()["items"] == 3
    for a, b, c in zip(fresh, first, second):
        assert _same(a, b) and _same(a, c)
    # another wrapper (another worker or job) over the same directory reads without loading
    other = DiskCache(CountingDataset(ds.manifest, tmp_path), tmp_path / "cache")
    assert _same(other[1], fresh[1]) and other.dataset.loads == 0
    # no pickle anywhere: only safetensors files
    files = list((tmp_path / "cache").rglob("*"))
    assert all(f.is_dir() or f.suffix == ".safetensors" for f in files)


def test_disk_cache_key_changes_with_file_row_and_transform(tmp_path):
    ds = _write(tmp_path, n=2)
    cache = DiskCache(ds, tmp_path / "cache")
    k0 = cache.key(0)
    assert cache.key(0) == k0 and cache.key(1) != k0
    old = cache[0]["image"].clone()
    # rewrite the file: size/mtime change → new key → fresh content, never the stale entry
    np.save(tmp_path / "img0.npy", np.ones((16, 16)))
    st = os.stat(tmp_path / "img0.npy")
    os.utime(tmp_path / "img0.npy", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert cache.key(0) != k0
    new = cache[0]["image"]
    assert torch.equal(new, torch.ones(1, 16, 16)) and not torch.equal(new, old)
    # a label edit in the manifest changes the key too
    relabelled = ds.with_manifest(ds.manifest.assign(label=[1, 1]))
    assert DiskCache(relabelled, tmp_path / "cache").key(0) != cache.key(0)
    # a dataset with a transform needs a transform key, and the key takes part in the cache key
    with_tf = ds.with_manifest(ds.manifest)
    with_tf.transform = lambda s: s
    with pytest.raises(ValueError, match="transform_key"):
        DiskCache(with_tf, tmp_path / "cache")
    assert DiskCache(with_tf, tmp_path / "cache", transform_key="v1").key(0) != cache.key(0)


def test_disk_cache_recovers_from_a_damaged_entry(tmp_path, caplog):
    ds = _write(tmp_path, n=1)
    cache = DiskCache(ds, tmp_path / "cache")
    expected = cache[0]
    path = cache.path_for(cache.key(0))
    path.write_bytes(b"\x00garbage")
    ds.loads = 0
    assert _same(cache[0], expected) and ds.loads == 1
    assert "unreadable" in caplog.text
    assert _same(cache[0], expected) and ds.loads == 1  # rewritten, hits again


def test_disk_cache_prunes_to_budget_least_recent_first(tmp_path):
    ds = _write(tmp_path, n=5)
    cache = DiskCache(ds, tmp_path / "cache")
    for i in range(5):
        cache[i]
        p = cache.path_for(cache.key(i))
        os.utime(p, ns=(0, (1_000 + i) * 10**9))  # deterministic recency order
    size = cache.path_for(cache.key(0)).stat().st_size
    removed = cache.prune(max_bytes=2 * size)
    assert removed == 3
    left = {p.name for p in (tmp_path / "cache").rglob("*.safetensors")}
    assert left == {cache.path_for(cache.key(i)).name for i in (3, 4)}
    bounded = DiskCache(ds, tmp_path / "c2", max_bytes=2 * size, prune_every=1)
    for i in range(5):
        bounded[i]
        time.sleep(0.01)
    assert bounded.cache_info()["bytes"] <= 2 * size


def test_disk_cache_concurrent_writers_leave_whole_files(tmp_path):
    """Threads writing the same entries race on the rename; every reader sees a whole file."""
    from concurrent.futures import ThreadPoolExecutor

    ds = _write(tmp_path, n=4, size=64)
    caches = [DiskCache(CountingDataset(ds.manifest, tmp_path), tmp_path / "cache") for _ in range(4)]
    with ThreadPoolExecutor(4) as pool:
        out = list(pool.map(lambda ci: [caches[ci % 4][i] for i in range(4)] * 3, range(8)))
    expected = [ds[i] for i in range(4)]
    for batch in out:
        assert all(_same(a, b) for a, b in zip(batch, expected * 3))
    assert not list((tmp_path / "cache").rglob(".tmp-*"))
    assert DiskCache(ds, tmp_path / "cache").cache_info()["items"] == 4


def test_disk_cache_with_dataloader_workers(tmp_path):
    from PIL import Image

    rows = []
    for i in range(4):
        Image.fromarray(np.full((8, 8), i * 40, np.uint8)).save(tmp_path / f"{i}.png")
        rows.append({"id": f"s{i}", "image": f"{i}.png", "label": i % 2})
    ds = TableDataset(pd.DataFrame(rows), root=tmp_path, label_columns=["label"])
    cache = DiskCache(ds, tmp_path / "cache")
    loader = torch.utils.data.DataLoader(cache, batch_size=2, num_workers=2, collate_fn=list)
    got = [s for b in loader for s in b]
    assert [s["id"] for s in got] == ["s0", "s1", "s2", "s3"]
    assert cache.cache_info()["items"] == 4  # written by the workers, visible to the parent
    assert float(cache[3]["image"].max()) == 120.0 and cache.hits == 1


def test_unsupported_values_are_returned_uncached(tmp_path, caplog):
    ds = _write(tmp_path, n=1)

    class Odd(CountingDataset):
        def load(self, row):
            s = super().load(row)
            s["meta"]["when"] = object()
            return s

    odd = Odd(ds.manifest, tmp_path)
    cache = DiskCache(odd, tmp_path / "cache")
    assert "image" in cache[0] and "cannot be cached" in caplog.text
    assert cache.cache_info()["items"] == 0
