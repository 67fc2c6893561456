"""Compose a run's configuration from the Hydra tree and command-line style overrides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medimg_bench.resources import config_dir

__all__ = ["compose_config", "config_dir", "plain"]


def compose_config(overrides: Sequence[str] = ()) -> Any:
    """Compose the root config with Hydra ``overrides`` (``["task=segmentation", ...]``)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def plain(cfg: Any) -> dict[str, Any]:
    """A composed config (OmegaConf) as plain, resolved Python containers."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else dict(cfg)  # type: ignore[return-value]
