"""Config-driven runs, in phases: resolve the config, build dataset / model / task, train when
asked, hand over to ``evaluate`` or to a protocol, write the run directory.

The CLI, Hydra sweeps and the Python API (:func:`run`) all go through :func:`run_config`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from medimg_bench.builders import build_dataset, build_model, model_reads_pixels
from medimg_bench.engine.run_dir import (
    check_run_dir,
    has_train_state,
    remove_train_state,
    retries_failed,
)
from medimg_bench.runs.compose import compose_config, plain

__all__ = ["run", "run_config", "seed_everything", "max_failure_rate", "failed_entries", "scored_line"]


def run_config(cfg: Any, run_dir: str | Path, *, parent_overrides: Sequence[str] = ()) -> Any:
    """Execute one composed config into ``run_dir``; returns :class:`Results` (or, for a
    benchmark config, a dict entry name → Results)."""
    run_dir = Path(run_dir)
    c = plain(cfg)
    _request_logging(verbose=bool(c.get("verbose")))
    if c.get("benchmark"):
        return _run_benchmark(c, run_dir, parent_overrides)
    if c.get("protocol"):
        from medimg_bench.protocols import run_protocol

        _protocol_options(c)
        return _with_report(c, run_protocol(c, run_dir), run_dir)
    from medimg_bench.engine.runner import parse_shard

    parse_shard(c.get("shard"))  # a bad spec fails before anything is built
    run_dir, rank, world_size = _shared_run_dir(run_dir)
    finished = check_run_dir(run_dir, resume=c.get("resume"), overwrite=bool(c.get("overwrite")))
    if finished is not None:
        return finished
    retry = retries_failed(run_dir, c.get("resume"))  # a finished run's failed samples, again
    device = _device(c.get("device"), world_size)
    seed_everything(int(c["seed"]))
    task, dataset, model = _build(c)
    train_info = _train(c, model, task, run_dir, device=device, rank=rank)
    _drop_unused_defaults(c, parent_overrides)
    results = _evaluate(c, model, dataset, task, run_dir, device=device, retry_failed=retry)
    _write(c, results, run_dir, train_info)
    return results


def _drop_unused_defaults(c: Mapping[str, Any], overrides: Sequence[str]) -> None:
    """Metric options the config sets by default (``tolerance: 2.0`` of ``metrics=segmentation``)
    that none of the metrics asked for reads are dropped, so narrowing the metrics
    (``metrics.scores.metrics=[dice,hd95]``) is not refused for an option the user never set;
    an option the user set (an override naming it) is kept, and refused by the metric as before."""
    from medimg_bench.metrics.seg_conventions import OPTION_USERS

    user = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    for name, opts in (c.get("metrics") or {}).items():
        if not isinstance(opts, dict) or not isinstance(opts.get("metrics"), list):
            continue
        asked = set(opts["metrics"])
        for key in [k for k in opts if k in OPTION_USERS]:
            unused = opts[key] is not None and not asked & set(OPTION_USERS[key])
            if unused and f"metrics.{name}.{key}" not in user and f"metrics.{name}" not in user:
                del opts[key]


def _protocol_options(c: Mapping[str, Any]) -> None:
    """A protocol reads ``task.options.multilabel`` from the config: left unset, it is taken
    from the evaluation dataset here."""
    opts = c["task"].get("options") or {}
    if "multilabel" in opts and opts["multilabel"] is None:
        from medimg_bench.registry import create_task

        task = create_task(c["task"]["name"], **opts)
        _options_from_dataset(c, task, build_dataset(c["dataset"], c["dataset"].get("split")))


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _shared_run_dir(run_dir: Path) -> tuple[Path, int, int]:
    """(run directory, rank, world size): under torchrun every rank writes its checkpoint part
    under rank 0's run directory."""
    from medimg_bench.engine.distributed import maybe_init_distributed

    rank, world_size = maybe_init_distributed()
    if world_size > 1:
        import torch.distributed as dist

        box = [str(run_dir)]
        dist.broadcast_object_list(box, src=0)
        run_dir = Path(box[0])
    return run_dir, rank, world_size


def _device(device: Any, world_size: int) -> Any:
    """The configured device; under torchrun with ``auto`` each rank's own GPU."""
    if world_size > 1 and device in (None, "auto"):
        import torch

        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    return device


def _build(c: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """(task, evaluation dataset, model) of a config."""
    from medimg_bench.registry import create_task

    task_options = dict(c["task"].get("options") or {})
    if c.get("scoring"):  # VQA harness profile (configs/scoring/)
        task_options["scoring"] = c["scoring"]
    task = create_task(c["task"]["name"], **task_options)
    dcfg = c["dataset"]
    dataset = build_dataset(dcfg, dcfg.get("split"), pixels=model_reads_pixels(c["model"]))
    _options_from_dataset(c, task, dataset)
    return task, dataset, build_model(c["model"], dataset)


def _options_from_dataset(c: Mapping[str, Any], task: Any, dataset: Any) -> None:
    """Task options the dataset determines (single- vs multi-label) taken from it unless the
    user set them (a contradiction is an error naming both); the resolved value is written into
    the config the run directory keeps, and into the model's options left unset."""
    task.bind_dataset(dataset)
    if task.multilabel is not None and "multilabel" in (c["task"].get("options") or {}):
        c["task"]["options"]["multilabel"] = bool(task.multilabel)
        mopts = c["model"].get("options")
        if isinstance(mopts, dict) and "multilabel" in mopts and mopts["multilabel"] is None:
            mopts["multilabel"] = bool(task.multilabel)


def _request_logging(*, verbose: bool) -> None:
    """One INFO line per HTTP request (httpx, an LVLM API) only with ``verbose=true``."""
    import logging

    logging.getLogger("httpx").setLevel(logging.INFO if verbose else logging.WARNING)


# options that, set, give a model its weights (a model config with none of them has fixed weights)
_WEIGHT_OPTIONS = ("checkpoint", "pretrained")


def _warn_if_random(mcfg: Mapping[str, Any]) -> bool:
    """Log a warning when the model is scored with random weights: its config offers
    ``checkpoint`` / ``pretrained`` and leaves both unset, and nothing is trained. Returns
    whether it warned."""
    import logging

    options = mcfg.get("options") or {}
    if not any(k in options for k in _WEIGHT_OPTIONS) or any(options.get(k) for k in _WEIGHT_OPTIONS):
        return False
    name = mcfg.get("name")
    example = "model.options.pretrained=true" if "pretrained" in options else \
        "model.options.checkpoint=/ckpt/model.safetensors"
    logging.getLogger("medimg_bench").warning(
        "model %r has random weights (no checkpoint, pretrained false, train.enabled false): its "
        "scores are chance level; give weights (e.g. %s) or train.enabled=true", name, example)
    return True


def _train(c: Mapping[str, Any], model: Any, task: Any, run_dir: Path, *, device: Any, rank: int) -> dict | None:
    """Train when ``train.enabled`` (or reload the weights a resumed run already trained);
    returns the manifest's ``training`` entry, or None."""
    tcfg = c.get("train") or {}
    weights = run_dir / "model.safetensors"
    if tcfg.get("enabled") and c.get("resume") and weights.exists():
        from medimg_bench.models.base import load_checkpoint

        load_checkpoint(model.module, weights)  # trained before the interruption
        return {"resumed_from": str(weights)}
    if not tcfg.get("enabled"):
        _warn_if_random(c["model"])
        return None
    from medimg_bench.engine.runner import resolve_device
    from medimg_bench.models.training import fit, fit_config_options

    dcfg = c["dataset"]
    if not dcfg.get("train_split"):
        raise ValueError(f"train.enabled=true but dataset {dcfg['name']!r} has no train_split")
    train_set = build_dataset(dcfg, dcfg["train_split"])
    val_set = build_dataset(dcfg, tcfg.get("val_split") or "val") if tcfg.get("select_on") else None
    model.to(resolve_device(device))
    every = int(tcfg.get("checkpoint_every") or 0)
    state_dir = _training_state_dir(c, run_dir, rank=rank) if every > 0 else None
    resumed = state_dir is not None and has_train_state(run_dir)
    tr = fit(
        model, train_set, loss_fn=task.loss, max_steps=int(tcfg["max_steps"]),
        max_seconds=tcfg.get("max_seconds"), lr=float(tcfg["lr"]),
        weight_decay=float(tcfg.get("weight_decay", 0.0)), batch_size=int(tcfg["batch_size"]),
        seed=int(c["seed"]), progress=bool(c.get("progress", True)) and rank == 0,
        cache=bool(tcfg.get("cache", False)), num_workers=int(tcfg.get("num_workers", 0)),
        val_dataset=val_set, checkpoint_dir=state_dir, checkpoint_every=max(every, 1), **fit_config_options(tcfg),
    )
    info = {"n_train": len(train_set), "steps": tr.steps, "epochs": tr.epochs,
            "seconds": round(tr.seconds, 2), "final_loss": tr.final_loss, **_cut(tcfg, tr)}
    if tr.best_epoch is not None:  # train.select_on: the epoch kept and the validation curve
        info.update(select_on=tcfg["select_on"], n_val=len(val_set), best_epoch=tr.best_epoch,
                    best_val=tr.best_val, val_curve=[[e, v] for e, v in tr.val_curve])
    if resumed:
        info["resumed_training"] = True
    if rank == 0:
        _save_weights(model, weights)
        if state_dir is not None:  # the weights are what a resume reads from now on
            remove_train_state(run_dir)
    return info


def _cut(tcfg: Mapping[str, Any], tr: Any) -> dict[str, Any]:
    """``steps_asked`` / ``epochs_asked`` and, when ``train.max_seconds`` stopped the training
    before them, ``cut: True`` with a console line: the scores then depend on the machine's load."""
    epochs = tcfg.get("epochs")
    asked = {"epochs_asked": int(epochs)} if epochs else {"steps_asked": int(tcfg["max_steps"])}
    done, want = (tr.epochs, int(epochs)) if epochs else (tr.steps, int(tcfg["max_steps"]))
    if not tcfg.get("max_seconds") or done >= want:
        return {**asked, "cut": False}
    unit = "epochs" if epochs else "steps"
    print(f"training CUT by train.max_seconds={tcfg['max_seconds']}: {done} of {want} {unit} done in "
          f"{tr.seconds:.0f} s — the scores depend on this machine's speed and load; "
          "train.max_seconds=null trains the whole recipe", flush=True)
    return {**asked, "cut": True, "max_seconds": float(tcfg["max_seconds"])}


#: config keys that do not change what training computes (a training state resumes under others)
_TRAIN_NEUTRAL = ("resume", "overwrite", "progress", "verbose", "report", "device", "num_workers", "hydra",
                  "checkpoint_every", "checkpoint_interval_s", "train.num_workers", "train.checkpoint_every", "train.cache",
                  "dataset.root", "dataset.options.root", "dataset.cache_dir", "dataset.options.cache_dir")


def _training_key(c: Mapping[str, Any]) -> dict[str, Any]:
    """What a training state must match to be resumed: the config's model, dataset, task, seed,
    AMP and train entries, locations and worker counts left out."""
    from medimg_bench.engine.checkpoint import flatten

    flat = flatten({k: c.get(k) for k in ("model", "dataset", "task", "seed", "amp", "train")})
    key = {k: v for k, v in flat.items() if not any(k == n or k.startswith(n + ".") for n in _TRAIN_NEUTRAL)}
    return json.loads(json.dumps(key, sort_keys=True, default=str))  # as config.json holds it


def _training_state_dir(c: Mapping[str, Any], run_dir: Path, *, rank: int) -> Path:
    """``run_dir/train``, where ``fit`` keeps its training state; a state left by a training of
    another config is refused, naming the keys that differ."""
    from medimg_bench.engine.checkpoint import key_differences

    state_dir = run_dir / "train"
    key, key_file = _training_key(c), state_dir / "config.json"
    if has_train_state(run_dir) and key_file.is_file():
        diffs = key_differences(json.loads(key_file.read_text()), key)
        if diffs:
            raise ValueError(f"{state_dir}: the training state is of another config ({'; '.join(diffs[:8])}); "
                             "overwrite=true starts the training again")
    elif rank == 0:
        state_dir.mkdir(parents=True, exist_ok=True)
        key_file.write_text(json.dumps(key, sort_keys=True))
    return state_dir


def _save_weights(model: Any, path: Path) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.module.state_dict().items()}
    save_file(state, str(path))


def _evaluate(c: Mapping[str, Any], model: Any, dataset: Any, task: Any, run_dir: Path, *, device: Any,
              retry_failed: bool = False) -> Any:
    """The engine's evaluation with the run's options."""
    from medimg_bench.engine.runner import evaluate

    return evaluate(
        model, dataset, task=task, metrics=c.get("metrics"), batch_size=int(c["batch_size"]),
        num_workers=int(c.get("num_workers", 0)), device=device, amp=bool(c.get("amp")),
        fail_fast=bool(c.get("fail_fast")), progress=bool(c.get("progress", True)),
        n_resamples=int(c["bootstrap"]["n_resamples"]), confidence=float(c["bootstrap"]["confidence"]),
        seed=int(c["seed"]), name=f"{c['task']['name']}/{c['dataset']['name']}",
        subgroups=list(c.get("subgroups") or []),
        checkpoint=run_dir / "checkpoint",
        checkpoint_every=int(c.get("checkpoint_every", 20)),
        checkpoint_interval_s=float(c.get("checkpoint_interval_s") or 0.0),
        shard=c.get("shard"), retry_failed=retry_failed,
        max_failure_rate=None,  # the run directory is written first; the callers judge the failures
    )


def _write(c: Mapping[str, Any], results: Any, run_dir: Path, train_info: dict | None) -> None:
    """Write the run directory (rank 0 only), drop the checkpoint, print the summary."""
    from medimg_bench.engine.distributed import is_main_process, world

    if train_info:
        results.manifest["training"] = train_info
        if "cut" in train_info:  # beside the scores: a cut training explains them
            results.summary["training"] = {k: train_info[k] for k in (
                "steps", "steps_asked", "epochs", "epochs_asked", "seconds", "cut", "max_seconds") if k in train_info}
    results.manifest["world_size"] = world()[1]
    from medimg_bench.runs.slurm import job_record

    job = job_record()  # a Slurm / submitit job: its id and log files (the sweep table shows them)
    if job is not None:
        results.manifest["job"] = job
    if not is_main_process():  # under torchrun every rank holds the gathered results; one writes
        return
    from medimg_bench.engine.checkpoint import remove_checkpoint
    from medimg_bench.engine.report import print_summary
    from medimg_bench.engine.results import redact_secrets

    config = redact_secrets(c)
    # check_run_dir applied the rules before the run: results already there mean overwrite/resume
    results.save(run_dir, config=config, overwrite=bool(c.get("overwrite") or c.get("resume")))
    if c.get("shard"):
        from medimg_bench.engine.merge import save_shard_state

        save_shard_state(results, run_dir, config=config)
    print_summary(results)
    if (train_info or {}).get("cut"):  # after the table, where the scores are read
        done = train_info.get("epochs") if "epochs_asked" in train_info else train_info["steps"]
        want = train_info.get("epochs_asked", train_info.get("steps_asked"))
        print(f"NOTE: these scores come from a training cut short by train.max_seconds "
              f"({done} of {want} {'epochs' if 'epochs_asked' in train_info else 'steps'})", flush=True)
    n_failed = int(results.summary.get("n_failed") or 0)
    if not n_failed:
        remove_checkpoint(run_dir / "checkpoint")  # only now: the results hold everything
    elif (run_dir / "checkpoint").is_dir():  # what a resume needs to predict exactly those again
        print(f"{n_failed} sample(s) failed; {run_dir / 'checkpoint'} is kept: resume={run_dir} predicts "
              "exactly them again (overwrite=true starts over)", flush=True)
    _with_report(c, results, run_dir)


def _with_report(c: Mapping[str, Any], results: Any, run_dir: Path) -> Any:
    """Write ``report.html`` for the finished run (or benchmark) unless ``report=false``; a page
    that cannot be drawn is a warning, never a failed run. Returns ``results``."""
    from medimg_bench.engine.distributed import is_main_process

    written = (Path(run_dir) / "summary.json").exists() or bool(c.get("benchmark"))
    if c.get("report", True) is False or not written or not is_main_process():
        return results
    import logging

    from medimg_bench.report import write_report

    try:
        path = write_report(run_dir)
    except Exception as exc:  # the run's results are written; the page is an extra
        logging.getLogger(__name__).warning("report.html not written for %s: %s: %s", run_dir, type(exc).__name__, exc)
        return results
    print(f"report: {path}", flush=True)
    return results


def _merge_overrides(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    """Overrides of ``extra`` replace those of ``base`` with the same key."""
    merged: dict[str, str] = {}
    for o in [*base, *extra]:
        merged[o.split("=", 1)[0].lstrip("+~")] = o
    return list(merged.values())


def _run_benchmark(c: Mapping[str, Any], run_dir: Path, parent_overrides: Sequence[str]) -> dict[str, Any]:
    """Run every entry of ``c["benchmark"]`` into a sub-directory; writes ``benchmark.json``."""
    bench = c["benchmark"]
    user = [
        o for o in parent_overrides
        if o.split("=", 1)[0].lstrip("+~") not in ("benchmark", "run_name", "hydra")
        and not o.split("=", 1)[0].lstrip("+~").startswith(("benchmark.", "hydra."))
    ]
    out: dict[str, Any] = {}
    index: dict[str, Any] = {"benchmark": bench.get("name"), "entries": {}}
    for entry, overrides in (bench.get("entries") or {}).items():
        sub_cfg = compose_config(_merge_overrides(list(overrides), user))
        res = run_config(sub_cfg, run_dir / entry)
        out[entry] = res
        index["entries"][entry] = {
            "run_dir": str(run_dir / entry),
            "means": {k: v.get("mean", {}).get("value") for k, v in res.summary["metrics"].items()},
            "n_failed": res.summary["n_failed"],
        }
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "benchmark.json").write_text(json.dumps(index, indent=2))
    return _with_report(c, out, run_dir)  # the entries side by side


def max_failure_rate(cfg: Any) -> float:
    """``max_failure_rate`` of a config (a fraction in [0, 1]; 1.0 when absent)."""
    value = cfg.get("max_failure_rate", 1.0)
    try:
        rate = float(1.0 if value is None else value)
    except (TypeError, ValueError):
        rate = float("nan")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"max_failure_rate={value!r}: expected a fraction between 0 and 1 "
                         "(e.g. 0.05; 1.0 fails only a run that scored no sample)")
    return rate


def _entries(results: Any) -> list[Any]:
    """The Results of a run, or of every entry of a benchmark."""
    entries = results.values() if isinstance(results, dict) else [results]
    return [r for r in entries if hasattr(r, "exceeds_failure_rate")]


def failed_entries(results: Any, rate: float) -> list[Any]:
    """The Results (one, or a benchmark's entries) that scored nothing or failed more than
    ``rate`` of their samples."""
    return [r for r in _entries(results) if r.exceeds_failure_rate(rate)]


def scored_line(results: Any) -> str:
    """``scored N of M samples (K failed)`` over a run or every entry of a benchmark."""
    entries = _entries(results)
    n = sum(int(r.summary.get("n_samples", 0)) for r in entries)
    failed = sum(int(r.summary.get("n_failed", 0)) for r in entries)
    return f"scored {n - failed} of {n} samples ({failed} failed)"


def run(overrides: Sequence[str] = (), *, run_dir: str | Path | None = None) -> Any:
    """Python API: compose the config with ``overrides`` and run it.

    ``run_dir`` defaults to ``<output_dir>/<date>/<time>_<task>_<dataset>``. Returns what
    :func:`run_config` returns; the directory is ``results.run_dir``. A run (or benchmark entry)
    that scored no sample, or failed more than ``max_failure_rate`` of them, raises
    :class:`~medimg_bench.engine.results.EvaluationFailed` after its directory is written (the
    CLI exits 3 there); the exception's ``results`` holds it.
    """
    cfg = compose_config(overrides)
    rate = max_failure_rate(cfg)
    results = _run_composed(cfg, overrides, run_dir)
    failed = failed_entries(results, rate)
    if failed:
        from medimg_bench.engine.results import EvaluationFailed

        raise EvaluationFailed(failed[0], rate)
    return results


def _run_composed(cfg: Any, overrides: Sequence[str], run_dir: str | Path | None) -> Any:
    if run_dir is None and cfg.get("resume"):
        run_dir = cfg.resume
    if run_dir is None:
        now = datetime.now()
        run_dir = Path(cfg.output_dir) / now.strftime("%Y-%m-%d") / (
            f"{now.strftime('%H-%M-%S-%f')}_{cfg.run_name}"
        )
    return run_config(cfg, run_dir, parent_overrides=overrides)
