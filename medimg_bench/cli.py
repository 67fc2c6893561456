"""``medimg-bench`` command line.

    medimg-bench run [hydra overrides] [-m]     compose configs/ and run (sweeps with -m)
    medimg-bench demo [overrides]               the built-in demo (= run benchmark=demo)
    medimg-bench list {datasets,models,metrics,tasks}
    medimg-bench datasets check CONFIG [key=value ...]
    medimg-bench cache {stats,export,clear}     the LVLM response cache
    medimg-bench merge RUN_DIRS... --out DIR    merge the run directories of a sharded evaluation
    medimg-bench sweep MULTIRUN_DIR             one table of a multirun's run directories
    medimg-bench compare RUN_A RUN_B            paired comparison of two runs
    medimg-bench report RUN_DIR [RUN_DIR ...]   a self-contained report.html (worst cases with pictures)
    medimg-bench reproduce CARD [k=v ...] | --list   run a published-baseline card
    medimg-bench version
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "EXIT_FAILED_SAMPLES"]

#: exit code of a run that wrote its directory but scored no sample, or failed on more than
#: ``max_failure_rate`` of them (1 is any other error)
EXIT_FAILED_SAMPLES = 3

# Subcommands that live in their own module: name -> (module, function taking argv, returning
# the exit code). A new subcommand is one module plus one line here.
_SUBCOMMANDS = {
    "cache": ("medimg_bench.models.vlm.cache", "cli_main"),
    "merge": ("medimg_bench.engine.merge", "cli_main"),
    "sweep": ("medimg_bench.runs.sweep", "cli_main"),
    "compare": ("medimg_bench.baselines.compare", "cli_main"),
    "reproduce": ("medimg_bench.baselines.reproduce", "cli_main"),
    "report": ("medimg_bench.report.cli", "cli_main"),
}


def _hydra_run(argv: Sequence[str]) -> int:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig

    from medimg_bench.resources import config_dir
    from medimg_bench.runs import run_config
    from medimg_bench.runs.compose import check_overrides, resolve_aliases, resume_overrides
    from medimg_bench.runs.console_log import console_to_log

    argv, resumed = resume_overrides(argv)
    argv, notes = resolve_aliases(argv)
    for note in [*resumed, *notes]:
        print(f"medimg-bench run: {note}", file=sys.stderr)
    error = _check_launcher(argv) or check_overrides(argv)
    if error:
        print(f"medimg-bench run: {error}", file=sys.stderr)
        return 2

    pending: list[BaseException] = []  # errors of in-process jobs, raised once Hydra returns
    sweeps: list[str] = []  # the multirun folder of a -m run
    def task_function(cfg: DictConfig) -> None:
        try:
            _task(cfg)
        except Exception as exc:
            hc = HydraConfig.get()
            if str(hc.mode).endswith("MULTIRUN") and "BasicLauncher" not in str(hc.launcher.get("_target_", "")):
                raise  # a job on another machine: its launcher reports it
            pending.append(exc)  # raised by _call_hydra without Hydra's extra lines

    def _task(cfg: DictConfig) -> None:
        hc = HydraConfig.get()
        if str(hc.mode).endswith("MULTIRUN") and hc.sweep.dir:
            sweeps.append(str(hc.sweep.dir))
        out_dir = Path(hc.runtime.output_dir)
        _redact_hydra_files(cfg, hc, out_dir)  # before anything else reads them
        run_dir = cfg.get("resume") or str(out_dir)
        try:
            rate = _max_failure_rate(cfg)
            with console_to_log():  # the summary table also in cli.log
                results = run_config(cfg, run_dir, parent_overrides=list(hc.overrides.task))
        except BaseException:
            _remove_if_empty(out_dir, stop=cfg.get("output_dir"))  # a failed run leaves no folder
            raise
        from medimg_bench.engine.distributed import is_main_process

        if str(Path(run_dir).resolve()) != str(out_dir.resolve()) or not is_main_process():
            _remove_if_empty(out_dir, stop=cfg.get("output_dir"))  # resumed elsewhere, or rank > 0
        verdict = _failure_verdict(results, rate)
        if is_main_process():
            print(f"run directory: {run_dir}", flush=True)
            if not verdict:  # the console's last line: how many samples were scored
                from medimg_bench.runs.run import scored_line

                print(scored_line(results), flush=True)
        if verdict:  # written and shown; the exit code tells a pipeline the run is not a success
            raise _failed_samples_error()(verdict)

    saved = sys.argv
    sys.argv = ["medimg-bench", *argv]
    try:
        return _call_hydra(hydra.main(config_path=str(config_dir()), config_name="config",
                                      version_base="1.3")(task_function), pending)
    finally:
        sys.argv = saved
        for folder in dict.fromkeys(sweeps):  # a sweep's runs are one table away
            print(f"multirun folder: {folder}\n  one table of its runs: medimg-bench sweep {folder}", flush=True)


#: errors a user causes and can fix from the message alone (a missing data root or API key, a bad
#: ``resume=`` path, an option out of range, a launcher that cannot submit): one line on stderr
_USER_ERRORS = (OSError, ValueError, ImportError)
_USER_ERROR_NAMES = {"EvaluationFailed", "FailedSamples", "FailedJobError", "MissingConfigException",
                     "ConfigCompositionException", "OverrideParseException", "HydraException"}


def _is_user_error(exc: BaseException) -> bool:
    names = {t.__name__ for t in type(exc).__mro__}
    return isinstance(exc, _USER_ERRORS) or bool(names & _USER_ERROR_NAMES)


def _call_hydra(main_fn: Any, pending: list[BaseException]) -> int:
    """Run a ``hydra.main`` function and return the exit code. Hydra is asked to raise (it
    prints a trace otherwise); a user error is then one line on stderr — the full trace only
    when the user set ``HYDRA_FULL_ERROR=1`` —, a too-failed run exits 3, a bug prints its trace."""
    import os
    import traceback

    user_full = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        main_fn()
        for exc in pending[1:]:  # more failed jobs of a sweep: one line each, the first raised
            print(f"medimg-bench run: {_one_line(exc)}", file=sys.stderr, flush=True)
        if pending:
            raise pending[0]
    except SystemExit as exc:  # argparse / --help / hydra's own exits
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    except Exception as exc:
        if user_full:
            raise
        # too many failed samples: a run's verdict, or a protocol's evaluation (EvaluationFailed)
        failed = type(exc).__name__ in ("FailedSamples", "EvaluationFailed")
        if failed or _is_user_error(exc):
            message = (str(exc) if type(exc).__name__ == "FailedSamples" else f"medimg-bench run: {exc}") \
                if failed else f"medimg-bench run: {_one_line(exc)}"
            print(message, file=sys.stderr, flush=True)
        else:  # not the user's doing: the trace is what a bug report needs
            traceback.print_exception(exc)
        return EXIT_FAILED_SAMPLES if failed else 1
    finally:
        if user_full is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = user_full
    return 0


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (its kind first when the message does not say it)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, (ValueError, OSError)) or "Exception" in type(exc).__name__ \
        else f"{type(exc).__name__}: {text}"


def _failed_samples_error() -> type[Exception]:
    """The error a run with too many failed samples raises: Hydra reports it by its message
    alone, without a traceback (defined on use: Hydra is imported only by ``run``; a plain
    function, which the submitit launchers can pickle with the task function)."""
    from hydra.errors import CompactHydraException

    class FailedSamples(CompactHydraException):
        """The run directory is written, but too many of its samples failed."""

    return FailedSamples


def _max_failure_rate(cfg: Any) -> float:
    from medimg_bench.runs.run import max_failure_rate

    return max_failure_rate(cfg)


def _failure_verdict(results: Any, rate: float) -> str | None:
    """Why a run (or each entry of a benchmark) failed too many samples, or None; its last line
    says how many samples were scored of how many."""
    from medimg_bench.runs.run import failed_entries, scored_line

    reports = [r.failure_report(rate) for r in failed_entries(results, rate)]
    if not reports:
        return None
    return ("medimg-bench run: the run directory is written, but\n" + "\n".join(reports)
            + f"\n(exit {EXIT_FAILED_SAMPLES}; max_failure_rate=1.0 fails only a run that scored no sample)"
            + f"\n{scored_line(results)}: the run FAILED")


def _is_hydra_only(path: Path) -> bool:
    return path.name == ".hydra" or path.suffix == ".log"


def _remove_if_empty(out_dir: Path, *, stop: Any = None) -> None:
    """Remove a Hydra output folder holding nothing but ``.hydra/`` and a log, then its parents
    (the date folder…) while they are empty, up to ``stop`` (the ``output_dir``)."""
    import shutil

    if not out_dir.is_dir() or not all(_is_hydra_only(p) for p in out_dir.iterdir()):
        return
    shutil.rmtree(out_dir, ignore_errors=True)
    stop_at = Path(str(stop)).resolve() if stop else None
    parent = out_dir.resolve().parent
    while stop_at is not None and parent != stop_at and stop_at in parent.parents:
        try:
            parent.rmdir()  # only when empty
        except OSError:
            break
        parent = parent.parent


def _redact_hydra_files(cfg: Any, hc: Any, out_dir: Path) -> None:
    """Rewrite Hydra's saved configs (``.hydra/*.yaml``, the sweep's ``multirun.yaml``) with
    credentials replaced by ``***`` — values of secret keys (``api_key``, ``*token*``…, nested
    ``extra_body`` keys included), URL user info, provider tokens — and redact every record the
    log handlers write from now on (``cli.log``, the console) the same way."""
    from omegaconf import OmegaConf

    from medimg_bench._secrets import (
        environ_secret_values,
        install_log_filter,
        redact_files,
        secret_values,
    )

    plain = OmegaConf.to_container(cfg, resolve=False)
    values = secret_values(plain, list(hc.overrides.task))
    install_log_filter(values | environ_secret_values())
    files = list((out_dir / ".hydra").glob("*.yaml")) if (out_dir / ".hydra").is_dir() else []
    sweep_dir = getattr(hc.sweep, "dir", None)
    if sweep_dir:
        files.append(Path(sweep_dir) / "multirun.yaml")
    redact_files(files, values)  # a file without a credential is left as it is


def _check_launcher(argv: Sequence[str]) -> str | None:
    """Impossible SLURM requests are refused before anything is submitted: a CUDA job with no
    GPU, no CPU, no memory or no time. Returns the message, or None when the request is fine."""
    launcher = [a.split("=", 1)[1] for a in argv if a.startswith("hydra/launcher=")]
    if not launcher or launcher[-1] not in ("slurm", "local"):
        return None
    if launcher[-1] == "slurm" and ("-m" in argv or "--multirun" in argv):
        missing = _slurm_missing()
        if missing:
            return missing
    fixed = [a for a in argv if "=" in a and "," not in a.split("=", 1)[1] and not a.startswith("-")
             and (a.startswith(("hydra/launcher=", "hydra.launcher.", "device=", "+device=")))]
    try:
        from hydra import compose, initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra

        from medimg_bench.resources import config_dir

        if GlobalHydra.instance().is_initialized():
            GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = compose(config_name="config", overrides=fixed, return_hydra_config=True)
    except Exception as exc:  # a bad launcher override: say so
        return f"cannot compose the launcher config: {exc}"
    lc = cfg.hydra.launcher
    devices = {str(a.split("=", 1)[1]) for a in argv if a.split("=", 1)[0].lstrip("+") == "device"}
    devices = {d for v in devices for d in v.split(",")} or {str(cfg.get("device"))}
    gpus = lc.get("gpus_per_node") or 0
    gpus = max(int(gpus), int(lc.get("gpus_per_task") or 0))
    wants_cuda = any(d.startswith("cuda") for d in devices)
    problems = []
    if wants_cuda and gpus < 1 and launcher[-1] == "slurm":
        problems.append(f"device={sorted(devices)} asks for CUDA but the SLURM request has "
                        f"{gpus} GPUs (set hydra.launcher.gpus_per_task=1, or device=cpu)")
    for key in ("cpus_per_task", "mem_gb", "timeout_min", "tasks_per_node", "nodes"):
        value = lc.get(key)
        if value is not None and int(value) < 1:
            problems.append(f"hydra.launcher.{key}={value} must be at least 1")
    return "; ".join(problems) if problems else None


def _slurm_missing() -> str | None:
    """Why ``hydra/launcher=slurm`` cannot submit from here (no submitit launcher installed, no
    ``sbatch`` on PATH), or None."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        return ('hydra/launcher=slurm needs the submitit launcher: pip install "medimg-bench[slurm]"')
    if shutil.which("sbatch") is None:
        return ("SLURM is not available here: no `sbatch` on PATH (hydra/launcher=slurm submits "
                "through it); run from the cluster's login node, or leave hydra/launcher=slurm out "
                "to run on this machine")
    return None


def _list(what: str) -> int:
    from medimg_bench import registry

    regs = {"datasets": registry.DATASETS, "models": registry.MODELS, "metrics": registry.METRICS, "tasks": registry.TASKS}
    if what not in regs:
        print(f"medimg-bench list: expected one of {sorted(regs)}, got {what!r}", file=sys.stderr)
        return 2
    reg = regs[what]
    for name in reg.list():
        entry = reg.entry(name)
        print(f"{name:28s} {entry.doc}")
    return 0


def _datasets(argv: Sequence[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="medimg-bench datasets check",
        description="List missing/unreadable files, labels outside the class list, label counts per "
        "split and patient leakage between splits. Exit 0 ok, 1 problems, 2 invalid config.",
    )
    parser.add_argument("config", help="a name in configs/dataset/ or a path to a dataset .yaml")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. root=/data/nih or dataset.root=/data/nih")
    parser.add_argument("--no-pixels", action="store_true", help="only check the manifest and files")
    parser.add_argument("--max-samples", type=int, default=None, help="read at most N samples per split")
    parser.add_argument("--hash-images", action="store_true", help="also find identical image files across splits")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the report as JSON here")
    if not argv or argv[0] != "check":
        parser.print_usage(sys.stderr)
        return 2
    args = parser.parse_args(list(argv[1:]))
    from pathlib import Path

    from omegaconf import OmegaConf

    from medimg_bench.datasets.check import run_check
    from medimg_bench.resources import config_dir

    path = Path(args.config)
    if not path.exists():
        path = config_dir() / "dataset" / f"{args.config}.yaml"
    if not path.exists():
        print(f"medimg-bench datasets check: no dataset config {args.config!r}", file=sys.stderr)
        return 2
    # `dataset.root=` as `run` takes it, or `root=`: both name the dataset config's keys
    dotlist = [o[len("dataset."):] if o.startswith("dataset.") else o for o in args.overrides]
    cfg = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(dotlist))
    return run_check(
        OmegaConf.to_container(cfg, resolve=True), read_pixels=not args.no_pixels,
        max_samples=args.max_samples, hash_images=args.hash_images, num_workers=args.workers,
        json_path=args.json,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``medimg-bench`` console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    cmd, rest = args[0], args[1:]
    if cmd == "run":
        return _hydra_run(rest)
    if cmd == "demo":
        return _hydra_run(["benchmark=demo", "run_name=demo", *rest])
    if cmd == "list":
        return _list(rest[0] if rest else "")
    if cmd == "datasets":
        return _datasets(rest)
    if cmd in _SUBCOMMANDS:
        import importlib

        module, func = _SUBCOMMANDS[cmd]
        return int(getattr(importlib.import_module(module), func)(rest) or 0)
    if cmd in ("version", "--version"):
        from medimg_bench import __version__

        print(__version__)
        return 0
    print(f"medimg-bench: unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
