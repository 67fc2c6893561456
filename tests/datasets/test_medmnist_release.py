"""The MedMNIST release tables (split sizes and MD5 of every official file) against the numbers
in the ``medmnist`` package's own ``info.py`` (fixture written by tools/medmnist_release_info.py
from medmnist 2.0.2, 2.1.0 and 3.0.2; and the installed package when there is one)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.datasets.medmnist import MEDMNIST_INFO
from medimg_bench.datasets.medmnist.release import (
    RELEASES,
    identify_file,
    official_md5,
    parse_file_name,
    split_sizes,
)

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "medmnist_release.json").read_text())
PACKAGE_OF = {"v2.0": "2.0.2", "v2.1": "2.1.0", "v3": "3.0.2"}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_split_sizes_and_md5_of_every_flag_and_size_equal_the_packages_info(release):
    info = FIXTURE["versions"][PACKAGE_OF[release]]
    assert set(info) == set(MEDMNIST_INFO)
    for flag, d in info.items():
        assert split_sizes(flag, release=release) == d["n_samples"], flag
        for size, md5 in d["md5"].items():
            assert RELEASES[release].md5(flag, int(size)) == md5, (flag, size)
        sizes = (28, 64, 128, 224) if not MEDMNIST_INFO[flag][2] else (28, 64)
        for size in sizes:  # every size we hold is one the package lists
            if RELEASES[release].md5(flag, size) is not None:
                assert str(size) in d["md5"], (flag, size)


def test_class_names_and_channels_equal_the_packages_info():
    info = FIXTURE["versions"]["3.0.2"]
    for flag, (task, channels, _is3d, classes) in MEDMNIST_INFO.items():
        d = info[flag]
        assert list(classes) == [d["label"][str(i)] for i in range(len(d["label"]))], flag
        assert channels == d["n_channels"] and task == d["task"].split(",")[0], flag


def test_against_the_installed_medmnist_package():
    info = pytest.importorskip("medmnist.info", reason="the medmnist package (dev extra) is not installed")
    for flag, d in info.INFO.items():
        assert split_sizes(flag) == d["n_samples"]
        for key, md5 in d.items():
            if key.startswith("MD5"):
                size = 28 if key == "MD5" else int(key.split("_")[1])
                assert official_md5(flag, size)["v3"] == md5


def test_releases_that_changed_a_file():
    assert split_sizes("organamnist", release="v2.0")["train"] == 34581
    assert split_sizes("organamnist", release="v3")["train"] == 34561
    assert split_sizes("nodulemnist3d", release="v2.0")["test"] == 526
    assert split_sizes("nodulemnist3d", release="v2.1")["test"] == 310
    assert official_md5("breastmnist") == dict.fromkeys(("v3", "v2.1", "v2.0"), "750601b1f35ba3300ea97c75c52ff8f6")
    assert official_md5("pathmnist", 224) == {"v3": "2c51a510bcdc9cf8ddb2af93af1eadec"}
    assert official_md5("organmnist3d", 128) == {}
    with pytest.raises(ValueError, match="unknown release"):
        split_sizes("breastmnist", release="v9")
    with pytest.raises(ValueError, match="unknown flag"):
        split_sizes("cifar10")


def test_file_names():
    assert parse_file_name("breastmnist.npz") == ("breastmnist", 28)
    assert parse_file_name("/x/pathmnist_224.npz") == ("pathmnist", 224)
    assert parse_file_name("organmnist3d_64.npz") == ("organmnist3d", 64)
    with pytest.raises(ValueError, match="unknown flag"):
        parse_file_name("mnist.npz")


def test_a_file_that_is_not_official_warns_naming_both_md5s(tmp_path):
    np.savez(tmp_path / "retinamnist.npz", train_labels=np.zeros((2, 1), np.uint8))
    with pytest.warns(UserWarning, match=r"MD5 [0-9a-f]{32} is not the official retinamnist .*"
                                         r"official MD5 bd4c0672f1bba3e3a89f0e4e876791e4"):
        check = identify_file(tmp_path / "retinamnist.npz")
    assert not check.official and check.release is None and check.as_dict()["official"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        identify_file(tmp_path / "retinamnist.npz", warn=False)
