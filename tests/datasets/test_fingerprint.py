"""The dataset fingerprint covers everything that decides a sample: the manifest, the content of
every file it names (path columns, other columns naming files, folders) and every option the
dataset was built with — and costs a stat per file on the second run."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from medimg_bench import _hashing
from medimg_bench.datasets.base import TableDataset, dataset_identity
from medimg_bench.registry import create_dataset

OLD = 1_600_000_000


@pytest.fixture(autouse=True)
def _own_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))


def _csv_root(root, n=6, size=16):
    root.mkdir(parents=True, exist_ok=True)
    lines = ["path,label"]
    for i in range(n):
        img = np.random.default_rng(i).integers(0, 255, (size, size), dtype=np.uint8)
        Image.fromarray(img).save(root / f"img{i}.png")
        os.utime(root / f"img{i}.png", (OLD, OLD))  # hashed digests are cached (not racy)
        lines.append(f"img{i}.png,{'a' if i % 2 else 'b'}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    return root


def _swap(a, b):
    tmp = a.with_name(".swap")
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)


def test_shuffled_files_change_the_fingerprint(tmp_path):
    """Issue #19 item 1: same manifest, files shuffled under it (same size class, same mtime)."""
    root = _csv_root(tmp_path / "ds")
    before = create_dataset("csv", root=root).identity()
    _swap(root / "img0.png", root / "img1.png")
    after = create_dataset("csv", root=root).identity()
    assert after["manifest_sha256"] == before["manifest_sha256"]
    assert after["content_sha256"] != before["content_sha256"]
    assert after["fingerprint"] != before["fingerprint"]


def test_one_pixel_changes_the_fingerprint(tmp_path):
    root = _csv_root(tmp_path / "ds")
    before = create_dataset("csv", root=root).fingerprint()
    img = np.asarray(Image.open(root / "img3.png")).copy()
    img[5, 5] ^= 1
    Image.fromarray(img).save(root / "img3.png")
    assert create_dataset("csv", root=root).fingerprint() != before


def test_every_option_is_in_the_fingerprint(tmp_path):
    """Issue #19 item 1: normalize=none on resume was accepted."""
    root = _csv_root(tmp_path / "ds")
    base = create_dataset("csv", root=root)
    ident = base.identity()
    assert ident["options"]["factory"]["name"] == "medimg_bench.datasets.cxr.image_csv.csv_dataset"
    assert ident["options"]["factory"]["options"]["normalize"] == "auto"  # defaults included
    assert "root" not in ident["options"]["factory"]["options"]  # where, not what
    for opts in ({"normalize": "none"}, {"channels": 3}, {"normalize": "minmax"}):
        other = create_dataset("csv", root=root, **opts)
        assert other.fingerprint() != base.fingerprint(), opts
        assert other.identity()["content_sha256"] == ident["content_sha256"]
    assert create_dataset("csv", root=root, normalize="auto").fingerprint() == base.fingerprint()


def test_a_copy_elsewhere_has_the_same_fingerprint(tmp_path):
    root = _csv_root(tmp_path / "ds")
    copy = tmp_path / "mounted" / "elsewhere"
    shutil.copytree(root, copy)
    assert create_dataset("csv", root=copy).fingerprint() == create_dataset("csv", root=root).fingerprint()


def test_filter_and_subset_keep_the_options(tmp_path):
    root = _csv_root(tmp_path / "ds")
    ds = create_dataset("csv", root=root, normalize="none")
    sub = ds.subset(ds.ids[:3])
    assert sub.identity()["options"] == ds.identity()["options"]
    assert sub.identity()["n_files"] == 3 and sub.fingerprint() != ds.fingerprint()


def test_files_outside_path_columns_and_folders_are_hashed(tmp_path):
    root = _csv_root(tmp_path / "ds", n=2)
    (root / "reports").mkdir()
    (root / "reports" / "r0.txt").write_text("no finding")
    (root / "reports" / "r1.txt").write_text("effusion")
    (root / "frames0").mkdir()
    (root / "frames0" / "f0.png").write_bytes(b"frame0")
    (root / "frames0" / "f1.png").write_bytes(b"frame1")
    man = pd.DataFrame({"id": ["s0", "s1"], "image": ["img0.png", "img1.png"],
                        "report": ["reports/r0.txt", "reports/r1.txt"], "clip": ["frames0/", "frames0/"],
                        "finding": ["normal", "effusion"]})
    ds = TableDataset(man, root=root)
    ident = ds.identity()
    assert ident["n_files"] == 2 + 2 + 2 and ident["n_missing"] == 0
    (root / "reports" / "r1.txt").write_text("effusiom")  # same size
    assert ds.identity()["content_sha256"] != ident["content_sha256"]
    (root / "frames0" / "f1.png").write_bytes(b"frameX")
    assert ds.fingerprint() != ident["fingerprint"]


def test_constructor_options_of_a_directly_built_dataset(tmp_path):
    root = _csv_root(tmp_path / "ds", n=2)
    man = pd.DataFrame({"id": ["a", "b"], "image": ["img0.png", "img1.png"], "y": [0, 1]})
    a = TableDataset(man, root=root, label_columns=["y"])
    b = TableDataset(man, root=root, label_columns=["y"], name="other")
    opts = a.identity()["options"]["constructor"]
    assert opts["class"].endswith("TableDataset") and opts["options"]["label_columns"] == ["y"]
    assert opts["options"]["manifest"].startswith("<DataFrame 2x3")
    assert a.fingerprint() != b.fingerprint()


def test_missing_file_is_recorded_and_its_arrival_changes_the_fingerprint(tmp_path):
    root = _csv_root(tmp_path / "ds", n=3)
    (root / "img2.png").rename(tmp_path / "img2.png")
    man = pd.DataFrame({"id": ["0", "1", "2"], "image": ["img0.png", "img1.png", "img2.png"]})
    ds = TableDataset(man, root=root)
    ident = ds.identity()
    assert ident["n_missing"] == 1
    shutil.copy(tmp_path / "img2.png", root / "img2.png")
    assert ds.fingerprint() != ident["fingerprint"]


def test_second_fingerprint_reads_no_file(tmp_path, monkeypatch):
    root = _csv_root(tmp_path / "ds", n=20)
    create_dataset("csv", root=root).fingerprint()
    reads = []
    real = _hashing.file_sha256
    monkeypatch.setattr(_hashing, "file_sha256", lambda p: reads.append(p) or real(p))
    create_dataset("csv", root=root).fingerprint()
    assert reads == []


def test_identity_of_objects_without_a_fingerprint():
    ident = dataset_identity([1, 2, 3])
    assert ident["fingerprint"] is None and ident["n_samples"] == 3 and "note" in ident
