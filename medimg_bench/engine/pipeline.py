"""Config-driven runs: build dataset, model, task and metrics from a composed Hydra config,
optionally train, evaluate, and write the run directory. The CLI, Hydra sweeps and the Python
API (:func:`run`) all go through :func:`run_config`."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["config_dir", "compose_config", "run", "run_config", "build_dataset", "check_run_dir"]


def config_dir() -> Path:
    """The Hydra config tree: ``$MEDIMG_BENCH_CONFIG_DIR``, else the tree shipped inside the
    package (``medimg_bench/configs``, linked as ``configs/`` at the repository root)."""
    import os

    env = os.environ.get("MEDIMG_BENCH_CONFIG_DIR")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[1]
    candidates += [here / "configs"]
    for c in candidates:
        if (c / "config.yaml").exists():
            return c
    raise FileNotFoundError(
        f"medimg_bench configs not found (looked in {[str(c) for c in candidates]}); "
        "install from a clone with `pip install -e .` or set MEDIMG_BENCH_CONFIG_DIR"
    )


def compose_config(overrides: Sequence[str] = ()) -> Any:
    """Compose the root config with Hydra ``overrides`` (``["task=segmentation", ...]``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _plain(cfg: Any) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else dict(cfg)  # type: ignore[return-value]


def build_dataset(dcfg: Mapping[str, Any], split: str | None) -> Any:
    """Create the dataset described by a ``dataset`` config node for ``split``."""
    from medimg_bench.registry import create_dataset

    kwargs = dict(dcfg.get("options") or {})
    if dcfg.get("root") is not None:
        kwargs["root"] = dcfg["root"]
    return create_dataset(dcfg["name"], split=split, **kwargs)


def _build_model(mcfg: Mapping[str, Any], dataset: Any) -> Any:
    from medimg_bench.registry import MODELS, create_model

    options = dict(mcfg.get("options") or {})
    if "generative" in MODELS.entry(mcfg["name"]).tags:  # prompts, not class heads or channels
        return _checked_ids(create_model(mcfg["name"], **{k: v for k, v in options.items() if v is not None}), dataset)
    if options.get("num_classes") is None and getattr(dataset, "classes", None):
        options["num_classes"] = len(dataset.classes)
    if options.get("in_channels") is None and len(dataset) and "predictions" not in MODELS.entry(mcfg["name"]).tags:
        options["in_channels"] = _infer_channels(dataset)
    return _checked_ids(create_model(mcfg["name"], **{k: v for k, v in options.items() if v is not None}), dataset)


def _checked_ids(model: Any, dataset: Any) -> Any:
    """Let a model that looks predictions up by id (model=predictions) warn about unknown ids."""
    manifest = getattr(dataset, "manifest", None)
    if hasattr(model, "bind_dataset"):  # stored answers: the dataset may skip its images
        model.bind_dataset(dataset)
    if hasattr(model, "check_ids") and manifest is not None and "id" in manifest:
        model.check_ids(list(manifest["id"]))
    return model


def _infer_channels(dataset: Any, tries: int = 20) -> int:
    """Channels of the first readable sample (a bad first file must not stop the run)."""
    errors = []
    for i in range(min(tries, len(dataset))):
        try:
            image = dataset[i]["image"]
        except Exception as exc:  # recorded as a failed sample later by the engine
            errors.append(str(exc))
            continue
        return int((image[0] if isinstance(image, list) else image).shape[0])
    raise ValueError(f"cannot infer in_channels: the first {len(errors)} samples failed to load: {errors[:3]}")


def run_config(cfg: Any, run_dir: str | Path, *, parent_overrides: Sequence[str] = ()) -> Any:
    """Execute one composed config into ``run_dir``; returns :class:`Results` (or, for a
    benchmark config, a dict entry name → Results)."""
    run_dir = Path(run_dir)
    c = _plain(cfg)
    if c.get("benchmark"):
        return _run_benchmark(c, run_dir, parent_overrides)
    if c.get("protocol"):
        from medimg_bench.protocols import run_protocol

        return run_protocol(c, run_dir)
    from medimg_bench.engine.distributed import maybe_init_distributed
    from medimg_bench.engine.report import print_summary
    from medimg_bench.engine.runner import evaluate, parse_shard
    from medimg_bench.registry import create_task

    parse_shard(c.get("shard"))  # a bad spec fails before anything is built

    rank, world_size = maybe_init_distributed()
    if world_size > 1:  # every rank writes its checkpoint part under rank 0's run directory
        import torch.distributed as dist

        box = [str(run_dir)]
        dist.broadcast_object_list(box, src=0)
        run_dir = Path(box[0])
    finished = check_run_dir(run_dir, resume=c.get("resume"), overwrite=bool(c.get("overwrite")))
    if finished is not None:
        return finished
    device = c.get("device")
    if world_size > 1 and device in (None, "auto"):
        import torch

        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
    _seed_everything(int(c["seed"]))
    task_options = dict(c["task"].get("options") or {})
    if c.get("scoring"):  # VQA harness profile (configs/scoring/)
        task_options["scoring"] = c["scoring"]
    task = create_task(c["task"]["name"], **task_options)
    dcfg = c["dataset"]
    dataset = build_dataset(dcfg, dcfg.get("split"))
    model = _build_model(c["model"], dataset)
    train_info = None
    tcfg = c.get("train") or {}
    weights = run_dir / "model.safetensors"
    if tcfg.get("enabled") and c.get("resume") and weights.exists():
        from medimg_bench.models.base import load_checkpoint

        load_checkpoint(model.module, weights)  # trained before the interruption
        train_info = {"resumed_from": str(weights)}
    elif tcfg.get("enabled"):
        from medimg_bench.engine.runner import resolve_device
        from medimg_bench.models.training import fit, fit_config_options

        if not dcfg.get("train_split"):
            raise ValueError(f"train.enabled=true but dataset {dcfg['name']!r} has no train_split")
        train_set = build_dataset(dcfg, dcfg["train_split"])
        val_set = build_dataset(dcfg, tcfg.get("val_split") or "val") if tcfg.get("select_on") else None
        model.to(resolve_device(device))
        tr = fit(
            model, train_set, loss_fn=task.loss, max_steps=int(tcfg["max_steps"]),
            max_seconds=tcfg.get("max_seconds"), lr=float(tcfg["lr"]),
            weight_decay=float(tcfg.get("weight_decay", 0.0)), batch_size=int(tcfg["batch_size"]),
            seed=int(c["seed"]), progress=bool(c.get("progress", True)) and rank == 0,
            cache=bool(tcfg.get("cache", False)), num_workers=int(tcfg.get("num_workers", 0)),
            val_dataset=val_set, **fit_config_options(tcfg),
        )
        train_info = {"n_train": len(train_set), "steps": tr.steps, "epochs": tr.epochs,
                      "seconds": round(tr.seconds, 2), "final_loss": tr.final_loss}
        if tr.best_epoch is not None:  # train.select_on: the epoch kept and the validation curve
            train_info.update(select_on=tcfg["select_on"], n_val=len(val_set), best_epoch=tr.best_epoch,
                              best_val=tr.best_val, val_curve=[[e, v] for e, v in tr.val_curve])
        if rank == 0:
            from safetensors.torch import save_file

            run_dir.mkdir(parents=True, exist_ok=True)
            state = {k: v.detach().cpu().contiguous() for k, v in model.module.state_dict().items()}
            save_file(state, str(weights))
    results = evaluate(
        model, dataset, task=task, metrics=c.get("metrics"), batch_size=int(c["batch_size"]),
        num_workers=int(c.get("num_workers", 0)), device=device, amp=bool(c.get("amp")),
        fail_fast=bool(c.get("fail_fast")), progress=bool(c.get("progress", True)),
        n_resamples=int(c["bootstrap"]["n_resamples"]), confidence=float(c["bootstrap"]["confidence"]),
        seed=int(c["seed"]), name=f"{c['task']['name']}/{dcfg['name']}",
        subgroups=list(c.get("subgroups") or []),
        checkpoint=run_dir / "checkpoint",
        checkpoint_every=int(c.get("checkpoint_every", 20)),
        checkpoint_interval_s=float(c.get("checkpoint_interval_s") or 0.0),
        shard=c.get("shard"),
    )
    if train_info:
        results.manifest["training"] = train_info
    from medimg_bench.engine.distributed import is_main_process, world

    results.manifest["world_size"] = world()[1]
    if is_main_process():  # under torchrun every rank holds the gathered results; one writes
        from medimg_bench.engine.checkpoint import remove_checkpoint
        from medimg_bench.engine.results import redact_secrets

        config = redact_secrets(c)
        results.save(run_dir, config=config)
        if c.get("shard"):
            from medimg_bench.engine.merge import save_shard_state

            save_shard_state(results, run_dir, config=config)
        remove_checkpoint(run_dir / "checkpoint")  # only now: the results hold everything
        print_summary(results)
    return results


_RESULT_FILES = ("summary.json", "samples.parquet")


def check_run_dir(run_dir: str | Path, *, resume: Any = None, overwrite: bool = False) -> Any:
    """Apply the ``resume`` / ``overwrite`` rules before anything runs.

    * ``resume=DIR`` with neither a checkpoint, trained weights nor finished results in DIR →
      ``FileNotFoundError`` naming DIR;
    * ``resume=DIR`` of a finished run (results, no checkpoint) → nothing is recomputed: the saved
      :class:`Results` are returned (the caller prints them);
    * a new run whose directory already holds results or a checkpoint → ``FileExistsError``
      unless ``overwrite=true`` (then the old checkpoint is removed so nothing is mixed in).

    Returns the finished :class:`Results` or None (go on and run)."""
    from medimg_bench.engine.checkpoint import has_checkpoint, remove_checkpoint

    run_dir = Path(run_dir)
    has_results = any((run_dir / f).exists() for f in _RESULT_FILES)
    has_ckpt = has_checkpoint(run_dir / "checkpoint")
    if resume:
        rdir = Path(str(resume))
        nothing = not has_ckpt and not has_results and not (run_dir / "model.safetensors").exists()
        if rdir.resolve() != run_dir.resolve():
            if not rdir.is_dir() or rdir.resolve() not in run_dir.resolve().parents:
                raise ValueError(f"resume={rdir} but the run directory is {run_dir}; they must be the same")
            if nothing:  # an entry of a resumed benchmark that had not started: run it
                return None
        if nothing:
            raise FileNotFoundError(
                f"resume={rdir}: nothing to resume there (no checkpoint/, no model.safetensors and no "
                f"finished results{'; the directory does not exist' if not rdir.exists() else ''})"
            )
        if has_results and not has_ckpt:
            from medimg_bench.engine.distributed import is_main_process
            from medimg_bench.engine.report import print_summary
            from medimg_bench.engine.results import Results

            results = Results.load(rdir)
            if is_main_process():
                print(f"resume={rdir}: this run is already finished; nothing was recomputed. "
                      "Its summary:", flush=True)
                print_summary(results)
            return results
        return None
    if has_results or has_ckpt:
        if not overwrite:
            what = "results (" + ", ".join(f for f in _RESULT_FILES if (run_dir / f).exists()) + ")" \
                if has_results else "an unfinished run's checkpoint/"
            raise FileExistsError(
                f"run directory {run_dir} already holds {what}; pass overwrite=true to replace it, "
                f"or resume={run_dir} to continue or show it"
            )
        remove_checkpoint(run_dir / "checkpoint")
    return None


def _merge_overrides(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    """Overrides of ``extra`` replace those of ``base`` with the same key."""
    merged: dict[str, str] = {}
    for o in [*base, *extra]:
        merged[o.split("=", 1)[0].lstrip("+~")] = o
    return list(merged.values())


def _run_benchmark(c: Mapping[str, Any], run_dir: Path, parent_overrides: Sequence[str]) -> dict[str, Any]:
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
    return out


def run(overrides: Sequence[str] = (), *, run_dir: str | Path | None = None) -> Any:
    """Python API: compose the config with ``overrides`` and run it.

    ``run_dir`` defaults to ``<output_dir>/<date>/<time>_<task>_<dataset>``. Returns what
    :func:`run_config` returns; the directory is ``results.run_dir``.
    """
    cfg = compose_config(overrides)
    if run_dir is None and cfg.get("resume"):
        run_dir = cfg.resume
    if run_dir is None:
        now = datetime.now()
        run_dir = Path(cfg.output_dir) / now.strftime("%Y-%m-%d") / (
            f"{now.strftime('%H-%M-%S-%f')}_{cfg.run_name}"
        )
    return run_config(cfg, run_dir, parent_overrides=overrides)
