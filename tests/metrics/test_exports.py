"""The lazy `medimg_bench.metrics` namespace and the metric registry, checked over everything."""

import importlib
import pkgutil

import pytest

import medimg_bench.metrics as M
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import METRICS


def test_no_public_name_is_exported_by_two_modules():
    owners: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(M.__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"medimg_bench.metrics.{info.name}")
        for name in getattr(mod, "__all__", ()):
            owners.setdefault(name, []).append(info.name)
    clashes = {n: mods for n, mods in owners.items() if len(mods) > 1}
    assert not clashes, f"ambiguous top-level metric names: {clashes}"


@pytest.mark.parametrize("name", METRICS.list())
def test_every_registered_metric_is_a_documented_metric(name):
    factory = METRICS.get(name)
    assert isinstance(factory, type) and issubclass(factory, Metric), name
    assert factory.__doc__ and factory.__doc__.strip(), f"metric {name!r} has no docstring"
    assert isinstance(factory.per_sample, bool)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_metric'"):
        M.not_a_metric  # noqa: B018
