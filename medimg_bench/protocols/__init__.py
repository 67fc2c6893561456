"""Foundation-model protocols: linear probe, kNN, few-shot, fine-tune, zero-shot and retrieval
(``protocol=...`` in the Hydra configs; see docs/protocols.md). Light at import: the work is in
submodules loaded on first use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["run_protocol", "aggregate_seeds", "write_seed_table"]


def run_protocol(cfg: dict, run_dir: str | Path) -> Any:
    """Run ``cfg["protocol"]`` into ``run_dir``; returns the Results written (see
    :func:`medimg_bench.protocols.run.run_protocol`)."""
    from medimg_bench.protocols.run import run_protocol as _run

    return _run(cfg, run_dir)


def aggregate_seeds(run_dirs: Any) -> Any:
    """A pandas DataFrame: mean, std and CI over seeds, grouped by config minus seed (see
    :func:`medimg_bench.protocols.run.aggregate_seeds`)."""
    from medimg_bench.protocols.run import aggregate_seeds as _agg

    return _agg(run_dirs)


def write_seed_table(multirun_dir: str | Path) -> Path:
    """Write ``seeds.parquet`` / ``seeds.md`` of a multirun folder; returns the Markdown path."""
    from medimg_bench.protocols.run import write_seed_table as _write

    return _write(multirun_dir)
