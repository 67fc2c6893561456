"""Published-baseline cards: schema, loader and the checks ``reproduce`` runs before anything.

A card (``configs/baseline/<name>.yaml``) names one published result: its source, the dataset
and split, the model and recipe, the config overrides that run it through the normal pipeline,
and the published values with the rule for "reproduced". :func:`load_card` validates it and
raises :class:`CardError` naming the file and the field.

``source.read_from`` (required for ``status: ready``) names the text the published numbers were
actually read from (URL, or repository + path and commit); ``source.note`` says anything the
reader must know about that text (e.g. "values as quoted by <repo>, paper text not available
here"). ``published_for`` (optional) maps card ``params`` to the value the published numbers
belong to (``{flag: breastmnist}``). ``published_by`` (optional) gives the published values of
several settings: ``{param: {value: {metric: number, ..., read_from: text}}}`` (e.g. one Table 3
column per MedMNIST flag); a setting not listed is measured without a verdict, and the metrics'
own ``published`` may then be left out.

``references`` (optional) puts other published numbers beside the ones judged, never judged
themselves: a list of ``{name, note, read_from, values: {metric: number or {class: number}}}``
(e.g. the original paper's values next to a reproduction whose predictions are scored: the
paper's model's predictions are not published, so its numbers cannot be reproduced from the
card's files; ``note`` must say why). ``reproduce`` writes them to ``reproduce.json`` and prints
them under the verdict table.

``variants`` (optional) makes one card of a published table whose rows are several runs (methods,
classes): each variant has a ``name``, extra ``overrides`` (``{dataset.root}`` is replaced by the
dataset root given) and its ``published`` values by metric name; ``reproduce`` runs every
variant (or those named with ``variant=a,b``) and judges each published cell.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "STATUSES",
    "CardError",
    "card_dir",
    "list_cards",
    "load_card",
    "missing_requirements",
    "published_values",
    "validate_card",
]

STATUSES = ("ready", "needs_source", "needs_pieces")
_RULES = ("ci", "abs_tol")
_REQUIRED = ("name", "title", "status", "source", "dataset", "model", "task", "metrics", "needs")


class CardError(ValueError):
    """A card that fails the schema, or cannot be run as asked (names the card and field)."""


def card_dir() -> Path:
    """The folder holding the shipped cards (``configs/baseline``, or under
    ``$MEDIMG_BENCH_CONFIG_DIR``)."""
    from medimg_bench.resources import config_dir

    return Path(config_dir()) / "baseline"


def _err(where: str, field: str, problem: str) -> CardError:
    return CardError(f"{where}: field {field!r}: {problem}")


def _num_or_null(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def validate_card(card: Mapping[str, Any], *, where: str = "card") -> dict[str, Any]:
    """Check ``card`` against the schema; returns it as a plain dict. Raises
    :class:`CardError` naming the first bad field."""
    if not isinstance(card, Mapping):
        raise CardError(f"{where}: a card must be a mapping, got {type(card).__name__}")
    card = dict(card)
    for key in _REQUIRED:
        if key not in card:
            raise _err(where, key, "missing")
    for key in ("name", "title", "task"):
        if not isinstance(card[key], str) or not card[key]:
            raise _err(where, key, "must be a non-empty string")
    if card["status"] not in STATUSES:
        raise _err(where, "status", f"{card['status']!r} is not one of {STATUSES}")
    _validate_source(card, where)
    pfor = card.get("published_for")
    if pfor is not None:
        params = card.get("params") or {}
        if not isinstance(pfor, Mapping) or not pfor or not all(k in params for k in pfor):
            raise _err(where, "published_for", "must map card params to the value the published "
                       f"numbers are for (params: {sorted(params)})")
    by = card.get("published_by")
    if by is not None:
        _validate_published_by(by, card, where)
    for key in ("dataset", "model"):
        if not isinstance(card[key], Mapping) or not card[key].get("name"):
            raise _err(where, f"{key}.name", "missing")
    weights = card["model"].get("weights")
    if weights not in ("scratch", "user_checkpoint", "predictions", "api"):
        raise _err(where, "model.weights",
                   f"{weights!r} is not one of scratch, user_checkpoint, predictions, api")
    ov = card.get("overrides", [])
    if not isinstance(ov, list) or not all(isinstance(o, str) and "=" in o for o in ov):
        raise _err(where, "overrides", "must be a list of 'key=value' strings")
    req = card.get("requires", [])
    if not isinstance(req, list) or not all(isinstance(r, str) and ":" in r for r in req):
        raise _err(where, "requires", "must be a list of 'kind:name' strings "
                   "(module:<dotted>, metric:<name>, task:<name>, dataset:<name>, model:<name>)")
    needs = card["needs"]
    if not isinstance(needs, Mapping) or "data" not in needs:
        raise _err(where, "needs.data", "missing (what the user must supply)")
    if not _num_or_null(needs.get("gpu_hours")) or not _num_or_null(needs.get("cpu_minutes")):
        raise _err(where, "needs.gpu_hours", "gpu_hours / cpu_minutes must be numbers or null")
    mets = card["metrics"]
    if not isinstance(mets, list) or not mets:
        raise _err(where, "metrics", "must be a non-empty list")
    variants = card.get("variants")
    if variants is not None:
        _validate_variants(variants, {m.get("metric") for m in mets if isinstance(m, Mapping)}, where)
    if card.get("references") is not None:
        _validate_references(card["references"], {m.get("metric") for m in mets if isinstance(m, Mapping)}, where)
    any_null = False
    for i, m in enumerate(mets):
        any_null |= _validate_metric(m, f"metrics[{i}]", where,
                                     values_elsewhere=by is not None or variants is not None)
    if any_null and card["status"] == "ready":
        raise _err(where, "status", "a card with null published values cannot be 'ready' "
                   "(use needs_source)")
    if card["status"] == "needs_pieces" and not req:
        raise _err(where, "requires", "status needs_pieces must list what it requires")
    exp = card["dataset"].get("expected", {})
    if not isinstance(exp, Mapping):
        raise _err(where, "dataset.expected", "must be a mapping")
    return card


def _validate_variants(variants: Any, metric_names: set[Any], where: str) -> None:
    if not isinstance(variants, list) or not variants:
        raise _err(where, "variants", "must be a non-empty list")
    seen = set()
    for i, v in enumerate(variants):
        f = f"variants[{i}]"
        if not isinstance(v, Mapping) or not isinstance(v.get("name"), str) or not v.get("name"):
            raise _err(where, f"{f}.name", "missing")
        if v["name"] in seen:
            raise _err(where, f"{f}.name", f"duplicate variant {v['name']!r}")
        seen.add(v["name"])
        ov = v.get("overrides", [])
        if not isinstance(ov, list) or not all(isinstance(o, str) and "=" in o for o in ov):
            raise _err(where, f"{f}.overrides", "must be a list of 'key=value' strings")
        pub = v.get("published")
        if not isinstance(pub, Mapping) or not pub or not all(_num_or_null(x) for x in pub.values()):
            raise _err(where, f"{f}.published", "must map metric names to numbers")
        unknown = sorted(set(pub) - metric_names)
        if unknown:
            raise _err(where, f"{f}.published", f"metrics {unknown} are not in the card's metrics")


def _validate_references(refs: Any, metric_names: set[Any], where: str) -> None:
    if not isinstance(refs, list) or not refs:
        raise _err(where, "references", "must be a non-empty list")
    for i, ref in enumerate(refs):
        f = f"references[{i}]"
        if not isinstance(ref, Mapping):
            raise _err(where, f, "must be a mapping")
        for key in ("name", "note", "read_from"):
            if not isinstance(ref.get(key), str) or not ref.get(key):
                raise _err(where, f"{f}.{key}", "missing (a reference says what it is, why it is not "
                           "reproduced, and where it was read)")
        values = ref.get("values")
        if not isinstance(values, Mapping) or not values:
            raise _err(where, f"{f}.values", "must map metric names to numbers or {class: number}")
        unknown = sorted(set(values) - metric_names)
        if unknown:
            raise _err(where, f"{f}.values", f"metrics {unknown} are not in the card's metrics")
        for metric, v in values.items():
            nums = list(v.values()) if isinstance(v, Mapping) else [v]
            if not nums or not all(_num_or_null(x) and x is not None for x in nums):
                raise _err(where, f"{f}.values.{metric}", "must be a number or {class: number}")


def _validate_source(card: Mapping[str, Any], where: str) -> None:
    src = card["source"]
    if not isinstance(src, Mapping):
        raise _err(where, "source", "must be a mapping")
    for key in ("paper", "table"):
        if not isinstance(src.get(key), str) or not src.get(key):
            raise _err(where, f"source.{key}", "missing (cite the paper and its table/figure)")
    for key in ("read_from", "note"):
        if key in src and (not isinstance(src[key], str) or not src[key]):
            raise _err(where, f"source.{key}", "must be a non-empty string when present")
    if card["status"] == "ready" and not src.get("read_from"):
        raise _err(where, "source.read_from", "a 'ready' card must say where its published values "
                   "were read (URL or repository + path of the text, table and page)")


def _validate_metric(m: Any, f: str, where: str, *, values_elsewhere: bool) -> bool:
    """Check one ``metrics[i]`` entry; returns whether it holds a null published value."""
    if not isinstance(m, Mapping):
        raise _err(where, f, "must be a mapping")
    for key in ("metric", "convention"):
        if not isinstance(m.get(key), str) or not m.get(key):
            raise _err(where, f"{f}.{key}", "missing")
    pub, any_null = m.get("published"), False
    if values_elsewhere and pub is None:
        pass  # the values are in published_by
    elif isinstance(pub, Mapping):
        if not pub or not all(_num_or_null(v) for v in pub.values()):
            raise _err(where, f"{f}.published", "per-class values must be numbers or null")
        any_null = any(v is None for v in pub.values())
    elif _num_or_null(pub):
        any_null = pub is None
    else:
        raise _err(where, f"{f}.published", "must be a number, null or {class: number}")
    rule = m.get("rule", "ci")
    if rule not in _RULES:
        raise _err(where, f"{f}.rule", f"{rule!r} is not one of {_RULES}")
    if rule == "abs_tol":
        tol = m.get("tolerance")
        if not isinstance(tol, int | float) or isinstance(tol, bool) or tol < 0:
            raise _err(where, f"{f}.tolerance", "abs_tol needs a tolerance >= 0")
        if not m.get("tolerance_reason"):
            raise _err(where, f"{f}.tolerance_reason", "say why the tolerance is this wide")
    scale = m.get("scale", 1.0)
    if not isinstance(scale, int | float) or scale <= 0:
        raise _err(where, f"{f}.scale", "must be a positive number (100 for percentages)")
    return any_null


def _validate_published_by(by: Any, card: Mapping[str, Any], where: str) -> None:
    params = card.get("params") or {}
    metric_names = {m.get("metric") for m in card.get("metrics") or [] if isinstance(m, Mapping)}
    if not isinstance(by, Mapping) or not by or not all(k in params for k in by):
        raise _err(where, "published_by", f"must map card params ({sorted(params)}) to their values")
    for param, table in by.items():
        if not isinstance(table, Mapping) or not table:
            raise _err(where, f"published_by.{param}", "must map each value of the param to its metrics")
        for value, cells in table.items():
            f = f"published_by.{param}.{value}"
            if not isinstance(cells, Mapping) or not cells:
                raise _err(where, f, "must map metric names to numbers")
            nums = {k: v for k, v in cells.items() if k != "read_from"}
            unknown = sorted(set(nums) - metric_names)
            if unknown:
                raise _err(where, f, f"metrics {unknown} are not in the card's metrics")
            if not nums or not all(_num_or_null(v) and v is not None for v in nums.values()):
                raise _err(where, f, "published values must be numbers (leave a value out when not read)")
            if "read_from" in cells and (not isinstance(cells["read_from"], str) or not cells["read_from"]):
                raise _err(where, f"{f}.read_from", "must be a non-empty string when present")


def published_values(card: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The card with each metric's ``published`` set for ``params`` (from ``published_by`` or,
    for ``published_for``, kept or emptied) and a note when these params have no published
    values (measured, never judged against another setting's numbers); ``(card, None)``
    otherwise."""
    by = card.get("published_by")
    if by is not None:
        picked = {m["metric"]: None for m in card["metrics"]}
        missing = []
        for param, table in by.items():
            cells = table.get(str(params.get(param)))
            if cells is None:
                missing.append(f"{param}={params.get(param)}")
                continue
            picked.update({k: v for k, v in cells.items() if k != "read_from"})
        if missing:
            picked = dict.fromkeys(picked)
        mets = [{**m, "published": {"mean": picked.get(m["metric"])}} for m in card["metrics"]]
        note = None
        if missing or all(v is None for v in picked.values()):
            have = "; ".join(f"{p}: {', '.join(map(str, t))}" for p, t in by.items())
            note = (f"note: {card['name']}: published values exist for {have} only; "
                    f"{', '.join(missing)} is measured without a verdict")
        return {**card, "metrics": mets}, note
    other = {k: params.get(k) for k, v in (card.get("published_for") or {}).items()
             if str(params.get(k)) != str(v)}
    if not other:
        return dict(card), None
    want = ", ".join(f"{k}={v}" for k, v in card["published_for"].items())
    got = ", ".join(f"{k}={v}" for k, v in other.items())
    note = f"note: {card['name']}: the published values are for {want} only; {got} is measured without a verdict"
    return {**card, "metrics": [{**m, "published": {"mean": None}} for m in card["metrics"]]}, note


def load_card(name_or_path: str | Path) -> dict[str, Any]:
    """Read and validate a card by name (from :func:`card_dir`) or path; returns the card."""
    import yaml

    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = card_dir() / f"{name_or_path}.yaml"
    if not p.is_file():
        known = ", ".join(list_cards()) or "none"
        raise CardError(f"no baseline card {str(name_or_path)!r} ({p} not found); known: {known}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise CardError(f"{p}: not valid YAML: {exc}") from exc
    card = validate_card(data, where=str(p))
    card["_path"] = str(p)
    return card


def list_cards() -> list[str]:
    """Names of the shipped cards, sorted."""
    d = card_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def missing_requirements(card: Mapping[str, Any]) -> list[str]:
    """The card's ``requires`` entries that are not available now (by import / registry)."""
    from medimg_bench import registry as reg

    regs = {"metric": reg.METRICS, "task": reg.TASKS, "dataset": reg.DATASETS, "model": reg.MODELS}
    out = []
    for r in card.get("requires", []):
        kind, _, name = r.partition(":")
        ok = False
        if kind == "module":
            try:
                importlib.import_module(name)
                ok = True
            except Exception:  # noqa: BLE001 - any import failure means "missing"
                ok = False
        elif kind in regs:
            try:
                ok = name in regs[kind].list()
            except Exception:  # noqa: BLE001
                ok = False
        if not ok:
            out.append(r)
    return out
