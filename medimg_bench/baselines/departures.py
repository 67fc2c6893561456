"""What a ``reproduce`` run changed of its card: the overrides that move a setting the card
fixes (recipe, model, dataset options, split, task, metrics' options) away from the card's
value. Such a run is measured and shown as such, never judged against the published value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NEUTRAL_KEYS", "describe", "recipe_departures"]

#: settings that say where or how a run executes, not what it measures (a prefix matches its
#: sub-keys): overriding them is no departure from the card
NEUTRAL_KEYS = (
    "dataset.root", "dataset.options.mmap", "dataset.options.cache_dir", "device", "num_workers",
    "batch_size", "progress", "output_dir", "run_name", "overwrite", "resume", "checkpoint_every",
    "checkpoint_interval_s", "train.num_workers", "train.cache", "train.checkpoint_every", "bootstrap.n_resamples", "seed",
    "subgroups", "hydra",
)
_MISSING = "<unset>"


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _neutral(key: str) -> bool:
    return any(key == n or key.startswith(n + ".") for n in NEUTRAL_KEYS)


def flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def recipe_departures(card_overrides: Sequence[str], user_overrides: Sequence[str]) -> list[dict[str, Any]]:
    """``[{"key", "value", "card"}]`` for every setting whose value with ``user_overrides``
    differs from the card's own (``card_overrides`` composed alone); neutral keys
    (:data:`NEUTRAL_KEYS`) and metrics added beside the card's are not departures."""
    neutral = [o for o in user_overrides if _neutral(_key(o))]
    if len(neutral) == len(user_overrides):
        return []
    from medimg_bench.runs.compose import compose_config, plain

    base = flat(plain(compose_config([*card_overrides, *neutral])))
    full = flat(plain(compose_config([*card_overrides, *user_overrides])))
    out = []
    for key in sorted(set(base) | set(full)):
        if _neutral(key) or (key not in base and key.startswith("metrics.")):
            continue
        was, now = base.get(key, _MISSING), full.get(key, _MISSING)
        if was != now:
            out.append({"key": key, "value": now, "card": was})
    return out


def describe(departures: Sequence[Mapping[str, Any]]) -> str:
    """``"recipe changed: train.epochs=2, card 100; ..."`` (empty for none)."""
    if not departures:
        return ""
    parts = [f"{d['key']}={_show(d['value'])}, card {_show(d['card'])}" for d in departures]
    return "recipe changed: " + "; ".join(parts)


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ",".join(_show(x) for x in v) + "]"
    return str(v)
