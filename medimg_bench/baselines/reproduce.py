"""``medimg-bench reproduce CARD [overrides] | --list``: run a baseline card through the normal
pipeline and set the measured values beside the published ones (table, ``reproduce.json``,
``reproduce.png``)."""

from __future__ import annotations

import argparse
import json
import math
import sys
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
                       params: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Refuse a dataset root that does not match the card's ``dataset.expected`` (files present,
    sample counts per split of a MedMNIST ``.npz``). Raises :class:`CardError` naming what
    differs; returns what is known of the data files (for a MedMNIST ``.npz``: its MD5, whether
    it is an official file and of which release; a file that is not warns, naming both MD5s).

    Split sizes come from the card's ``counts`` (per split, or per ``flag``) or, for a flag the
    card does not list, from the MedMNIST release the file belongs to (the newest when its MD5
    is not an official one)."""
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
    npz = exp.get("npz")
    if not npz:
        return []
    path = root / _fill(npz, params)
    files: list[dict[str, Any]] = []
    expected_from = "the card expects"
    counts = exp.get("counts") or {}
    if isinstance(counts, Mapping) and counts and not set(counts) <= {"train", "val", "test"}:
        counts = counts.get(params.get("flag")) or {}  # per flag; a flag not listed: the release's
    if card["dataset"].get("name") == "medmnist" or exp.get("release") == "medmnist":
        check = _medmnist_file(card, path, params)
        files.append(check.as_dict())
        if not counts:
            from medimg_bench.datasets.medmnist.release import split_sizes

            release = check.release or "v3"
            counts = split_sizes(check.flag, release=release)
            expected_from = f"the official {check.flag} file (MedMNIST {release}) has"
    for split, n in counts.items():
        try:
            got = len(_npz_member(path, f"{split}_labels"))
        except (KeyError, ValueError, OSError) as exc:
            raise CardError(f"{card['name']}: {path}: cannot read {split}_labels: {exc}") from exc
        if got != int(n):
            raise CardError(f"{card['name']}: {path}: the {split} split has {got} images, "
                            f"{expected_from} {n} (not the published dataset/split)")
    return files


def _npz_member(path: Path, key: str) -> Any:
    from medimg_bench.datasets.medmnist import npz_member

    return npz_member(path, key, mmap=False)


def _medmnist_file(card: Mapping[str, Any], path: Path, params: Mapping[str, str]) -> Any:
    """The :class:`FileCheck` of a MedMNIST file (flag from the card's params or the name)."""
    import warnings

    from medimg_bench.datasets.medmnist.release import identify_file, parse_file_name

    try:
        flag, size = parse_file_name(path.name)
    except ValueError as exc:
        raise CardError(f"{card['name']}: {path}: {exc}") from exc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check = identify_file(path, flag=params.get("flag", flag), size=size, warn=False)
    if not check.official:
        warnings.warn(f"{card['name']}: {check.message()}", stacklevel=3)
        print(f"warning: {check.message()}")
    return check


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
    head = f"{'metric':<19}{'class':<30}{'published':>10}{'measured':>18}{'95% CI':>20}" \
           f"{'delta':>9}  verdict"
    lines = [head, "-" * len(head)]
    for r in rows:
        ci = "-" if r["ci_low"] is None else f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
        meas = _fmt(r["measured"]) + (f" ± {r['sd']:.4f}" if r.get("sd") is not None else "")
        lines.append(f"{r['metric']:<19}{str(r['class'])[:29]:<30}{_fmt(r['published']):>10}"
                     f"{meas:>18}{ci:>20}{_fmt(r['delta']):>9}  {r['verdict']}")
        if r.get("per_seed"):
            lines.append(" " * 49 + "seeds: " + ", ".join(
                f"{p['seed']}: {_fmt(p['value'])}" for p in r["per_seed"]))
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


def _refuse_early(card: Mapping[str, Any]) -> None:
    name = card["name"]
    if card["status"] == "needs_source":
        raise CardError(f"{name}: refused: status needs_source - the published values have not "
                        "been read from the paper yet (see the card's source)")
    missing = missing_requirements(card)
    if missing:
        raise CardError(f"{name}: refused: needs pieces not available here: {', '.join(missing)}")


def reproduce(card: str | Mapping[str, Any], overrides: Sequence[str] = (), *,
              run_dir: str | Path | None = None, seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """Run ``card`` (name, path or loaded card) with extra ``overrides``; returns the
    ``reproduce.json`` content (rows, run directory, card name, departures from the card, data
    files). Refuses cards whose source values are missing (``needs_source``), whose required
    pieces are absent, or whose dataset root does not match the card.

    ``seeds``: one run per training seed into ``run_dir/seed=<s>`` (a finished run of the same
    config there is reused, not retrained) and a verdict on the mean over seeds (see
    :mod:`medimg_bench.baselines.seeds`). Overrides that change what the card fixes are listed
    as ``departures`` and the rows say ``recipe changed`` instead of a verdict."""
    from medimg_bench.baselines.cards import published_values
    from medimg_bench.baselines.departures import describe, recipe_departures

    card = dict(card) if isinstance(card, Mapping) else load_card(card)
    name = card["name"]
    _refuse_early(card)
    params, extra = _params(card, overrides)
    card, note = published_values(card, params)
    if note:  # measured, never judged against numbers published for another setting
        print(note)
    card_ovs = [_fill(o, params) for o in card.get("overrides", [])]
    ovs = card_ovs + list(extra)
    roots = [o.split("=", 1)[1] for o in ovs if o.startswith("dataset.root=")]
    if not roots or roots[-1] in ("???", ""):
        raise CardError(f"{name}: set dataset.root=... ({card['needs']['data']})")
    files = check_dataset_root(card, roots[-1], params)
    if card["model"]["weights"] == "user_checkpoint" and not any(
            o.startswith("model.options.checkpoint=") for o in ovs):
        raise CardError(f"{name}: set model.options.checkpoint=... ({card['needs'].get('weights')})")
    departures = recipe_departures(card_ovs, [o for o in extra if not o.startswith("variant=")])
    if departures:
        print(f"note: {name}: {describe(departures)} - measured, no verdict")
    if run_dir is None:
        import time

        run_dir = Path("runs") / "reproduce" / f"{time.strftime('%Y%m%d-%H%M%S')}_{name}"
    run_dir = Path(run_dir)
    if card.get("variants"):
        if seeds is not None:
            raise CardError(f"{name}: --seeds trains the card once per seed; this card scores stored "
                            "predictions of several methods (its variants), which no seed changes")
        runs: list[dict[str, Any]] = []
        rows = _run_variants(card, ovs, roots[-1], run_dir)
    elif seeds is None:
        runs = [_run_once(ovs, run_dir)]
        rows = verdict_rows(card, runs[0]["summary"])
    else:
        runs = _run_seeds(ovs, run_dir, list(seeds))
        from medimg_bench.baselines.seeds import combine_seeds

        combined = combine_seeds([r["summary"] for r in runs], list(seeds))
        rows = [_with_seed_stats(r, combined) for r in verdict_rows(card, combined)]
    for r in rows:
        if departures and r["verdict"] in ("reproduced", "not reproduced"):
            r["verdict"] = "recipe changed"
    counts = _sample_counts(run_dir, runs, rows)
    failed = _withhold_failed(rows, counts, _failure_rate(ovs))
    judged = [r for r in rows if r["verdict"] in ("reproduced", "not reproduced")]
    out = {"card": name, "params": params, "run_dir": str(run_dir), "rows": rows,
           "source": card["source"], "departures": departures, "data_files": files,
           "seeds": None if seeds is None else list(seeds),
           "runs": [{k: v for k, v in r.items() if k != "summary"} for r in runs],
           "samples": counts, "failed_runs": failed,
           "reproduced": all(r["verdict"] == "reproduced" for r in judged) if judged else None,
           "references": card.get("references") or []}  # other published numbers, never judged
    (run_dir / "reproduce.json").write_text(json.dumps(out, indent=2))
    _plot(rows, run_dir / "reproduce.png", f"{name} ({card['source']['table']})")
    print(_table(rows))
    for ref in card.get("references") or []:
        print(f"reference, not judged: {ref['name']} ({ref['note']})")
    if departures:
        print(describe(departures))
    print(_scored_line(counts, failed), flush=True)
    return out


#: the verdict of a cell whose run scored no sample, or failed more than max_failure_rate of them
FAILED_SAMPLES = "failed samples: no verdict"


def _failure_rate(ovs: Sequence[str]) -> float:
    """``max_failure_rate`` of the card's composed config (1.0: only a run that scored nothing)."""
    from medimg_bench.runs import compose_config
    from medimg_bench.runs.run import max_failure_rate

    return max_failure_rate(compose_config([o for o in ovs if o.startswith("max_failure_rate=")]))


def _sample_counts(run_dir: Path, runs: Sequence[Mapping[str, Any]],
                   rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Scored and failed samples of every run behind the rows: ``{label: {n_samples, n_failed}}``
    (label: the variant, ``seed=<s>``, or ``run``)."""
    summaries: dict[str, Any] = {}
    for v in dict.fromkeys(r["variant"] for r in rows if r.get("variant")):
        summaries[v] = json.loads((run_dir / v / "summary.json").read_text())
    for r in runs:
        summaries["run" if r.get("seed") is None else f"seed={r['seed']}"] = r["summary"]
    return {k: {"n_samples": int(s.get("n_samples", 0)), "n_failed": int(s.get("n_failed", 0))}
            for k, s in summaries.items()}


def _withhold_failed(rows: list[dict[str, Any]], counts: Mapping[str, Mapping[str, int]], rate: float) -> list[str]:
    """Replace the verdict of every cell whose run failed too many samples (a variant's own
    cells; every cell when one seed's run failed, since the mean is over all seeds); returns
    the failed runs' labels."""
    failed = [k for k, c in counts.items()
              if c["n_samples"] - c["n_failed"] <= 0 or c["n_failed"] > rate * c["n_samples"]]
    for r in rows:
        c = counts.get(r.get("variant") or "")
        if (r.get("variant") in failed) or (not r.get("variant") and failed):
            r["verdict"] = FAILED_SAMPLES
        if c is not None:
            r["scored"] = f"{c['n_samples'] - c['n_failed']} of {c['n_samples']}"
    return failed


def _scored_line(counts: Mapping[str, Mapping[str, int]], failed: Sequence[str]) -> str:
    """The console's last line: samples scored of how many, and the runs that failed."""
    n = sum(c["n_samples"] for c in counts.values())
    bad = sum(c["n_failed"] for c in counts.values())
    line = f"scored {n - bad} of {n} samples ({bad} failed) in {len(counts)} run(s)"
    if failed:
        line += f"; {len(failed)} run(s) failed ({', '.join(failed[:5])}{' …' if len(failed) > 5 else ''}): no verdict for their cells"
    return line


def _run_variants(card: Mapping[str, Any], overrides: list[str], root: str,
                  run_dir: Path) -> list[dict[str, Any]]:
    """Run each variant of the card (``variant=a,b`` in ``overrides`` picks some) into
    ``run_dir/<variant>``; returns the verdict rows of all, each with its ``variant``."""
    from medimg_bench.registry import absolute_root
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
        # the root as the dataset resolved it: relative to the working directory, made absolute once
        ovs = overrides + [o.replace("{dataset.root}", str(absolute_root(root))) for o in v.get("overrides", [])]
        vdir = run_dir / v["name"]
        run_config(compose_config(ovs), vdir)
        summary = json.loads((vdir / "summary.json").read_text())
        metrics = [{**m, "published": v["published"][m["metric"]]} for m in card["metrics"]
                   if m["metric"] in v["published"]]
        for r in verdict_rows({**card, "metrics": metrics}, summary):
            rows.append({**r, "variant": v["name"], "class": v["name"]})
    return rows


def _with_seed_stats(row: dict[str, Any], combined: Mapping[str, Any]) -> dict[str, Any]:
    """A verdict row of the mean over seeds with its ``sd``, half-widths, ``ci_clipped`` and
    ``per_seed``."""
    m = combined["metrics"].get(row["metric"], {})
    e = m.get("mean") if row["class"] in ("mean", "macro") else m.get("per_class", {}).get(row["class"])
    if isinstance(e, Mapping):
        row.update({k: e[k] for k in ("sd", "h_seed", "h_test", "ci_clipped", "per_seed") if k in e})
    return row


def _run_once(ovs: Sequence[str], run_dir: Path) -> dict[str, Any]:
    from medimg_bench.runs import compose_config, run_config

    run_config(compose_config(list(ovs)), run_dir)
    return _run_info(run_dir, None)


def _run_seeds(ovs: Sequence[str], run_dir: Path, seeds: list[int]) -> list[dict[str, Any]]:
    """One run per seed into ``run_dir/seed=<s>``; a finished run there with the same config and
    the same data (the dataset's identity: manifest, file contents, options) is reused (refused
    when either differs), an interrupted training goes on from its last training state
    (``train/``), anything else unfinished is started again. A run directory's manifest is never
    rewritten: the data files' MD5 go to ``reproduce.json``."""
    from medimg_bench.engine.run_dir import has_train_state
    from medimg_bench.runs import compose_config, run_config
    from medimg_bench.runs.compose import plain

    if len(set(seeds)) != len(seeds) or not seeds:
        raise CardError(f"--seeds: give distinct seeds, got {seeds}")
    out = []
    for s in seeds:
        sdir = run_dir / f"seed={s}"
        cfg = compose_config([*ovs, f"seed={s}"])
        if (sdir / "summary.json").is_file():
            _same_config(sdir, plain(cfg))
            _same_data(sdir, plain(cfg))
            print(f"seed={s}: {sdir} is finished; reused, not retrained")
        else:
            if has_train_state(sdir):  # an interrupted training: on from its last state
                quoted = str(sdir).replace("'", "\\'")  # the `=` of `seed=<s>` needs quotes
                cfg = compose_config([*ovs, f"seed={s}", f"resume='{quoted}'"])
                print(f"seed={s}: training on from the state in {sdir / 'train'}", flush=True)
            elif sdir.exists() and any(sdir.iterdir()):
                cfg = compose_config([*ovs, f"seed={s}", "overwrite=true"])  # interrupted before a state
            print(f"seed={s}: training into {sdir}", flush=True)
            run_config(cfg, sdir)
        out.append(_run_info(sdir, s))
    return out


def _same_config(run_dir: Path, cfg: Mapping[str, Any]) -> None:
    from medimg_bench.baselines.departures import NEUTRAL_KEYS, flat

    saved = json.loads((run_dir / "manifest.json").read_text()).get("config") or {}
    a, b = flat(saved), flat(dict(cfg))
    diffs = [f"{k}: saved {a.get(k)!r}, now {b.get(k)!r}" for k in sorted(set(a) | set(b))
             if a.get(k) != b.get(k) and not any(k == n or k.startswith(n + ".") for n in NEUTRAL_KEYS)
             and not k.startswith("hydra")]
    if diffs:
        raise CardError(f"{run_dir} holds a finished run of another config ({'; '.join(diffs[:5])}); "
                        "use another --run-dir or remove it")


def _same_data(run_dir: Path, cfg: Mapping[str, Any]) -> None:
    """Refuse a finished run whose data is not the data of ``cfg``: its manifest's dataset
    identity (manifest, content of every file, options; ``root`` and other locations are neutral
    in the config, not in this) against the identity of the dataset ``cfg`` builds now."""
    from medimg_bench.builders import build_dataset
    from medimg_bench.datasets.base import dataset_identity
    from medimg_bench.engine.checkpoint import key_differences

    saved = (json.loads((run_dir / "manifest.json").read_text()).get("dataset") or {})
    dcfg = cfg["dataset"]
    now = dataset_identity(build_dataset(dcfg, dcfg.get("split")))
    if saved.get("fingerprint") is not None and saved.get("fingerprint") == now.get("fingerprint"):
        return
    had = saved.get("identity") or {"fingerprint": saved.get("fingerprint")}
    diffs = key_differences(had, now)
    raise CardError(f"{run_dir} holds a finished run of other data, or one made by an older version "
                    f"(dataset fields that differ: {'; '.join(diffs[:4]) or 'fingerprint'}); it is not "
                    "reused: use another --run-dir or remove it")


def _run_info(run_dir: Path, seed: int | None) -> dict[str, Any]:
    """The run's summary, and what the table needs of its manifest (times, kept epoch)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    man = json.loads((run_dir / "manifest.json").read_text())
    tr = man.get("training") or {}
    return {"seed": seed, "run_dir": str(run_dir), "summary": summary,
            "train_s": tr.get("seconds"), "eval_s": man.get("wall_time_s"),
            "best_epoch": tr.get("best_epoch"), "device": man.get("device")}


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
    """``medimg-bench reproduce CARD [key=value ...] [--run-dir DIR] [--seeds 0,1,2] | --list``;
    returns the exit code (0 reproduced, listed or measured without a verdict, 1 not
    reproduced, 2 refused, 3 a run scored no sample or failed more than ``max_failure_rate``
    of them: its cells get no verdict)."""
    ap = argparse.ArgumentParser(prog="medimg-bench reproduce")
    ap.add_argument("card", nargs="?")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--list", action="store_true", help="list the cards and what each needs")
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--seeds", default=None, help="comma-separated training seeds: one run each, a verdict "
                    "on the mean (interval: spread between seeds + test-set sampling)")
    a = ap.parse_intermixed_args(argv)  # overrides may come before and after --run-dir
    if a.list or not a.card:
        print(_list())
        return 0
    try:
        seeds = _parse_seeds(a.seeds)
        card = load_card(a.card)
        runs = sweep_overrides(card, a.overrides)
        outs = []
        for label, ovs in runs:
            run_dir = None if a.run_dir is None else (Path(a.run_dir) / label if label else a.run_dir)
            outs.append(reproduce(card, ovs, run_dir=run_dir, seeds=seeds))
    except CardError as exc:
        print(f"error: {exc}")
        return 2
    for out in outs:
        print(f"written: {Path(out['run_dir']) / 'reproduce.json'}")
    if len(outs) > 1:
        print(_sweep_table(outs))
    if any(o["failed_runs"] for o in outs):  # scored nothing (or too little): never a quiet 0
        tag = (lambda i, k: f"{i}/{k}") if len(outs) > 1 else (lambda i, k: k)
        counts = {tag(i, k): c for i, o in enumerate(outs) for k, c in o["samples"].items()}
        failed = [tag(i, k) for i, o in enumerate(outs) for k in o["failed_runs"]]
        print(f"{_scored_line(counts, failed)} (exit 3)", file=sys.stderr)
        return 3
    return 1 if any(o["reproduced"] is False for o in outs) else 0


def _parse_seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise CardError(f"--seeds {text!r}: expected comma-separated integers, e.g. 0,1,2") from exc
    if not seeds or len(set(seeds)) != len(seeds):
        raise CardError(f"--seeds {text!r}: expected distinct comma-separated integers, e.g. 0,1,2")
    return seeds


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
