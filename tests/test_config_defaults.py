"""Each default in one place: a component's own config (``configs/dataset/<name>.yaml``,
``model/<name>.yaml``, ``task/<name>.yaml``, a ``metrics/*.yaml`` entry keyed by its metric's
name) may list an option's default for the reader, but only with the constructor's value, so
the command line and the Python API build the same thing. Presets (a config named otherwise:
``timm_resnet10t``, ``chexpert_5_micro_f1``) change options on purpose and are checked only for
options the constructor takes. ``???`` (required) and ``${...}`` (bound to another node) are
not defaults; a model option left ``null`` is not passed (``builders.build_model``)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from medimg_bench.registry import DATASETS, METRICS, MODELS, TASKS, Registry
from medimg_bench.resources import config_dir

GROUPS = {"dataset": DATASETS, "model": MODELS, "task": TASKS}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _signature_default(registry: Registry, name: str, option: str) -> tuple[str, Any]:
    """``("default", value)``, ``("required", None)``, ``("open", None)`` (taken by ``**kwargs``)
    or ``("unknown", None)`` for ``option`` of the registered ``name``."""
    entry = registry.entry(name)
    if option in entry.defaults:
        return "default", entry.defaults[option]
    factory = entry.factory
    # a class's ``**kwargs`` may go on to the ``__init__`` of a base class
    inits = ([k.__init__ for k in factory.__mro__ if "__init__" in vars(k) and k is not object]
             if isinstance(factory, type) else [factory])
    open_ = False
    for init in inits:
        params = inspect.signature(init).parameters
        if option in params:
            p = params[option]
            return ("required", None) if p.default is p.empty else ("default", p.default)
        open_ = open_ or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return ("open", None) if open_ else ("unknown", None)


def _configs() -> Iterator[tuple[str, Registry, str, dict[str, Any], bool, bool]]:
    """``(where, registry, name, options, own config?, nulls dropped?)`` of every config."""
    root = config_dir()
    for group, registry in GROUPS.items():
        for path in sorted((root / group).glob("*.yaml")):
            cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
            yield (f"{group}/{path.name}", registry, cfg["name"], dict(cfg.get("options") or {}),
                   path.stem == cfg["name"], group == "model")
    for path in sorted((root / "metrics").glob("*.yaml")):
        for key, options in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).items():
            options = dict(options or {})
            name = options.pop("metric", key)
            yield f"metrics/{path.name}:{key}", METRICS, name, options, key == name, False


def _problems() -> list[str]:
    out = []
    for where, registry, name, options, own, nulls_dropped in _configs():
        if name not in registry:
            out.append(f"{where}: {name!r} is not registered")
            continue
        for option, value in options.items():
            if value == "???" or (isinstance(value, str) and value.startswith("${")):
                continue
            kind, default = _signature_default(registry, name, option)
            if kind == "unknown":
                out.append(f"{where}: {option!r} is not an option of {name!r}")
            elif own and kind == "default" and not (value is None and nulls_dropped) \
                    and _plain(value) != _plain(default):
                out.append(f"{where}: {option}: the config says {value!r}, {name}'s signature {default!r}")
    return out


def test_configs_agree_with_the_signatures() -> None:
    problems = _problems()
    assert not problems, "config defaults that differ from the constructor's:\n" + "\n".join(problems)


def test_the_check_finds_a_disagreement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "task").mkdir()
    for group in ("dataset", "model", "metrics"):
        (tmp_path / group).mkdir()
    (tmp_path / "task" / "vqa.yaml").write_text("name: vqa\noptions:\n  max_new_tokens: 65\n  circular: false\n")
    (tmp_path / "task" / "vqa_long.yaml").write_text("name: vqa\noptions:\n  max_new_tokens: 512\n  nope: 1\n")
    (tmp_path / "metrics" / "m.yaml").write_text("dice: {include_background: true}\nmine: {metric: dice}\n")
    monkeypatch.setattr(f"{__name__}.config_dir", lambda: tmp_path)
    problems = _problems()
    assert len(problems) == 3, problems
    assert "task/vqa.yaml: max_new_tokens: the config says 65, vqa's signature 64" in problems
    assert "task/vqa_long.yaml: 'nope' is not an option of 'vqa'" in problems
    assert any(p.startswith("metrics/m.yaml:dice: include_background") for p in problems)
