"""Sharded evaluation: ``shard=i/n`` runs write their part, ``medimg-bench merge`` joins them.

A run with ``shard=i/n`` evaluates the samples whose id hashes to ``i``
(:func:`medimg_bench.engine.runner.shard_of`, BLAKE2b — the same on every machine) and writes,
besides its own summary, ``shard_state.pt``: its per-sample records, failures and every metric's
states, the dataset's id order, patients and subgroup labels, the resolved config and the keys
of the data and model. :func:`merge_runs` checks that the shards belong to one evaluation
(same dataset fingerprint, model fingerprint, metrics and config, every shard ``0..n-1`` exactly
once), puts the states back in dataset order and writes the run directory a single run would
have written: the same per-sample table (bit for bit), summary and plots.

    medimg-bench merge runs/shard0 runs/shard1 runs/shard2 --out runs/merged
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medimg_bench._fs import atomic_path

__all__ = ["save_shard_state", "load_shard_state", "merge_runs", "cli_main", "STATE_FILE"]

STATE_FILE = "shard_state.pt"
VERSION = 1
# config keys that may differ between the shards of one evaluation
_FREE_KEYS = ("shard", "output_dir", "run_name", "hydra", "resume", "overwrite", "progress", "max_failure_rate",
              "num_workers", "device", "checkpoint_every", "checkpoint_interval_s")


def _plain(obj: Any) -> Any:
    """Only what ``torch.load(weights_only=True)`` reads: dicts, lists, str, numbers, None."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        return obj.item()
    return str(obj)


def save_shard_state(results: Any, run_dir: str | Path, *, config: Mapping[str, Any]) -> Path:
    """Write ``shard_state.pt`` for a sharded run (atomic); returns its path."""
    import torch

    from medimg_bench._secrets import redact_secrets, secret_values
    from medimg_bench.engine.plan import metric_settings

    parts = results.parts
    man = results.manifest
    known = secret_values(dict(config)) | secret_values(man)
    files = man.get("option_files") or {}  # option files by content, as the run read them (the config has paths)
    state = {
        "version": VERSION,
        "config": redact_secrets(_plain(dict(config)), known),
        "shard": [int(man["shard"]["index"]), int(man["shard"]["count"])],
        "key": redact_secrets(_plain({
            # the dataset's fingerprint covers the manifest, every file's content and the options
            "dataset": man["dataset"]["fingerprint"], "n_samples": man["dataset"]["n_samples"],
            "task": results.task.name if results.task is not None else None,
            "model": man.get("model_fingerprint"),
            "metrics": {k: metric_settings(m) for k, m in sorted(results.metrics.items())},
            **({"files": files} if files else {}),
        }), known),
        "classes": _plain(man["dataset"]["classes"]),
        "records": parts["records"].to_state(),
        "failures": _plain(list(parts["failures"])),
        "ids": list(parts["ids"]),
        "patients": dict(parts["patients"]),
        "subgroups": _plain(parts["subgroups"]),
        "settings": _plain(parts["settings"]),
        "metrics": {k: m.state_dict() for k, m in results.metrics.items()},
        "manifest": redact_secrets(_plain(man), known),
    }
    run_dir = Path(run_dir)
    path = run_dir / STATE_FILE
    with atomic_path(path, fsync=False) as tmp:
        torch.save(state, tmp)
    return path


def load_shard_state(run_dir: str | Path) -> dict[str, Any]:
    """The ``shard_state.pt`` of a shard's run directory; ``ValueError`` naming the directory."""
    import torch

    path = Path(run_dir) / STATE_FILE
    if not path.exists():
        raise ValueError(f"{run_dir}: no {STATE_FILE}; only runs made with shard=i/n can be merged")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"{path}: cannot be read safely: {exc}") from exc
    if state.get("version") != VERSION:
        raise ValueError(f"{path}: version {state.get('version')}, expected {VERSION}")
    return state


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    from medimg_bench.engine.checkpoint import flatten

    flat = flatten(config)
    return {k: v for k, v in flat.items() if k.split(".", 1)[0] not in _FREE_KEYS}


def _check_same(states: Sequence[Mapping[str, Any]], dirs: Sequence[Path]) -> tuple[int, list[int]]:
    from medimg_bench.engine.checkpoint import key_differences

    ref = states[0]
    for st, d in zip(states[1:], dirs[1:]):
        diffs = key_differences(ref["key"], st["key"])
        diffs += [f"config.{x}" for x in key_differences(_comparable(ref["config"]), _comparable(st["config"]))]
        if diffs:
            raise ValueError(f"cannot merge {dirs[0]} and {d}: they are not shards of one evaluation; "
                             "fields that differ (first run vs this one): " + "; ".join(diffs))
    counts = {st["shard"][1] for st in states}
    if len(counts) > 1:
        raise ValueError(f"cannot merge: the runs split the data into different numbers of shards {sorted(counts)}")
    n = counts.pop()
    idx = [st["shard"][0] for st in states]
    dup = sorted({i for i in idx if idx.count(i) > 1})
    missing = sorted(set(range(n)) - set(idx))
    if dup:
        raise ValueError(f"cannot merge: shard(s) {dup} given twice ({[str(d) for d, i in zip(dirs, idx) if i in dup]})")
    if missing:
        raise ValueError(f"cannot merge: shard(s) {[f'{i}/{n}' for i in missing]} of {n} are missing")
    return n, idx


def _expand(run_dirs: Sequence[str | Path]) -> list[Path]:
    """Run directories; a directory without a shard state stands for the shard runs below it."""
    out: list[Path] = []
    for d in map(Path, run_dirs):
        if (d / STATE_FILE).exists() or not d.is_dir():
            out.append(d)
        else:
            found = sorted(p.parent for p in d.rglob(STATE_FILE))
            out.extend(found or [d])
    return out


def merge_runs(run_dirs: Sequence[str | Path], out: str | Path, *, plots: bool = True, overwrite: bool = False) -> Any:
    """Merge the run directories of the shards of one evaluation into ``out``; returns the
    :class:`~medimg_bench.engine.results.Results` a single run would have given."""
    from medimg_bench.engine.results import Records, Results, build_samples_table
    from medimg_bench.engine.summary import exclusion_summary, summarize
    from medimg_bench.registry import create_task

    dirs = _expand(run_dirs)
    if not dirs:
        raise ValueError("merge: no run directories given")
    states = [load_shard_state(d) for d in dirs]
    n, idx = _check_same(states, dirs)
    order_of = sorted(range(len(states)), key=lambda j: idx[j])
    states = [states[j] for j in order_of]
    ref = states[0]
    c = ref["config"]
    task_options = dict((c.get("task") or {}).get("options") or {})
    if c.get("scoring"):
        task_options["scoring"] = c["scoring"]
    task = create_task(c["task"]["name"], **task_options)
    metrics = task.build_metrics(c.get("metrics"), ref["classes"])
    if sorted(metrics) != sorted(ref["metrics"]):
        raise ValueError(f"merge: the config's metrics {sorted(metrics)} are not those saved {sorted(ref['metrics'])}")
    order = {sid: i for i, sid in enumerate(ref["ids"])}
    for name, metric in metrics.items():
        metric.load_state(states[0]["metrics"][name])
        metric.merge_state([st["metrics"][name] for st in states[1:]])
        metric.reorder(order)
    records = Records.concat([Records.from_state(st["records"]) for st in states]).sorted_by(order)
    failures = sorted((f for st in states for f in st["failures"]), key=lambda f: order.get(f["id"], len(order)))
    patients = ref["patients"]
    samples = build_samples_table(records, metrics, failures, patients)
    settings = ref["settings"]
    summary = summarize(metrics, samples, patients=patients, n_resamples=int(settings["n_resamples"]),
                        confidence=float(settings["confidence"]), seed=int(settings["seed"]))
    summary.update(exclusion_summary((ref["manifest"].get("dataset") or {}).get("exclusions")))
    if ref["subgroups"]:
        from medimg_bench.engine.subgroups import subgroup_summary

        # per-category CIs clustered by patient, as the single run's
        summary["subgroups"] = {
            a: subgroup_summary(metrics, labels, patients=patients, n_resamples=int(settings["n_resamples"]),
                                confidence=float(settings["confidence"]), seed=int(settings["seed"]))
            for a, labels in ref["subgroups"].items()}
    manifest = dict(ref["manifest"])
    manifest.pop("shard", None)
    manifest["merged_from"] = [{"run_dir": str(dirs[order_of[k]]), "shard": f"{st['shard'][0]}/{n}",
                                "wall_time_s": st["manifest"].get("wall_time_s"),
                                "n_selected": st["manifest"].get("shard", {}).get("n_selected")}
                               for k, st in enumerate(states)]
    manifest["wall_time_s"] = round(sum(float(st["manifest"].get("wall_time_s") or 0) for st in states), 3)
    manifest["start_time"] = min(st["manifest"]["start_time"] for st in states)
    manifest["end_time"] = max(st["manifest"]["end_time"] for st in states)
    manifest.pop("segments", None)
    manifest.pop("timings_s", None)
    results = Results(name=manifest.get("name", "merged"), task=task, samples=samples, summary=summary,
                      manifest=manifest, metrics=metrics)
    config = {**c, "shard": None}
    results.save(out, config=config, plots=plots, overwrite=overwrite)
    return results


def cli_main(argv: list[str]) -> int:
    """``medimg-bench merge RUN_DIRS... --out DIR``; exit 0 merged, 1 refused, 2 usage."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="medimg-bench merge",
        description="Merge the run directories of a sharded evaluation (shard=i/n) into the run "
        "directory a single run would have written. A directory without shard_state.pt stands for "
        "the shard runs below it (e.g. a multirun folder).",
    )
    parser.add_argument("run_dirs", nargs="+", help="the shards' run directories")
    parser.add_argument("--out", required=True, help="the merged run directory to write")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--overwrite", action="store_true", help="replace results already in --out")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if (out / "summary.json").exists() and not args.overwrite:
        print(f"medimg-bench merge: {out} already holds results; pass --overwrite to replace them",
              file=sys.stderr)
        return 1
    try:
        results = merge_runs(args.run_dirs, out, plots=not args.no_plots, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as exc:
        print(f"medimg-bench merge: {exc}", file=sys.stderr)
        return 1
    from medimg_bench.engine.report import print_summary

    print_summary(results)
    print(f"run directory: {out}", flush=True)
    return 0
