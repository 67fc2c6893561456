"""Segmentation networks from MONAI as engine adapters (sliding-window for large volumes), built
from arguments or from a MONAI bundle by name (``monai_bundle``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter, load_checkpoint
from medimg_bench.registry import register_model

__all__ = ["SegmenterAdapter", "monai_unet", "monai_net", "monai_bundle"]


class SegmenterAdapter(ModelAdapter):
    """Wraps a network returning ``(B, K, *spatial)`` logits. ``predict`` gives the argmax
    ``labels`` map, taken from the logits (no softmax), plus the softmax ``probs`` only when
    ``return_probs=True``. Inputs are padded to a multiple of ``divisor`` and cropped back, or run
    with MONAI's sliding window when ``roi_size`` is set."""

    task = "segmentation"

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        divisor: int = 1,
        roi_size: Sequence[int] | None = None,
        sw_batch_size: int = 4,
        overlap: float = 0.25,
        return_probs: bool = False,
        name: str = "",
    ) -> None:
        super().__init__(module, name=name)
        self.divisor = divisor
        self.roi_size = tuple(roi_size) if roi_size else None
        self.sw_batch_size = sw_batch_size
        self.overlap = overlap
        self.return_probs = return_probs

    def prediction_options(self) -> dict[str, Any]:
        # sliding-window settings change the logits; return_probs does not change the labels
        return {"divisor": self.divisor, "roi_size": self.roi_size,
                "sw_batch_size": self.sw_batch_size, "overlap": self.overlap}

    def _padded_forward(self, x: torch.Tensor) -> torch.Tensor:
        spatial = x.shape[2:]
        target = [math.ceil(s / self.divisor) * self.divisor for s in spatial]
        pad: list[int] = []
        for s, t in zip(reversed(spatial), reversed(target)):
            pad += [0, t - s]
        y = self.module(torch.nn.functional.pad(x, pad) if any(pad) else x)
        return y[(slice(None), slice(None), *[slice(0, s) for s in spatial])]

    def forward_batch(self, batch: dict[str, Any]) -> torch.Tensor:
        return self._padded_forward(self.images(batch))

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        x = self.images(batch)
        if self.roi_size is not None:
            from monai.inferers import sliding_window_inference

            logits = sliding_window_inference(
                x, self.roi_size, self.sw_batch_size, self._padded_forward, overlap=self.overlap
            )
        else:
            logits = self._padded_forward(x)
        if not self.return_probs:  # softmax is monotonic: the same argmax, one pass less
            return {"labels": logits.argmax(1)}
        probs = torch.softmax(logits.float(), dim=1)
        return {"probs": probs, "labels": probs.argmax(1)}


@register_model("monai_unet", tags=("segmentation", "monai"))
def monai_unet(
    *,
    num_classes: int,
    in_channels: int = 1,
    spatial_dims: int = 3,
    channels: Sequence[int] = (16, 32, 64),
    strides: Sequence[int] = (2, 2),
    num_res_units: int = 1,
    roi_size: Sequence[int] | None = None,
    checkpoint: str | Path | None = None,
    return_probs: bool = False,
) -> SegmenterAdapter:
    """MONAI ``UNet`` with ``num_classes`` output channels (background included)."""
    from monai.networks.nets import UNet

    module = UNet(
        spatial_dims=spatial_dims,
        in_channels=in_channels,
        out_channels=num_classes,
        channels=tuple(channels),
        strides=tuple(strides),
        num_res_units=num_res_units,
    )
    if checkpoint:
        load_checkpoint(module, checkpoint)
    divisor = int(math.prod(strides))
    adapter = SegmenterAdapter(module, divisor=divisor, roi_size=roi_size, return_probs=return_probs,
                               name="monai/UNet")
    adapter.weight_sources = _checkpoint_sources(checkpoint)
    adapter.config = {"factory": "monai_unet", "num_classes": num_classes, "in_channels": in_channels,
                      "spatial_dims": spatial_dims, "channels": list(channels),
                      "strides": list(strides), "num_res_units": num_res_units}
    return adapter


@register_model("monai_net", tags=("segmentation", "monai"))
def monai_net(
    *,
    net: str,
    num_classes: int,
    in_channels: int = 1,
    divisor: int = 16,
    roi_size: Sequence[int] | None = None,
    checkpoint: str | Path | None = None,
    return_probs: bool = False,
    **net_kwargs: Any,
) -> SegmenterAdapter:
    """Any network in ``monai.networks.nets`` by class name (``SegResNet``, ``SwinUNETR``,
    ``DynUNet``...), built with ``in_channels``/``out_channels`` and ``net_kwargs``."""
    import monai.networks.nets as nets

    if not hasattr(nets, net):
        raise ValueError(f"monai.networks.nets has no network {net!r}")
    module = getattr(nets, net)(in_channels=in_channels, out_channels=num_classes, **net_kwargs)
    if checkpoint:
        load_checkpoint(module, checkpoint)
    adapter = SegmenterAdapter(module, divisor=divisor, roi_size=roi_size, return_probs=return_probs,
                               name=f"monai/{net}")
    adapter.weight_sources = _checkpoint_sources(checkpoint)
    adapter.config = {"factory": "monai_net", "net": net, "num_classes": num_classes,
                      "in_channels": in_channels, **net_kwargs}
    return adapter


def _checkpoint_sources(checkpoint: str | Path | None) -> list[dict[str, Any]]:
    from medimg_bench.hub import local_weights_record

    return [local_weights_record(checkpoint)] if checkpoint else []


_BUNDLE_CONFIGS = ("configs/inference.json", "configs/inference.yaml", "configs/train.json", "configs/train.yaml")
_BUNDLE_WEIGHTS = ("models/model.safetensors", "models/model.pt", "models/model.pth")


def _bundle_folder(bundle: str, *, revision: str | None, offline: bool) -> tuple[Path, list[dict[str, Any]]]:
    """A local bundle folder, or the Hub snapshot of ``MONAI/<name>`` (where MONAI's own
    ``monai.bundle.download`` looks first for a bundle named without an org) / ``org/name``."""
    from medimg_bench.hub import local_weights_record, looks_like_hub_id, resolve_snapshot

    local = Path(str(bundle)).expanduser()
    if local.is_dir():
        return local, [local_weights_record(local)]
    if not looks_like_hub_id(bundle):
        raise FileNotFoundError(f"model.options.bundle={bundle!r}: no such folder, and not a bundle name "
                                "(spleen_ct_segmentation) or hub id (MONAI/spleen_ct_segmentation)")
    repo = str(bundle).removeprefix("hf-hub:")
    repo = repo if "/" in repo else f"MONAI/{repo}"
    snap = resolve_snapshot(repo, revision=revision, offline=offline, what="MONAI bundle",
                            allow_patterns=["configs/*", "models/model.*"])
    return snap.path, [snap.record()]


def _literal(value: Any, where: str) -> Any:
    """A bundle config value that is plain data; MONAI's ``$`` (Python expressions), ``@`` and
    ``%`` (references) are refused: this package never runs code from a downloaded config."""
    if isinstance(value, str) and value[:1] in ("$", "@", "%"):
        raise ValueError(f"{where}: {value!r} is an expression or reference; only literal network "
                         "arguments are read from a bundle (set model.options.net_kwargs instead)")
    if isinstance(value, dict):
        return {k: _literal(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v, where) for v in value]
    return value


def _bundle_network(folder: Path) -> tuple[str, dict[str, Any], Path]:
    """``(class name in monai.networks.nets, its kwargs, weights file)`` of a bundle folder."""
    import json

    import yaml

    cfg_path = next((folder / c for c in _BUNDLE_CONFIGS if (folder / c).exists()), None)
    weights = next((folder / w for w in _BUNDLE_WEIGHTS if (folder / w).exists()), None)
    if cfg_path is None or weights is None:
        raise FileNotFoundError(f"MONAI bundle {folder}: needs one of {list(_BUNDLE_CONFIGS)} and one of "
                                f"{list(_BUNDLE_WEIGHTS)}")
    text = cfg_path.read_text()
    cfg = json.loads(text) if cfg_path.suffix == ".json" else yaml.safe_load(text)
    net = dict(cfg.get("network_def") or {})
    target = str(net.pop("_target_", ""))
    name = target.removeprefix("monai.networks.nets.")
    import monai.networks.nets as nets

    if not name or "." in name or not hasattr(nets, name):
        raise ValueError(f"MONAI bundle {cfg_path}: network_def._target_={target!r} is not a class of "
                         "monai.networks.nets")
    return name, _literal(net, f"{cfg_path.name}: network_def"), weights


@register_model("monai_bundle", tags=("segmentation", "monai"))
def monai_bundle(
    *,
    bundle: str,
    num_classes: int | None = None,
    in_channels: int | None = None,
    revision: str | None = None,
    offline: bool = False,
    divisor: int = 16,
    roi_size: Sequence[int] | None = None,
    return_probs: bool = False,
    net_kwargs: dict[str, Any] | None = None,
) -> SegmenterAdapter:
    """The network and weights of a MONAI bundle, by name (``spleen_ct_segmentation`` →
    ``MONAI/spleen_ct_segmentation`` on the Hub), hub id or local folder: ``network_def`` of
    ``configs/inference.json`` (a ``monai.networks.nets`` class with literal arguments;
    ``net_kwargs`` override them) and ``models/model.pt`` (read with ``weights_only=True``).
    The bundle's own transforms are not run: the dataset's loading and the adapter's padding
    or sliding window (``roi_size``) apply, so match the bundle's spacing and intensity scaling
    with the dataset options."""
    import monai.networks.nets as nets

    folder, sources = _bundle_folder(bundle, revision=revision, offline=offline)
    name, kwargs, weights = _bundle_network(folder)
    kwargs.update(net_kwargs or {})
    out = kwargs.get("out_channels")
    if num_classes is not None and out is not None and int(out) != int(num_classes):
        raise ValueError(f"MONAI bundle {bundle!r}: the network has {out} output channels but the dataset "
                         f"has {num_classes} classes (background included)")
    if in_channels is not None and kwargs.get("in_channels") not in (None, in_channels):
        raise ValueError(f"MONAI bundle {bundle!r}: the network takes {kwargs['in_channels']} input "
                         f"channels, the dataset gives {in_channels}")
    module = getattr(nets, name)(**kwargs)
    load_checkpoint(module, weights)
    adapter = SegmenterAdapter(module, divisor=divisor, roi_size=roi_size, return_probs=return_probs,
                               name=f"monai_bundle/{Path(str(bundle)).name}")
    from medimg_bench.models.weights import sources_identity

    adapter.config = {"factory": "monai_bundle", "bundle": str(bundle), "net": name, **kwargs,
                      **({"hub": sources_identity(sources)} if sources_identity(sources) else {})}
    adapter.weight_sources = sources
    return adapter
