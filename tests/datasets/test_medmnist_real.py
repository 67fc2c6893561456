"""The official MedMNIST v2 files in ../shared/data/medmnist (BreastMNIST, RetinaMNIST, 28x28):
the loader, the release check, every MedMNIST card's dataset check, and a 1-epoch reproduce
through the (28) cards. Skipped when the folder is absent (a fresh clone has no ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.baselines.cards import list_cards, load_card
from medimg_bench.baselines.reproduce import check_dataset_root, reproduce
from medimg_bench.datasets import create
from medimg_bench.datasets.medmnist import MEDMNIST_INFO
from medimg_bench.datasets.medmnist.release import identify_file

ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "medmnist"
pytestmark = pytest.mark.skipif(not (ROOT / "breastmnist.npz").is_file() or not (ROOT / "retinamnist.npz").is_file(),
                                reason=f"the official MedMNIST files are not in {ROOT} (../shared/data is absent)")

OFFICIAL = {
    "breastmnist": {"md5": "750601b1f35ba3300ea97c75c52ff8f6", "sizes": {"train": 546, "val": 78, "test": 156},
                    "shape": (1, 28, 28), "test_counts": [42, 114]},
    "retinamnist": {"md5": "bd4c0672f1bba3e3a89f0e4e876791e4", "sizes": {"train": 1080, "val": 120, "test": 400},
                    "shape": (3, 28, 28), "test_counts": [174, 46, 92, 68, 20]},
}
MEDMNIST_CARDS = [n for n in list_cards() if n.startswith("medmnist_")]


@pytest.mark.parametrize("flag", sorted(OFFICIAL))
def test_loader_reads_the_official_file(flag):
    want = OFFICIAL[flag]
    for split, n in want["sizes"].items():
        ds = create("medmnist", ROOT, split=split, flag=flag)
        assert len(ds) == n and ds.classes == list(MEDMNIST_INFO[flag][3])
        s = ds[n - 1]
        assert tuple(s["image"].shape) == want["shape"] and 0 <= float(s["image"].min()) <= float(s["image"].max()) <= 1
        assert isinstance(s["label"], int) and s["id"] == f"{flag}_{split}_{n - 1:06d}"
    test = create("medmnist", ROOT, split="test", flag=flag)
    assert np.bincount(test.manifest["label"].to_numpy()).tolist() == want["test_counts"]


@pytest.mark.parametrize("flag", sorted(OFFICIAL))
def test_md5_recognised_as_the_official_file(flag):
    check = identify_file(ROOT / f"{flag}.npz")
    assert check.official and check.md5 == OFFICIAL[flag]["md5"]
    assert set(check.releases) == {"v2.0", "v2.1", "v3"}  # the 28x28 files never changed


@pytest.mark.parametrize("card", MEDMNIST_CARDS)
@pytest.mark.parametrize("flag", sorted(OFFICIAL))
def test_every_medmnist_card_accepts_both_files(card, flag):
    files = check_dataset_root(load_card(card), ROOT, {"flag": flag})
    assert files[0]["official"] is True and files[0]["md5"] == OFFICIAL[flag]["md5"]


@pytest.mark.slow
@pytest.mark.parametrize("card", [c for c in MEDMNIST_CARDS if c.endswith("_28")])
@pytest.mark.parametrize("flag", sorted(OFFICIAL))
def test_one_epoch_reproduce_on_the_official_file(card, flag, tmp_path):
    """The card's recipe shortened to one epoch: it runs end to end, and is measured and shown
    as a changed recipe, never judged against the published (100-epoch) values."""
    out = reproduce(card, [f"flag={flag}", f"dataset.root={ROOT}", "train.epochs=1", "bootstrap.n_resamples=50",
                           "progress=false"], run_dir=tmp_path / "r")
    assert out["departures"] == [{"key": "train.epochs", "value": 1, "card": 100}]
    assert out["reproduced"] is None and out["data_files"][0]["official"] is True
    rows = {r["metric"]: r for r in out["rows"]}
    assert set(rows) == {"auroc", "accuracy"}
    for r in rows.values():  # a flag without a published value on this card says so instead
        assert r["verdict"] == ("recipe changed" if r["published"] is not None else "no published value")
        assert 0 <= r["ci_low"] <= r["measured"] <= r["ci_high"] <= 1
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    n_train = OFFICIAL[flag]["sizes"]["train"]
    assert manifest["training"]["epochs"] == 1 and manifest["training"]["steps"] == -(-n_train // 128)
    assert out["data_files"][0]["md5"] == OFFICIAL[flag]["md5"]  # in reproduce.json: the manifest is the run's own
    assert manifest["dataset"]["n_samples"] == OFFICIAL[flag]["sizes"]["test"]
