"""``medimg-bench compare`` refuses two ``nih_cxr14`` runs scored against different label
releases (2017 vs v2020, as each manifest records them) unless ``--different-label-release``;
runs on one release (plain or gzipped file) compare as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.baselines.compare import cli_main, compare_runs, label_releases
from medimg_bench.datasets import create
from tests.datasets.test_nih_cxr14_releases import nih_layout


def _run(tmp: Path, name: str, *, release: str, gz: bool = False, seed: int = 0) -> Path:
    root = nih_layout(tmp / f"data_{name}", releases=("2017", "v2020"), gz=gz)
    ds = create("nih_cxr14", root, split="all", release=release)
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({"id": ds.ids, **{c: rng.random(len(ds)) for c in ds.classes}})
    table.to_csv(tmp / f"{name}.csv", index=False)
    model = mb.create_model("predictions", root=tmp / f"{name}.csv", num_classes=len(ds.classes))
    res = mb.evaluate(model, ds, task="classification", progress=False, n_resamples=10,
                      metrics={"auroc": {}})
    return Path(res.save(tmp / name, plots=False))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("releases")
    return {"old": _run(tmp, "old", release="2017"), "new": _run(tmp, "new", release="v2020", seed=1),
            "old_gz": _run(tmp, "old_gz", release="2017", gz=True, seed=2)}


def test_manifests_name_the_releases(runs):
    a, b = label_releases(runs["old"], runs["new"])
    assert (a["release"], b["release"]) == ("2017", "v2020")


def test_other_release_refused_naming_both(runs, capsys):
    with pytest.raises(ValueError, match=r"label release '2017' \(Data_Entry_2017.csv\).*'v2020'.*--different-label-release"):
        compare_runs(runs["old"], runs["new"], n_resamples=10)
    assert cli_main([str(runs["old"]), str(runs["new"]), "--n-resamples", "10"]) == 2
    assert "--different-label-release" in capsys.readouterr().err


def test_other_release_compared_when_asked(runs):
    out = compare_runs(runs["old"], runs["new"], n_resamples=10, different_label_release=True)
    assert any("label release '2017'" in n and "own labels" in n for n in out.notes)
    assert out.labels["differ"] > 0 and len(out) > 0  # 00000002_000 is labelled Nodule in v2020 only


def test_same_release_plain_and_gzipped_compare(runs):
    out = compare_runs(runs["old"], runs["old_gz"], n_resamples=10)
    assert out.labels["differ"] == 0 and not any("label release" in n for n in out.notes)
