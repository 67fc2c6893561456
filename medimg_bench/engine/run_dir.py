"""The rules for a run directory before anything runs: resume, overwrite, refuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_run_dir", "retries_failed", "RESULT_FILES", "TRAIN_STATE", "has_train_state",
           "remove_train_state"]

RESULT_FILES = ("summary.json", "samples.parquet")
#: the training state of an unfinished training (``fit``'s ``checkpoint_dir`` is ``train/``)
TRAIN_STATE = Path("train") / "train_state.pt"


def has_train_state(run_dir: str | Path) -> bool:
    """True when ``run_dir`` holds the training state of a training that did not finish."""
    return (Path(run_dir) / TRAIN_STATE).is_file()


def remove_train_state(run_dir: str | Path) -> None:
    """Remove ``run_dir/train/``'s training state and the config it was keyed to (the folder too
    when nothing else is in it)."""
    state_dir = (Path(run_dir) / TRAIN_STATE).parent
    for name in (TRAIN_STATE.name, "config.json"):
        (state_dir / name).unlink(missing_ok=True)
    if state_dir.is_dir() and not any(state_dir.iterdir()):
        state_dir.rmdir()


def check_run_dir(run_dir: str | Path, *, resume: Any = None, overwrite: bool = False) -> Any:
    """Apply the ``resume`` / ``overwrite`` rules before anything runs.

    * ``resume=DIR`` of a run killed before its first checkpoint (DIR holds the run's saved
      config, ``.hydra/config.yaml``, and nothing else to resume from) → None, with a message:
      the run starts again in DIR (an LVLM's answers come back from the response cache);
    * ``resume=DIR`` with neither that config, a checkpoint, trained weights nor finished results
      in DIR → ``FileNotFoundError`` naming DIR;
    * ``resume=DIR`` of a finished run (results, no checkpoint) → nothing is recomputed: the saved
      :class:`Results` are returned (the caller prints them);
    * ``resume=DIR`` of a finished run that kept its checkpoint (it had failed samples) → None:
      the caller runs again with ``retry_failed`` (:func:`retries_failed`), predicting exactly
      the failed samples;
    * ``resume=DIR`` of a run whose training was interrupted (``train/train_state.pt``) → None:
      the caller trains on from that state, then evaluates;
    * a new run whose directory already holds results, a checkpoint or a training state →
      ``FileExistsError`` unless ``overwrite=true`` (then the old checkpoint and training state
      are removed so nothing is mixed in).

    Returns the finished :class:`Results` or None (go on and run)."""
    from medimg_bench.engine.checkpoint import has_checkpoint, remove_checkpoint

    run_dir = Path(run_dir)
    has_results = any((run_dir / f).exists() for f in RESULT_FILES)
    has_ckpt = has_checkpoint(run_dir / "checkpoint") or has_train_state(run_dir)
    if resume:
        return _resume(run_dir, Path(str(resume)), has_results=has_results, has_ckpt=has_ckpt)
    if has_results or has_ckpt:
        if not overwrite:
            what = "results (" + ", ".join(f for f in RESULT_FILES if (run_dir / f).exists()) + ")" \
                if has_results else ("an unfinished run's checkpoint/" if has_checkpoint(run_dir / "checkpoint")
                                     else f"an unfinished training's {TRAIN_STATE}")
            raise FileExistsError(
                f"run directory {run_dir} already holds {what}; pass overwrite=true to replace it, "
                f"or resume={run_dir} to continue or show it"
            )
        remove_checkpoint(run_dir / "checkpoint")
        remove_train_state(run_dir)
    return None


def _resume(run_dir: Path, rdir: Path, *, has_results: bool, has_ckpt: bool) -> Any:
    nothing = not has_ckpt and not has_results and not (run_dir / "model.safetensors").exists()
    if rdir.resolve() != run_dir.resolve():
        if not rdir.is_dir() or rdir.resolve() not in run_dir.resolve().parents:
            raise ValueError(f"resume={rdir} but the run directory is {run_dir}; they must be the same")
        if nothing:  # an entry of a resumed benchmark that had not started: run it
            return None
    if nothing and (rdir / ".hydra" / "config.yaml").is_file():
        from medimg_bench.engine.distributed import is_main_process

        if is_main_process():  # killed before its first checkpoint: nothing to lose, start it here
            print(f"resume={rdir}: the run was stopped before its first checkpoint; it starts again from the "
                  "beginning in this directory with its saved options (answers in the response cache "
                  "are served from there, not asked again)", flush=True)
        return None
    if nothing:
        raise FileNotFoundError(
            f"resume={rdir}: nothing to resume there (no checkpoint/, no {TRAIN_STATE}, no model.safetensors and no "
            f"finished results{'; the directory does not exist' if not rdir.exists() else ''})"
        )
    from medimg_bench.engine.distributed import is_main_process

    if has_results and not has_ckpt:
        from medimg_bench.engine.report import print_summary
        from medimg_bench.engine.results import Results

        results = Results.load(rdir)
        if is_main_process():
            n_failed = int(results.summary.get("n_failed") or 0)
            why = (f" Its {n_failed} failed sample(s) cannot be predicted again alone: the run kept no "
                   "checkpoint/ (it was deleted, or written by an older medimg_bench); overwrite=true "
                   "recomputes the whole run." if n_failed else "")
            print(f"resume={rdir}: this run is already finished; nothing was recomputed.{why} Its summary:",
                  flush=True)
            print_summary(results)
        return results
    if has_results and is_main_process():
        print(f"resume={rdir}: this run is finished and kept its checkpoint for its failed samples: "
              "predicting exactly those again (every other sample is kept as it was)", flush=True)
    return None


def retries_failed(run_dir: str | Path, resume: Any) -> bool:
    """True when ``resume`` continues a finished run that kept its checkpoint (results and
    ``checkpoint/``): its failed samples are predicted again (``evaluate(retry_failed=True)``)."""
    from medimg_bench.engine.checkpoint import has_checkpoint

    run_dir = Path(run_dir)
    return bool(resume) and any((run_dir / f).exists() for f in RESULT_FILES) and has_checkpoint(
        run_dir / "checkpoint")
