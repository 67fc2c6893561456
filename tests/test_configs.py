"""Every registered component has its config, every config names a registered component, and
every config composes. A new dataset/model/metric is one module plus one config."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from medimg_bench.registry import DATASETS, METRICS, MODELS, TASKS
from medimg_bench.resources import config_dir
from medimg_bench.runs import compose_config

CONFIGS = config_dir()


def _names(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


@pytest.mark.parametrize("name", DATASETS.list())
def test_every_dataset_has_a_config(name):
    assert (CONFIGS / "dataset" / f"{name}.yaml").exists(), f"add configs/dataset/{name}.yaml"


@pytest.mark.parametrize("group, registry", [("dataset", DATASETS), ("model", MODELS), ("task", TASKS)])
def test_configs_name_registered_components(group, registry):
    for stem in _names(group):
        cfg = OmegaConf.load(CONFIGS / group / f"{stem}.yaml")
        assert cfg.name in registry, f"configs/{group}/{stem}.yaml names unknown {group} {cfg.name!r}"
        if group == "dataset":
            assert set(cfg) >= {"name", "root", "split", "options"}, stem


def test_metric_configs_name_registered_metrics():
    for stem in _names("metrics"):
        for key, options in OmegaConf.load(CONFIGS / "metrics" / f"{stem}.yaml").items():
            assert (options or {}).get("metric", key) in METRICS, f"configs/metrics/{stem}.yaml: {key}"


@pytest.mark.parametrize("name", _names("dataset"))
def test_every_dataset_config_composes(name):
    cfg = compose_config([f"dataset={name}"])
    assert cfg.dataset.name == OmegaConf.load(CONFIGS / "dataset" / f"{name}.yaml").name


def test_benchmark_entries_compose():
    for stem in _names("benchmark"):
        for entry, overrides in OmegaConf.load(CONFIGS / "benchmark" / f"{stem}.yaml").entries.items():
            cfg = compose_config(list(overrides))
            assert cfg.task.name, (stem, entry)


def test_config_dir_is_the_repo_tree():
    repo = Path(__file__).resolve().parents[1]
    assert CONFIGS.resolve() == (repo / "configs").resolve() == (repo / "medimg_bench" / "configs").resolve()
