"""Compose a run's configuration from the Hydra tree and command-line style overrides."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.resources import config_dir

__all__ = ["ConfigError", "check_overrides", "compose_config", "config_dir", "explain_compose_error", "plain",
           "resolve_aliases", "resume_overrides"]

# A task chooses its default groups: `task=segmentation` alone runs a segmentation model and
# metrics on a segmentation dataset; any of them given on the command line wins.
TASK_DEFAULTS = {
    "segmentation": {"metrics": "segmentation", "model": "monai_unet", "dataset": "synthetic_ct"},
    "vqa": {"model": "tiny_vlm", "dataset": "synthetic_vqa", "scoring": "medimg_bench"},
}
_GROUPS = ("task", "dataset", "model", "metrics", "scoring", "protocol", "benchmark", "baseline")

class ConfigError(ValueError):
    """A configuration that cannot be composed; the message names the option to set."""

def _group_choices(group: str) -> list[str]:
    folder = config_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []

def _registry_alias(group: str, name: str) -> str | None:
    """The first config of ``group`` (sorted) whose ``name:`` is ``name`` (a registry name)."""
    for stem in _group_choices(group):
        text = (config_dir() / group / f"{stem}.yaml").read_text(encoding="utf-8")
        match = re.search(r"^name:\s*([\w.-]+)", text, flags=re.MULTILINE)
        if match and match.group(1) == name:
            return stem
    return None

def resolve_aliases(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``model=timm`` (a registry name that is no config file) becomes ``model=timm_resnet10t``
    (the first config of the group with that ``name:``), and a ``task=`` brings its default
    groups (:data:`TASK_DEFAULTS`) unless given. Returns (overrides, notes)."""
    out, notes = [], []
    for ov in overrides:
        key, sep, value = ov.partition("=")
        group = key.lstrip("+~")
        if sep and group in _GROUPS and value and "," not in value and value != "null":
            if value not in _group_choices(group):
                alias = _registry_alias(group, value)
                if alias is not None:
                    notes.append(f"{group}={value}: using configs/{group}/{alias}.yaml "
                                 f"(the first config of registry name {value!r})")
                    ov = f"{key}={alias}"
        out.append(ov)
    given = {o.partition("=")[0].lstrip("+~") for o in out}
    tasks = [o.partition("=")[2] for o in out if o.partition("=")[0].lstrip("+~") == "task"]
    if tasks and "benchmark" not in given:
        for group, choice in TASK_DEFAULTS.get(tasks[-1], {}).items():
            if group not in given:
                out.append(f"{group}={choice}")
                notes.append(f"task={tasks[-1]}: {group}={choice} (the task's default)")
    return out, notes

# Keys a resume never takes from the saved run: they say where and how to run, not what.
_NOT_REPLAYED = ("resume", "overwrite", "output_dir", "hydra", "verbose")


def _saved_overrides(run_dir: Path) -> list[str] | None:
    """The overrides the run in ``run_dir`` (or the benchmark above it) was started with, from
    Hydra's ``.hydra/overrides.yaml``; None when no run directory saved them."""
    import yaml

    for d in (run_dir, *run_dir.parents):
        f = d / ".hydra" / "overrides.yaml"
        if f.is_file():
            saved = yaml.safe_load(f.read_text(encoding="utf-8")) or []
            return [str(o) for o in saved]
        if d == run_dir.parent:  # a benchmark entry's directory: look one level up, no further
            break
    return None


def resume_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """``resume=DIR`` alone brings back the overrides DIR's run was started with (saved by Hydra
    in ``DIR/.hydra/overrides.yaml``); an override given beside ``resume=`` wins over the saved
    one of the same key. Returns (overrides, notes)."""
    resume = [o.partition("=")[2] for o in overrides if o.lstrip("+~").partition("=")[0] == "resume"]
    if not resume or not resume[-1] or resume[-1] == "null":
        return list(overrides), []
    saved = _saved_overrides(Path(resume[-1]))
    if saved is None:
        return list(overrides), []
    given = {o.partition("=")[0].lstrip("+~") for o in overrides}
    replay = [o for o in saved
              if o.partition("=")[0].lstrip("+~") not in given
              and not o.partition("=")[0].lstrip("+~").startswith(_NOT_REPLAYED)]
    notes = [f"resume={resume[-1]}: using the run's saved overrides {' '.join(replay)}"] if replay else []
    at = next(i for i, o in enumerate(overrides) if o.lstrip("+~").partition("=")[0] == "resume")
    return [*overrides[:at], *replay, *overrides[at:]], notes  # among the overrides, after flags such as -m


def _flat_keys(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        keys = []
        for k, v in node.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            keys.append(path)
            keys.extend(_flat_keys(v, path))
        return keys
    return []

def _config_keys(overrides: Sequence[str]) -> list[str]:
    from omegaconf import OmegaConf

    try:
        cfg = _compose(overrides)
    except Exception:
        cfg = _compose([])
    return _flat_keys(OmegaConf.to_container(cfg, resolve=False))

def _unknown_key_message(key: str, value: str, overrides: Sequence[str]) -> str:
    group = key.split(".", 1)[0]
    rest = [o for o in overrides if not o.lstrip("+~").startswith(key)]
    keys = _config_keys(rest)
    if group in _GROUPS and group not in {k.split(".", 1)[0] for k in keys}:
        choices = _group_choices(group)
        return (f"option {key!r} belongs to the {group!r} group, which this run does not select: "
                f"add {group}=NAME (one of {', '.join(choices)}), e.g. "
                f"`medimg-bench run {group}={choices[0] if choices else 'NAME'} {key}={value}`")
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    if close:
        return (f"unknown option {key!r}; did you mean {' or '.join(repr(c) for c in close)}? "
                f"e.g. `medimg-bench run {close[0]}={value}`")
    return (f"unknown option {key!r}: no such key in the composed configuration (see "
            f"`medimg-bench run --cfg job`); a new key is added with `+{key}={value}`")

def explain_compose_error(exc: BaseException, overrides: Sequence[str]) -> str:
    """A user-facing message for a composition error: the option to set and an example."""
    text = str(exc)
    match = re.search(r"Could not override '([^']+)'", text)
    if match:
        key = match.group(1)
        value = next((o.partition("=")[2] for o in overrides if o.lstrip("+~").partition("=")[0] == key), "VALUE")
        return _unknown_key_message(key, value, overrides)
    match = re.search(r"Could not find '([\w]+)/([^']+)'", text)
    if match:
        group, name = match.groups()
        choices = _group_choices(group)
        close = difflib.get_close_matches(name, choices, n=3, cutoff=0.4)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return (f"no {group} config {name!r}: {hint}choose one of {', '.join(choices)} "
                f"(e.g. {group}={close[0] if close else choices[0]})")
    return text.strip()

def _compose(overrides: Sequence[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))

def compose_config(overrides: Sequence[str] = ()) -> Any:
    """Compose the root config with Hydra ``overrides`` (``["task=segmentation", ...]``); a
    registry name is accepted for a config group (``model=timm``). Raises :class:`ConfigError`
    naming the option to set when the overrides cannot be composed."""
    from hydra.errors import HydraException

    overrides, _ = resolve_aliases(overrides)
    try:
        return _compose(overrides)
    except HydraException as exc:
        raise ConfigError(explain_compose_error(exc, overrides)) from exc

def check_overrides(overrides: Sequence[str]) -> str | None:
    """Compose ``overrides`` once (sweep values: the first) to catch errors before Hydra's own
    message; returns the explanation, or None when they compose."""
    single = []
    for ov in overrides:
        key, sep, value = ov.partition("=")
        if not sep or key.startswith("hydra") or key.lstrip("+~").startswith("hydra"):
            continue
        if "," in value and not value.lstrip().startswith(("[", "{", "'", '"')):
            value = value.split(",", 1)[0]
        single.append(f"{key}={value}")
    try:
        _compose(single)
    except Exception as exc:  # noqa: BLE001 — any composition failure is explained
        from hydra.errors import HydraException

        if isinstance(exc, HydraException):
            return explain_compose_error(exc, single)
        return None  # interpolation/validation errors surface later with their own message
    return None

def plain(cfg: Any) -> dict[str, Any]:
    """A composed config (OmegaConf) as plain, resolved Python containers."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else dict(cfg)  # type: ignore[return-value]

