"""The embedding cache is keyed on the dataset's content and options, not its manifest alone
(issue #19 item 1: PNGs shuffled under a ``dataset=csv`` root reused every cached embedding,
AUROC 0.743 against 0.531 fresh)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from PIL import Image

from medimg_bench.models.encoders import Encoder
from medimg_bench.protocols.embeddings import cached_embeddings
from medimg_bench.registry import create_dataset

OLD = 1_600_000_000


@pytest.fixture
def csv_root(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "data"
    root.mkdir()
    lines = ["path,label"]
    for i in range(8):
        Image.fromarray(np.full((16, 16), 30 * i, dtype=np.uint8)).save(root / f"img{i}.png")
        os.utime(root / f"img{i}.png", (OLD, OLD))
        lines.append(f"img{i}.png,{'ab'[i % 2]}")
    (root / "labels.csv").write_text("\n".join(lines) + "\n")
    return root


def _encoder():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU())
    return Encoder(net, kind="test", config={"net": "conv4"}, preprocess={"channels": 1, "size": None})


def test_shuffled_files_and_other_options_are_not_served_from_the_cache(csv_root, tmp_path):
    kw = {"split": "test", "model_name": "conv4", "cache_dir": tmp_path / "emb", "batch_size": 4}
    first = cached_embeddings(_encoder(), create_dataset("csv", root=csv_root), **kw)
    assert cached_embeddings(_encoder(), create_dataset("csv", root=csv_root), **kw).source == "cache"
    a, b = csv_root / "img0.png", csv_root / "img1.png"
    os.rename(a, csv_root / ".t")
    os.rename(b, a)
    os.rename(csv_root / ".t", b)
    shuffled = cached_embeddings(_encoder(), create_dataset("csv", root=csv_root), **kw)
    assert shuffled.source == "computed" and "dataset_identity.content_sha256" in shuffled.refused
    assert torch.equal(shuffled.x[0], first.x[1]) and torch.equal(shuffled.x[1], first.x[0])
    other = cached_embeddings(_encoder(), create_dataset("csv", root=csv_root, normalize="none"), **kw)
    assert other.source == "computed" and "normalize" in other.refused
