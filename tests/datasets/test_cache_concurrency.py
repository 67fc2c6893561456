"""The synthetic phantom cache under concurrency: processes started together on an empty
cache all succeed and read the same manifest; a writer killed half-way leaves nothing a later
reader takes for finished (fixed by construction: lock + temporary folder + atomic rename)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

READ = textwrap.dedent(
    """
    import hashlib, sys
    import medimg_bench as mb
    ds = mb.create_dataset("synthetic_cxr", split=None, n=60, size=32, seed=3)
    rows = ds.manifest.to_csv(index=False).encode()
    ds[len(ds) - 1]  # the last image is readable
    print(len(ds), hashlib.sha256(rows).hexdigest())
    """
)


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "MEDIMG_BENCH_CACHE": str(cache)}


def test_four_processes_on_an_empty_cache_read_identical_manifests(tmp_path):
    procs = [
        subprocess.Popen([sys.executable, "-c", READ], env=_env(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    assert len(set(outs)) == 1 and outs[0].startswith("60 ")
    assert not list(tmp_path.rglob("*.tmp-*"))


KILLED = textwrap.dedent(
    """
    import os, sys
    from medimg_bench.datasets import synthetic

    def half_writer(root, **params):
        synthetic.write_synthetic_cxr(root, **params)
        (root / "manifest.csv").write_text("id,patient_id\\nonly,one\\n")  # half-written
        os._exit(9)  # killed before the write is finished

    synthetic._materialize("cxr", None, {"n": 20, "size": 16, "seed": 0}, half_writer)
    """
)


def test_a_killed_writer_leaves_nothing_a_reader_takes_for_finished(tmp_path):
    r = subprocess.run([sys.executable, "-c", KILLED], env=_env(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    finished = [p for p in tmp_path.rglob("params.json") if ".tmp-" not in str(p)]
    assert finished == []  # only a .tmp-* folder is left
    assert [p.name.split(".tmp-")[0] for p in tmp_path.rglob("*.tmp-*")] == [".cxr_n20_seed0_size16"]
    code = (
        "import medimg_bench as mb\n"
        "ds = mb.create_dataset('synthetic_cxr', split=None, n=20, size=16, seed=0)\n"
        "print(len(ds))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "20"
    assert not list(tmp_path.rglob("*.tmp-*"))  # the stale temporary folder was cleaned up
    manifests = list(tmp_path.rglob("manifest.csv"))
    assert len(manifests) == 1 and len(manifests[0].read_text().splitlines()) == 21
