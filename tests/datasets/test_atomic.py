"""medimg_bench._fs: atomic writes and once-only, lock-serialised cache folders.

Readers never see a partial file by construction (temporary name + ``os.replace``); these tests
check the construction: an interrupted write leaves the old content, a killed builder leaves
nothing taken for finished, and processes started together build once and read the same bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from medimg_bench._fs import COMPLETE_MARKER, atomic_path, atomic_write, locked_materialize


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


def test_atomic_write_replaces_whole_file_or_leaves_the_old_one(tmp_path):
    target = tmp_path / "a.json"
    with atomic_write(target, mode="w") as f:
        f.write("old")
    assert target.read_text() == "old"
    with pytest.raises(RuntimeError, match="boom"), atomic_write(target, mode="w") as f:
        f.write("new, half")
        raise RuntimeError("boom")
    assert target.read_text() == "old" and _leftovers(tmp_path) == []
    with pytest.raises(ValueError, match="mode"), atomic_write(target, mode="a"):
        pass


def test_atomic_path_keeps_the_suffix_for_libraries_that_write_by_name(tmp_path):
    target = tmp_path / "sub" / "x.npy"
    with atomic_path(target) as tmp:
        assert tmp.suffix == ".npy" and tmp.parent == target.parent and tmp != target
        np.save(tmp, np.arange(5))
        assert not target.exists()  # nothing visible before the rename
    assert np.load(target).tolist() == [0, 1, 2, 3, 4] and _leftovers(target.parent) == []


def test_locked_materialize_builds_once_and_cleans_up_after_a_failure(tmp_path):
    calls = []

    def build(where: Path) -> None:
        calls.append(where)
        (where / "data.txt").write_text("x")

    def failing(where: Path) -> None:
        (where / "data.txt").write_text("half")
        raise OSError("disk full")

    folder = tmp_path / "cache"
    with pytest.raises(OSError, match="disk full"):
        locked_materialize(folder, failing)
    assert not folder.exists() and _leftovers(tmp_path) == []
    assert locked_materialize(folder, build) == folder
    assert locked_materialize(folder, build) == folder  # complete: not rebuilt
    assert len(calls) == 1 and (folder / COMPLETE_MARKER).is_file()
    assert (folder / "data.txt").read_text() == "x"


def test_builder_that_does_not_complete_is_an_error(tmp_path):
    def stamp_missing(where: Path) -> None:
        (where / "data.txt").write_text("x")

    with pytest.raises(RuntimeError, match="not complete"):
        locked_materialize(tmp_path / "c", stamp_missing,
                           is_complete=lambda p: (p / "stamp").exists())
    assert not (tmp_path / "c").exists()


def test_lock_timeout_names_the_lock_file(tmp_path):
    from filelock import FileLock

    folder = tmp_path / "busy"
    with FileLock(str(tmp_path / ".busy.lock")), pytest.raises(TimeoutError) as err:
        locked_materialize(folder, lambda p: None, timeout=0.1)
    assert ".busy.lock" in str(err.value) and "busy" in str(err.value)


BUILD = textwrap.dedent(
    """
    import hashlib, os, sys, time
    from pathlib import Path
    from medimg_bench._fs import locked_materialize

    folder, log = Path(sys.argv[1]), Path(sys.argv[2])

    def build(where):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\\n")
        for i in range(20):
            (where / f"part{i}.bin").write_bytes(bytes([i]) * 50_000)
            time.sleep(0.01)  # widen the window in which a reader could see a partial folder
        if len(sys.argv) > 3:
            os._exit(9)  # killed half-way

    locked_materialize(folder, build)
    data = b"".join((folder / f"part{i}.bin").read_bytes() for i in range(20))
    print(len(data), hashlib.sha256(data).hexdigest())
    """
)


def test_four_processes_build_once_and_read_identical_bytes(tmp_path):
    folder, log = tmp_path / "shared", tmp_path / "builds.log"
    procs = [subprocess.Popen([sys.executable, "-c", BUILD, str(folder), str(log)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    assert len(set(outs)) == 1 and outs[0].startswith("1000000 ")
    assert len(log.read_text().split()) == 1  # exactly one process built
    assert _leftovers(tmp_path) == []


def test_a_killed_builder_leaves_nothing_taken_for_finished(tmp_path):
    folder, log = tmp_path / "shared", tmp_path / "builds.log"
    r = subprocess.run([sys.executable, "-c", BUILD, str(folder), str(log), "kill"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    assert not folder.exists() and len(_leftovers(tmp_path)) == 1  # only the temporary folder
    r = subprocess.run([sys.executable, "-c", BUILD, str(folder), str(log)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1000000 ") and len(log.read_text().split()) == 2
    assert _leftovers(tmp_path) == [] and os.listdir(folder).count(COMPLETE_MARKER) == 1
