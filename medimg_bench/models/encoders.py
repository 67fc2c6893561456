"""Frozen backbones → embeddings: timm, the open_clip image tower, MONAI networks and Hugging
Face vision models (local folders or hub ids), behind one :class:`Encoder` interface.

An encoder says exactly what produced its embeddings (:meth:`Encoder.identity`: kind,
architecture options, SHA-256 of the weights, preprocessing), which is what the embedding cache
(:mod:`medimg_bench.protocols.embeddings`) is keyed by.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import load_checkpoint, state_dict_sha256
from medimg_bench.models.preprocess import (  # noqa: F401  (re-exported)
    OPENAI_MEAN,
    OPENAI_STD,
    prepare_images,
    require_local_path,
)

__all__ = ["Encoder", "build_encoder", "prepare_images", "require_local_path", "OPENAI_MEAN", "OPENAI_STD"]


class Encoder:
    """A frozen network mapping a batch of images to ``(B, D)`` float32 embeddings.

    ``forward`` is the bare network call on prepared inputs; :meth:`encode` prepares images in
    [0, 1] (see :func:`prepare_images` with :attr:`preprocess`) and pools the output."""

    def __init__(self, module: torch.nn.Module, *, kind: str, config: Mapping[str, Any],
                 preprocess: Mapping[str, Any], forward: Any = None,
                 weight_sources: list[dict[str, Any]] | None = None) -> None:
        self.module = module.eval().requires_grad_(False)
        #: where the weights came from (hub id, commit, SHA-256 of every file), for the manifest
        self.weight_sources = list(weight_sources or [])
        self.kind = kind
        self.config = dict(config)
        self.preprocess = dict(preprocess)
        self._forward = forward or module
        self.device = torch.device("cpu")
        self._sha: str | None = None

    def to(self, device: str | torch.device) -> Encoder:
        self.device = torch.device(device)
        self.module.to(self.device)
        return self

    def identity(self) -> dict[str, Any]:
        """What produces the embeddings: kind, architecture config, weights SHA-256, preprocessing."""
        if self._sha is None:
            self._sha = state_dict_sha256(self.module)
        return {"kind": self.kind, "config": _plain(self.config), "weights_sha256": self._sha,
                "preprocess": _plain(self.preprocess)}

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        return prepare_images(images.to(self.device, non_blocking=True), **self.preprocess)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The network on prepared input, pooled to ``(B, D)``."""
        out = self._forward(x)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if hasattr(out, "pooler_output") and out.pooler_output is not None:
            out = out.pooler_output
        elif hasattr(out, "last_hidden_state"):
            out = out.last_hidden_state[:, 0]
        if out.ndim > 2:  # feature maps: global average pool
            out = out.flatten(2).mean(-1)
        return out

    @torch.inference_mode()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Embeddings ``(B, D)`` (float32) of images ``(B, C, H, W)`` in [0, 1]."""
        return self.forward(self.prepare(images)).float()


def build_encoder(mcfg: Mapping[str, Any], *, in_channels: int = 1) -> Encoder:
    """The frozen backbone described by a ``model`` config node (``name`` + ``options``):

    * ``timm`` (and ``timm_encoder``): ``timm.create_model(model_name, num_classes=0)``; a
      classifier ``checkpoint`` is loaded without its head;
    * ``clip``: the open_clip image tower (see :func:`medimg_bench.models.clip.build_open_clip`);
    * ``monai_encoder``: any ``monai.networks.nets`` class (``network`` + its ``kwargs``), output
      pooled;
    * ``hf_vision``: ``transformers.AutoModel`` from ``path``, a local folder or a hub id.

    ``pretrained`` / ``model_name`` / ``path`` accept hub ids and tags as the libraries do, with
    ``revision`` and ``offline`` (see :mod:`medimg_bench.models.weights`).
    """
    name = mcfg["name"]
    opt = {k: v for k, v in dict(mcfg.get("options") or {}).items() if v is not None}
    if name in ("timm", "timm_encoder"):
        import timm

        from medimg_bench.models.weights import sources_identity, timm_source

        model_name = opt.get("model_name", "resnet18")
        chans = int(opt.get("in_channels") or in_channels)
        source_name, use_pretrained, sources = timm_source(model_name, opt.get("pretrained", False),
                                                           revision=opt.get("revision"),
                                                           offline=bool(opt.get("offline", False)))
        module = timm.create_model(source_name, pretrained=use_pretrained, num_classes=0, in_chans=chans)
        if opt.get("checkpoint"):
            ckpt = require_local_path(opt["checkpoint"], "model.options.checkpoint")
            _load_backbone(module, ckpt)
        cfg = timm.data.resolve_data_config({}, model=module)
        pre = {"channels": chans, "size": opt.get("image_size")}
        if opt.get("normalize", False):
            pre.update(mean=list(cfg["mean"])[:chans], std=list(cfg["std"])[:chans])
        return Encoder(module, kind="timm", config={"model_name": model_name, "in_channels": chans,
                                                    "checkpoint": opt.get("checkpoint"),
                                                    **({"hub": sources_identity(sources)} if sources else {})},
                       preprocess=pre, weight_sources=sources)
    if name == "clip":
        from medimg_bench.models.clip import build_open_clip

        model, info = build_open_clip(**{k: v for k, v in opt.items()
                                         if k in ("model_name", "pretrained", "model_cfg", "precision",
                                                  "revision", "offline")})
        pre = {"channels": 3, "size": info["image_size"], "mean": info["mean"], "std": info["std"]}
        return Encoder(model.visual, kind="open_clip_image", config=info["identity"], preprocess=pre,
                       weight_sources=info["weight_sources"])
    if name == "monai_encoder":
        import monai.networks.nets as nets

        network = opt.get("network", "DenseNet121")
        if not hasattr(nets, network):
            raise ValueError(f"model.options.network={network!r} is not a class in monai.networks.nets")
        kwargs = dict(opt.get("kwargs") or {})
        kwargs.setdefault("spatial_dims", 2)
        kwargs.setdefault("in_channels", in_channels)
        module = getattr(nets, network)(**kwargs)
        if opt.get("checkpoint"):
            load_checkpoint(module, require_local_path(opt["checkpoint"], "model.options.checkpoint"))
        fwd = getattr(module, "features", None) or module
        return Encoder(module, kind="monai", config={"network": network, **kwargs,
                                                     "checkpoint": opt.get("checkpoint")},
                       preprocess={"channels": kwargs["in_channels"], "size": opt.get("image_size")},
                       forward=fwd)
    if name == "hf_vision":
        return _hf_vision_encoder(opt)
    raise ValueError(f"model {name!r} cannot be used as a frozen encoder; use timm, clip, monai_encoder "
                     "or hf_vision")


def _hf_vision_encoder(opt: Mapping[str, Any]) -> Encoder:
    """A transformers vision model (its ``vision_model`` when it has one) from a folder or hub id."""
    from medimg_bench.models.weights import hf_model_folder, sources_identity

    path, sources = hf_model_folder(opt.get("path"), revision=opt.get("revision"),
                                    offline=bool(opt.get("offline", False)))
    from transformers import AutoImageProcessor, AutoModel

    module = AutoModel.from_pretrained(str(path), local_files_only=True)
    module = getattr(module, "vision_model", module)
    size, mean, std = opt.get("image_size"), opt.get("mean"), opt.get("std")
    try:
        proc = AutoImageProcessor.from_pretrained(str(path), local_files_only=True)
        mean = mean or list(proc.image_mean)
        std = std or list(proc.image_std)
        size = size or _processor_size(proc.size)
    except (OSError, ValueError, AttributeError):
        pass
    chans = int(getattr(module.config, "num_channels", 3))

    def fwd(x: torch.Tensor) -> Any:
        return module(pixel_values=x)

    hub = sources_identity(sources)
    config = {"path": str(opt.get("path")) if hub else str(path), **({"hub": hub} if hub else {})}
    return Encoder(module, kind="hf_vision", config=config, weight_sources=sources,
                   preprocess={"channels": chans, "size": size, "mean": mean, "std": std}, forward=fwd)


def _processor_size(s: Any) -> int | None:
    """The square input size of an image processor's ``size`` (an int, a dict or transformers 5's
    ``SizeDict`` with ``shortest_edge`` or ``height``)."""
    if s is None or isinstance(s, int):
        return s
    get = s.get if isinstance(s, Mapping) else (lambda k: getattr(s, k, None))
    value = get("shortest_edge") or get("height")
    return int(value) if value else None


def _load_backbone(module: torch.nn.Module, path: Path) -> None:
    """Load a (classifier) checkpoint into a headless backbone: head weights are dropped."""
    from medimg_bench.models.base import read_state

    state = read_state(path)
    own = module.state_dict()
    dropped = [k for k in state if k not in own]
    missing = [k for k in own if k not in state]
    if missing:
        raise ValueError(f"checkpoint {str(path)!r} does not match the backbone: missing {missing[:5]}")
    module.load_state_dict({k: v for k, v in state.items() if k in own})
    if dropped and not all(k.startswith(("fc.", "head", "classifier")) for k in dropped):
        raise ValueError(f"checkpoint {str(path)!r} has weights the backbone lacks: {dropped[:5]}")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
