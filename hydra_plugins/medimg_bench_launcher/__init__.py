"""Hydra launchers of medimg_bench (``hydra/launcher=slurm``, ``hydra/launcher=local``):
hydra-submitit-launcher's, plus a record of every job (``jobs.json``), a wait for all jobs with
every failure reported, and requeued jobs resuming their checkpoint
(:mod:`medimg_bench.runs.slurm`). Hydra finds launchers only under ``hydra_plugins``."""

try:
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher as _upstream
except ImportError:  # the [slurm] extra is not installed: no launcher to extend
    _upstream = None

if _upstream is not None:
    from medimg_bench.runs.slurm import SubmititSweepMixin

    class SlurmLauncher(SubmititSweepMixin, _upstream.SlurmLauncher):
        """Submitit's Slurm launcher with medimg_bench's job record, waiting and resume."""

    class LocalLauncher(SubmititSweepMixin, _upstream.LocalLauncher):
        """Submitit's local launcher (the jobs as local processes) with the same additions."""
