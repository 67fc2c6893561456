from pathlib import Path

import pytest

from medimg_bench.registry import DATASETS, METRICS, MODELS, TASKS, Registry
from tests.conftest import SHARED_DATA


def test_register_create_list_and_defaults():
    reg = Registry("widget")

    @reg.register("square", tags=("shape",), side=2)
    def make(side: int, color: str = "red"):
        return (side, color)

    reg.register("cube", side=3)(make)
    assert reg.create("square") == (2, "red")
    assert reg.create("square", side=5, color="blue") == (5, "blue")
    assert reg.create("cube") == (3, "red")
    assert reg.list() == ["cube", "square"]
    assert reg.list("sq*") == ["square"]
    assert reg.list(tag="shape") == ["square"]
    assert "cube" in reg and len(reg) == 2


def test_unknown_name_suggests_close_matches():
    reg = Registry("widget")
    reg.register("segmentation")(lambda: 1)
    with pytest.raises(KeyError, match="did you mean 'segmentation'"):
        reg.create("segmentaton")


def test_duplicate_registration_is_an_error():
    reg = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a")(lambda: 2)
    reg.register("a", overwrite=True)(lambda: 3)
    assert reg.create("a") == 3


def test_package_registries_discover_their_modules():
    assert "synthetic_cxr" in DATASETS.list()
    assert {"timm", "monai_unet"} <= set(MODELS.list())
    assert {"dice", "auroc"} <= set(METRICS.list())
    assert {"classification", "segmentation"} <= set(TASKS.list())


# -- relative data roots: resolved against the working directory once, at construction ----------
def _root_params(name: str) -> list[str]:
    import inspect

    from medimg_bench.registry import DATASETS

    params = inspect.signature(DATASETS.get(name)).parameters
    return [p for p in params if p == "root" or p.endswith("_root")]


def _dataset_names() -> list[str]:
    from medimg_bench.registry import list_datasets

    return list_datasets()


@pytest.mark.parametrize("name", _dataset_names())
def test_every_loader_gets_its_relative_root_absolute(name, tmp_path, monkeypatch):
    """Run from another directory, every registered loader receives ``root`` (and any
    ``*_root``) already absolute: a loader that joins it with the relative paths it lists can no
    longer double it (``…/Dataset/../shared/data/…/Dataset/…``, issue 36)."""
    import dataclasses

    from medimg_bench.registry import DATASETS

    seen: dict = {}
    entry = DATASETS.entry(name)
    monkeypatch.setitem(DATASETS._entries, name, dataclasses.replace(entry, factory=lambda **kw: seen.update(kw)))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    roots = _root_params(name) or ["root"]
    DATASETS.create(name, **{k: f"../data/{k}" for k in roots}, cache_dir="rel_cache")
    for k in roots:
        assert seen[k] == str(tmp_path / "data" / k), k
    assert seen["cache_dir"] == "rel_cache"  # only locations of data are roots
    DATASETS.create(name, root=Path("~/x"))
    assert seen["root"] == Path.home() / "x"
    for kept in (None, "s3://bucket/data", "/abs/path"):  # URLs and absolute paths untouched
        DATASETS.create(name, root=kept)
        assert seen["root"] == kept


def test_a_relative_root_reads_from_any_directory_later(tmp_path, monkeypatch):
    """Built from one directory with a relative root, a folder dataset reads its samples after
    the working directory changed (the root was made absolute once, at construction)."""
    import numpy as np
    from PIL import Image

    from medimg_bench.registry import create_dataset

    for sub in ("images", "masks"):
        (tmp_path / "data" / sub).mkdir(parents=True)
    Image.fromarray(np.full((8, 8), 100, np.uint8)).save(tmp_path / "data" / "images" / "a.png")
    Image.fromarray((np.arange(64).reshape(8, 8) % 2 * 255).astype(np.uint8)).save(tmp_path / "data" / "masks" / "a.png")
    monkeypatch.chdir(tmp_path)
    ds = create_dataset("seg2d_folder", root="data")
    monkeypatch.chdir("/")
    sample = ds[0]
    assert sample["mask"].sum() == 32 and ds.root == tmp_path / "data"


SHARED = SHARED_DATA / "infnet_covid_semiseg"


@pytest.mark.skipif(not SHARED.is_dir(), reason="the Inf-Net COVID-SemiSeg folder is not in ../shared/data")
def test_covid_semiseg_relative_root_as_the_docs_write_it(tmp_path, monkeypatch, capsys):
    """``datasets check covid_semiseg dataset.root=<relative>`` from another directory: all 48
    test slices found (it doubled the relative root before)."""
    import os

    from medimg_bench.cli import main

    monkeypatch.chdir(tmp_path)
    rel = os.path.relpath(SHARED.resolve(), tmp_path)
    assert main(["datasets", "check", "covid_semiseg", f"dataset.root={rel}", "--no-pixels"]) == 0
    out = capsys.readouterr().out
    assert "status: OK" in out and "] missing:" not in out and "test        48" in out
