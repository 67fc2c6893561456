"""Where the package's own files live: the Hydra config tree (a core module, usable from every
layer: prompt templates, CLIP templates and baseline cards are read from it)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["config_dir"]


def config_dir() -> Path:
    """The Hydra config tree: ``$MEDIMG_BENCH_CONFIG_DIR``, else the tree shipped inside the
    package (``medimg_bench/configs``, linked as ``configs/`` at the repository root)."""
    env = os.environ.get("MEDIMG_BENCH_CONFIG_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parent / "configs"]
    for c in candidates:
        if (c / "config.yaml").exists():
            return c
    raise FileNotFoundError(
        f"medimg_bench configs not found (looked in {[str(c) for c in candidates]}); "
        "install from a clone with `pip install -e .` or set MEDIMG_BENCH_CONFIG_DIR"
    )
