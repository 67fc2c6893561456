"""``medimg-bench reproduce CARD [overrides] | --list``: run a baseline card through the normal
pipeline and set the measured values beside the published ones (table, ``reproduce.json``,
``reproduce.png``)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medimg_bench.baselines.cards import CardError, list_cards, load_card, missing_requirements

__all__ = ["check_dataset_root", "cli_main", "reproduce", "verdict_rows"]


def _params(card: Mapping[str, Any], overrides: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Split ``name=value`` card parameters (``flag=breastmnist``) from config overrides."""
    params = {k: str(v) for k, v in (card.get("params") or {}).items()}
    rest = []
    for o in overrides:
        k, _, v = o.partition("=")
        if k in params:
            params[k] = v
        else:
            rest.append(o)
    return params, rest


def _fill(text: str, params: Mapping[str, str]) -> str:
    """Replace ``{name}`` placeholders of the card's params (other braces, e.g. ``{}``, kept)."""
    for k, v in params.items():
        text = text.replace("{" + k + "}", v)
    return text


def check_dataset_root(card: Mapping[str, Any], root: str | Path,
                       params: Mapping[str, str] | None = None) -> None:
    """Refuse a dataset root that does not match the card's ``dataset.expected`` (files present,
    sample counts per split of a MedMNIST ``.npz``). Raises :class:`CardError` naming what
    differs; returns None when it matches."""
    exp = card["dataset"].get("expected") or {}
    params = dict(params or {})
    root = Path(root)
    if not root.exists():
        raise CardError(f"{card['name']}: dataset root {root} does not exist")
    for f in exp.get("files", []):
        f = _fill(f, params)
        if not (root / f).exists():
            raise CardError(f"{card['name']}: dataset root {root} lacks {f} (the card expects "
                            f"{exp.get('files')})")
    counts = exp.get("counts") or {}
    if isinstance(counts, Mapping) and params.get("flag") in counts:
        counts = counts[params["flag"]]
    npz = exp.get("npz")
    if npz and counts:
        from medimg_bench.datasets.medmnist import npz_member

        path = root / _fill(npz, params)
        for split, n in counts.items():
            try:
                got = len(npz_member(path, f"{split}_labels", mmap=False))
            except (KeyError, ValueError, OSError) as exc:
                raise CardError(f"{card['name']}: {path}: cannot read {split}_labels: {exc}") from exc
            if got != int(n):
                raise CardError(f"{card['name']}: {path}: the {split} split has {got} images, the "
                                f"card expects {n} (not the published dataset/split)")


def _measured(summary: Mapping[str, Any], metric: str, cls: str | None) -> dict[str, Any] | None:
    m = summary.get("metrics", {}).get(metric)
    if m is None:
        return None
    e = m.get("mean") if cls is None else m.get("per_class", {}).get(cls)
    if not isinstance(e, Mapping):
        return None
    v = e.get("value", e.get("mean"))
    return {"value": v, "ci_low": e.get("ci_low"), "ci_high": e.get("ci_high")}


def verdict_rows(card: Mapping[str, Any], summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per published value: metric, class, published, measured, CI, delta and verdict
    (``reproduced`` / ``not reproduced`` / ``not measured``). Values are on the metric's own scale
    (published numbers divided by the card's ``scale``, e.g. 100 for percentages)."""
    rows = []
    for m in card["metrics"]:
        pub = m["published"]
        scale = float(m.get("scale", 1.0))
        items = pub.items() if isinstance(pub, Mapping) else [(None, pub)]
        for cls, p in items:
            cls_key = None if cls in (None, "mean", "macro") else str(cls)
            meas = _measured(summary, m["metric"], cls_key)
            row: dict[str, Any] = {"metric": m["metric"], "class": cls or "mean",
                                   "convention": m["convention"],
                                   "published": None if p is None else float(p) / scale,
                                   "measured": None, "ci_low": None, "ci_high": None,
                                   "delta": None, "rule": m.get("rule", "ci")}
            if meas is None or meas["value"] is None or p is None:
                if p is None and meas is not None and meas["value"] is not None:
                    row.update(measured=float(meas["value"]), ci_low=meas["ci_low"], ci_high=meas["ci_high"])
                row["verdict"] = "not measured" if p is not None else "no published value"
                rows.append(row)
                continue
            val, pv = float(meas["value"]), float(p) / scale
            row.update(measured=val, ci_low=meas["ci_low"], ci_high=meas["ci_high"], delta=val - pv)
            if row["rule"] == "abs_tol":
                ok = abs(val - pv) <= float(m["tolerance"])
            else:
                lo, hi = meas["ci_low"], meas["ci_high"]
                ok = lo is not None and hi is not None and not math.isnan(lo) and lo <= pv <= hi
            row["verdict"] = "reproduced" if ok else "not reproduced"
            rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.4f}"


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = f"{'metric':<19}{'class':<30}{'published':>10}{'measured':>10}{'95% CI':>20}" \
           f"{'delta':>9}  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        ci = "-" if r["ci_low"] is None else f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
        lines.append(f"{r['metric']:<19}{str(r['class'])[:29]:<30}{_fmt(r['published']):>10}"
                     f"{_fmt(r['measured']):>10}{ci:>20}{_fmt(r['delta']):>9}  {r['verdict']}")
    return "\n".join(lines)


def _plot(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [r for r in rows if r["measured"] is not None]
    if not rs:
        return
    fig, ax = plt.subplots(figsize=(6, 0.4 * len(rs) + 1.5))
    y = list(range(len(rs)))
    meas = [r["measured"] for r in rs]
    lo = [r["measured"] - (r["ci_low"] if r["ci_low"] is not None else r["measured"]) for r in rs]
    hi = [(r["ci_high"] if r["ci_high"] is not None else r["measured"]) - r["measured"] for r in rs]
    ax.errorbar(meas, y, xerr=[lo, hi], fmt="o", label="measured (95% CI)")
    ax.scatter([r["published"] for r in rs], y, marker="x", color="red", label="published", zorder=3)
    ax.set_yticks(y, [f"{r['metric']} {r['class']}" for r in rs])
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def reproduce(card: str | Mapping[str, Any], overrides: Sequence[str] = (), *,
              run_dir: str | Path | None = None) -> dict[str, Any]:
    """Run ``card`` (name, path or loaded card) with extra ``overrides``; returns the
    ``reproduce.json`` content (rows, run directory, card name). Refuses cards whose source
    values are missing (``needs_source``), whose required pieces are absent, or whose dataset
    root does not match the card."""
    from medimg_bench.runs import compose_config, run_config

    card = dict(card) if isinstance(card, Mapping) else load_card(card)
    name = card["name"]
    if card["status"] == "needs_source":
        raise CardError(f"{name}: refused: status needs_source - the published values have not "
                        "been read from the paper yet (see the card's source)")
    missing = missing_requirements(card)
    if missing:
        raise CardError(f"{name}: refused: needs pieces not available here: {', '.join(missing)}")
    params, extra = _params(card, overrides)
    other = {k: params.get(k) for k, v in (card.get("published_for") or {}).items()
             if str(params.get(k)) != str(v)}
    if other:
        # measured, never judged against numbers published for another setting
        want = ", ".join(f"{k}={v}" for k, v in card["published_for"].items())
        got = ", ".join(f"{k}={v}" for k, v in other.items())
        print(f"note: {name}: the published values are for {want} only; {got} is measured "
              "without a verdict")
        card = {**card, "metrics": [{**m, "published": {"mean": None}} for m in card["metrics"]]}
    ovs = [_fill(o, params) for o in card.get("overrides", [])] + list(extra)
    roots = [o.split("=", 1)[1] for o in ovs if o.startswith("dataset.root=")]
    if not roots or roots[-1] in ("???", ""):
        raise CardError(f"{name}: set dataset.root=... ({card['needs']['data']})")
    check_dataset_root(card, roots[-1], params)
    if card["model"]["weights"] == "user_checkpoint" and not any(
            o.startswith("model.options.checkpoint=") for o in ovs):
        raise CardError(f"{name}: set model.options.checkpoint=... ({card['needs'].get('weights')})")
    if run_dir is None:
        import time

        run_dir = Path("runs") / "reproduce" / f"{time.strftime('%Y%m%d-%H%M%S')}_{name}"
    run_dir = Path(run_dir)
    if card.get("variants"):
        rows = _run_variants(card, ovs, roots[-1], run_dir)
    else:
        cfg = compose_config(ovs)
        run_config(cfg, run_dir)
        summary = json.loads((run_dir / "summary.json").read_text())
        rows = verdict_rows(card, summary)
    judged = [r for r in rows if r["published"] is not None]
    out = {"card": name, "params": params, "run_dir": str(run_dir), "rows": rows,
           "source": card["source"],
           "reproduced": all(r["verdict"] == "reproduced" for r in judged) if judged else None}
    (run_dir / "reproduce.json").write_text(json.dumps(out, indent=2))
    _plot(rows, run_dir / "reproduce.png", f"{name} ({card['source']['table']})")
    print(_table(rows))
    return out


def _run_variants(card: Mapping[str, Any], overrides: list[str], root: str,
                  run_dir: Path) -> list[dict[str, Any]]:
    """Run each variant of the card (``variant=a,b`` in ``overrides`` picks some) into
    ``run_dir/<variant>``; returns the verdict rows of all, each with its ``variant``."""
    from medimg_bench.runs import compose_config, run_config

    pick = [o.split("=", 1)[1] for o in overrides if o.startswith("variant=")]
    overrides = [o for o in overrides if not o.startswith("variant=")]
    names = [v["name"] for v in card["variants"]]
    chosen = [x for x in pick[-1].split(",") if x] if pick else names
    unknown = [x for x in chosen if x not in names]
    if unknown:
        raise CardError(f"{card['name']}: unknown variant(s) {unknown}; the card has {names}")
    rows = []
    for v in card["variants"]:
        if v["name"] not in chosen:
            continue
        ovs = overrides + [o.replace("{dataset.root}", root) for o in v.get("overrides", [])]
        vdir = run_dir / v["name"]
        run_config(compose_config(ovs), vdir)
        summary = json.loads((vdir / "summary.json").read_text())
        metrics = [{**m, "published": v["published"][m["metric"]]} for m in card["metrics"]
                   if m["metric"] in v["published"]]
        for r in verdict_rows({**card, "metrics": metrics}, summary):
            rows.append({**r, "variant": v["name"], "class": v["name"]})
    return rows


def _list() -> str:
    lines = [f"{'card':<34}{'status':<14}{'weights':<17}{'gpu h':>6}{'cpu min':>8}  data"]
    for n in list_cards():
        try:
            c = load_card(n)
        except CardError as exc:
            lines.append(f"{n:<34}INVALID: {exc}")
            continue
        st = c["status"]
        miss = missing_requirements(c)
        if miss:
            st = "needs_pieces"
        nd = c["needs"]
        gh = "-" if nd.get("gpu_hours") is None else f"{nd['gpu_hours']:g}"
        cm = "-" if nd.get("cpu_minutes") is None else f"{nd['cpu_minutes']:g}"
        lines.append(f"{n:<34}{st:<14}{c['model']['weights']:<17}{gh:>6}{cm:>8}  {nd['data']}"
                     + (f"  [missing: {', '.join(miss)}]" if miss else ""))
    return "\n".join(lines)


def cli_main(argv: list[str]) -> int:
    """``medimg-bench reproduce CARD [key=value ...] [--run-dir DIR] | --list``; returns the exit
    code (0 reproduced or listed, 1 not reproduced, 2 refused)."""
    ap = argparse.ArgumentParser(prog="medimg-bench reproduce")
    ap.add_argument("card", nargs="?")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--list", action="store_true", help="list the cards and what each needs")
    ap.add_argument("--run-dir", default=None)
    a = ap.parse_intermixed_args(argv)  # overrides may come before and after --run-dir
    if a.list or not a.card:
        print(_list())
        return 0
    try:
        card = load_card(a.card)
        runs = sweep_overrides(card, a.overrides)
        outs = []
        for label, ovs in runs:
            run_dir = None if a.run_dir is None else (Path(a.run_dir) / label if label else a.run_dir)
            outs.append(reproduce(card, ovs, run_dir=run_dir))
    except CardError as exc:
        print(f"error: {exc}")
        return 2
    for out in outs:
        print(f"written: {Path(out['run_dir']) / 'reproduce.json'}")
    if len(outs) > 1:
        print(_sweep_table(outs))
    return 1 if any(o["reproduced"] is False for o in outs) else 0


def sweep_overrides(card: Mapping[str, Any], overrides: Sequence[str]) -> list[tuple[str, list[str]]]:
    """One ``(label, overrides)`` per run: a card parameter given as a comma-separated list
    (``flag=pathmnist,bloodmnist``) is swept, one run per value (several such parameters: their
    product); without lists, one run with no label."""
    names = set(card.get("params") or {})
    lists = {}
    fixed = []
    for o in overrides:
        k, _, v = o.partition("=")
        if k in names and "," in v:
            lists[k] = [x for x in v.split(",") if x]
        else:
            fixed.append(o)
    if not lists:
        return [("", list(overrides))]
    import itertools

    keys = sorted(lists)
    return [("_".join(f"{k}={v}" for k, v in zip(keys, combo)),
             fixed + [f"{k}={v}" for k, v in zip(keys, combo)])
            for combo in itertools.product(*(lists[k] for k in keys))]


def _sweep_table(outs: Sequence[Mapping[str, Any]]) -> str:
    """One line per run and metric of a sweep: parameters, measured value with CI, verdict."""
    lines = [f"{'run':<32}{'metric':<14}{'measured':>10}{'95% CI':>20}  verdict"]
    for out in outs:
        label = ", ".join(f"{k}={v}" for k, v in out["params"].items())
        for r in out["rows"]:
            ci = "-" if r["ci_low"] is None else f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
            lines.append(f"{label[:31]:<32}{r['metric']:<14}{_fmt(r['measured']):>10}{ci:>20}  {r['verdict']}")
    return "\n".join(lines)
