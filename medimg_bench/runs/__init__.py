"""The configuration layer: compose a config, build what it names, train when asked, choose
``evaluate`` or a protocol, write the run directory. The CLI, Hydra sweeps, ``reproduce`` and
the Python API (:func:`run`) come through here; nothing below imports it.
"""

from __future__ import annotations

from medimg_bench.builders import build_dataset, build_model, infer_channels
from medimg_bench.engine.run_dir import check_run_dir
from medimg_bench.resources import config_dir
from medimg_bench.runs.compose import compose_config
from medimg_bench.runs.run import run, run_config, seed_everything

__all__ = [
    "build_dataset",
    "build_model",
    "check_run_dir",
    "compose_config",
    "config_dir",
    "infer_channels",
    "run",
    "run_config",
    "seed_everything",
]
