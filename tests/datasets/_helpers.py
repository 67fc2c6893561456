"""Checks shared by the dataset-family test modules (factory access, registry, configs)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "dataset"


def create_from(module: ModuleType, name: str, root: Any, **options: Any) -> Any:
    """Build ``name`` through ``module``'s factory (the registry path is checked separately)."""
    return getattr(module, name)(root=root, **options)


def check_registered(module: ModuleType, names: Sequence[str]) -> None:
    """Each name is registered with ``module``'s factory of that name."""
    from medimg_bench.registry import DATASETS

    for name in names:
        assert DATASETS.entry(name).factory is getattr(module, name)


def check_configs_match_factories(module: ModuleType, names: Sequence[str]) -> None:
    """``configs/dataset/<name>.yaml`` names the dataset, leaves ``root`` required (``???``)
    and sets only options the factory accepts."""
    import yaml

    for name in names:
        cfg = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
        assert cfg["name"] == name and cfg["root"] == "???"
        params = inspect.signature(getattr(module, name)).parameters
        assert set(cfg["options"] or {}) <= set(params), name


def family_tests(
    module: ModuleType, names: Sequence[str]
) -> tuple[Callable[..., Any], Callable[[], None], Callable[[], None]]:
    """``create(name, root, **options)``, ``test_registered`` and ``test_configs_match_factories``
    for a dataset-family test module; assign them to those names so pytest collects the tests."""

    def create(name: str, root: Any, **options: Any) -> Any:
        """Build through the module's factory (the registry path is tested in test_registered)."""
        return create_from(module, name, root, **options)

    def test_registered() -> None:
        check_registered(module, names)

    def test_configs_match_factories() -> None:
        check_configs_match_factories(module, names)

    return create, test_registered, test_configs_match_factories


def vqa_sample(dataset: Any, index: int = 0) -> dict[str, Any]:
    """Sample ``index`` of ``dataset``, checked against the VQA sample schema."""
    from medimg_bench.sample import validate_sample

    sample = dataset[index]
    validate_sample(sample, task="vqa")
    return sample


def edit_json_item(path: Path, index: int, **fields: Any) -> None:
    """Set ``fields`` on item ``index`` of the JSON list in ``path`` (to make a bad row)."""
    import json

    items = json.loads(path.read_text())
    items[index].update(fields)
    path.write_text(json.dumps(items))


def write_breastmnist_like(root, *, sizes: tuple[int, int, int], seed: int):
    """A BreastMNIST-shaped ``breastmnist.npz`` under ``root`` (binary class: one label column,
    integers 0/1; the positives carry a bright square) with ``sizes`` images in train/val/test;
    returns ``root``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    arrs = {}
    for split, n in zip(("train", "val", "test"), sizes):
        y = rng.integers(0, 2, size=(n, 1)).astype(np.uint8)
        x = rng.integers(0, 60, size=(n, 28, 28)).astype(np.uint8)
        x[y[:, 0] == 1, 8:20, 8:20] = 230
        arrs[f"{split}_images"], arrs[f"{split}_labels"] = x, y
    np.savez(root / "breastmnist.npz", **arrs)
    return root
