"""Content hashes (medimg_bench/_hashing.py): every byte counts, each file is read once, and a
file replaced by another — even one with the same size and modification time — is read again."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil

import pytest

from medimg_bench import _hashing
from medimg_bench._hashing import FileHashCache, describe_call, hash_files, plain_value, tree_sha256

OLD = 1_600_000_000  # a modification time long past: not "racily clean"


def _write(path, data: bytes, *, mtime: int = OLD) -> None:
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))


@pytest.fixture
def counted(monkeypatch):
    """Counts the files actually read."""
    reads = []
    real = _hashing.file_sha256

    def spy(path):
        reads.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(_hashing, "file_sha256", spy)
    return reads


def test_digest_is_sha256_of_every_byte_and_cached(tmp_path, counted):
    cache = FileHashCache(tmp_path / "h.sqlite")
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    _write(a, b"alpha" * 1000)
    _write(b, b"beta")
    got = hash_files([a, b, a], cache=cache)
    assert got == {str(a): hashlib.sha256(b"alpha" * 1000).hexdigest(), str(b): hashlib.sha256(b"beta").hexdigest()}
    assert sorted(counted) == ["a.bin", "b.bin"]
    counted.clear()
    assert hash_files([a, b], cache=cache) == got and counted == []  # a stat per file, no read
    assert cache.hits == 2


def test_same_size_same_mtime_replacement_is_read_again(tmp_path, counted):
    """The issue's shuffle: files swapped by rename keep size and mtime; inode and ctime do not."""
    cache = FileHashCache(tmp_path / "h.sqlite")
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    _write(a, b"A" * 64)
    _write(b, b"B" * 64)
    first = hash_files([a, b], cache=cache)
    os.rename(a, tmp_path / "t")
    os.rename(b, a)
    os.rename(tmp_path / "t", b)
    assert os.stat(a).st_size == os.stat(b).st_size and os.stat(a).st_mtime == os.stat(b).st_mtime == OLD
    counted.clear()
    second = hash_files([a, b], cache=cache)
    assert second == {str(a): first[str(b)], str(b): first[str(a)]} and sorted(counted) == ["a.png", "b.png"]


def test_in_place_rewrite_with_restored_mtime_is_read_again(tmp_path):
    cache = FileHashCache(tmp_path / "h.sqlite")
    f = tmp_path / "w.bin"
    _write(f, b"\0" * 4096)
    before = hash_files([f], cache=cache)[str(f)]
    with open(f, "r+b") as fh:  # one byte in the middle, same size
        fh.seek(2048)
        fh.write(b"\1")
    os.utime(f, (OLD, OLD))  # mtime put back: ctime still moves
    assert hash_files([f], cache=cache)[str(f)] != before


def test_racily_clean_files_are_not_cached(tmp_path, counted):
    cache = FileHashCache(tmp_path / "h.sqlite")
    f = tmp_path / "fresh.bin"
    f.write_bytes(b"just written")  # mtime = now: a second write in the same tick could hide
    hash_files([f], cache=cache)
    hash_files([f], cache=cache)
    assert counted == ["fresh.bin", "fresh.bin"]


def test_missing_and_unusable_cache(tmp_path, caplog):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    cache = FileHashCache(blocker / "h.sqlite")  # its folder is a file: unusable
    f = tmp_path / "f.bin"
    _write(f, b"data")
    with caplog.at_level(logging.WARNING):
        got = hash_files([f, tmp_path / "absent.png"], cache=cache)
    assert got[str(f)] == hashlib.sha256(b"data").hexdigest()
    assert got[str(tmp_path / "absent.png")] == "missing"
    assert "file-hash cache" in caplog.text and "unusable" in caplog.text


def test_tree_digest_moves_with_the_folder_and_sees_a_byte_in_the_middle(tmp_path):
    """The issue's sampled signature missed weights changed in the middle of a >8 MiB file."""
    model = tmp_path / "model"
    model.mkdir()
    _write(model / "config.json", b"{}")
    big = model / "model.safetensors"
    _write(big, os.urandom(9 << 20))
    (model / ".cache").mkdir()
    (model / ".cache" / "lock").write_text("ignored")
    cache = FileHashCache(tmp_path / "h.sqlite")
    ref = tree_sha256(model, cache=cache)
    moved = tmp_path / "elsewhere"
    shutil.copytree(model, moved)
    assert tree_sha256(moved, cache=cache) == ref
    with open(big, "r+b") as fh:
        fh.seek(5 << 20)
        byte = fh.read(1)
        fh.seek(5 << 20)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(big, (OLD, OLD))
    assert tree_sha256(model, cache=cache) != ref


def test_plain_values_are_stable_across_processes():
    import numpy as np

    def f(x):
        return x

    v = plain_value({"fn": f, "arr": np.arange(4), "path": tmp_path_like(), "set": {3, 1}})
    assert v["fn"].endswith("test_plain_values_are_stable_across_processes.<locals>.f>")
    assert v["arr"].startswith("<array int64 (4,) sha256:") and v["set"] == [1, 3]
    assert " at 0x" not in str(plain_value(object()))
    call = describe_call(lambda a, *, b=2, **kw: None, (1,), {"c": 3})
    assert call == {"a": 1, "b": 2, "c": 3}


def tmp_path_like():
    from pathlib import Path

    return Path("/x/y")
