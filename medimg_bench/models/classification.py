"""Image classifiers from timm with a classification head, as engine adapters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter, load_checkpoint
from medimg_bench.registry import register_model

__all__ = ["ClassifierAdapter", "timm_classifier"]


class ClassifierAdapter(ModelAdapter):
    """Wraps a network returning ``(B, K)`` logits. ``predict`` gives ``logits`` and ``probs``
    (sigmoid for multi-label, softmax for multi-class)."""

    task = "classification"

    def __init__(self, module: torch.nn.Module, *, multilabel: bool = True, name: str = "") -> None:
        super().__init__(module, name=name)
        self.multilabel = multilabel

    def prediction_options(self) -> dict[str, Any]:
        return {"multilabel": self.multilabel}

    def forward_batch(self, batch: dict[str, Any]) -> torch.Tensor:
        return self.module(self.images(batch))

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        logits = self.forward_batch(batch).float()
        probs = torch.sigmoid(logits) if self.multilabel else torch.softmax(logits, dim=1)
        return {"logits": logits, "probs": probs}


@register_model("timm", tags=("classification", "timm"))
def timm_classifier(
    *,
    model_name: str = "resnet18",
    num_classes: int,
    in_channels: int = 1,
    multilabel: bool = True,
    pretrained: bool | str = False,
    revision: str | None = None,
    offline: bool = False,
    checkpoint: str | Path | None = None,
    stem: str = "default",
    **timm_kwargs: Any,
) -> ClassifierAdapter:
    """Any timm architecture with a ``num_classes`` head and ``in_channels`` input channels.

    ``pretrained=True`` downloads timm's default weights of ``model_name`` (a tag such as
    ``resnet50.a1_in1k`` picks others) from the Hugging Face Hub into its cache;
    ``model_name="hf-hub:org/name"`` (or ``pretrained="org/name"``) reads a timm repository,
    ``revision`` pins a branch, tag or commit; ``offline=True`` (or ``HF_HUB_OFFLINE=1``) reads
    the cache only (see :mod:`medimg_bench.models.weights`). The head is re-made when
    ``num_classes`` differs from the weights'. ``checkpoint`` loads a state dict (safetensors or
    torch.save).
    ``stem="small_input"`` (ResNets) replaces the 7×7 stride-2 convolution and the max-pool by
    one 3×3 stride-1 convolution, the CIFAR-style ResNet that small images (MedMNIST at 28×28)
    are benchmarked with: 28×28 inputs keep 28×28 features in the first stage.
    """
    import timm

    from medimg_bench.hub import local_weights_record
    from medimg_bench.models.weights import sources_identity, timm_source

    source_name, use_pretrained, sources = timm_source(model_name, pretrained, revision=revision,
                                                       offline=offline)
    module = timm.create_model(
        source_name, pretrained=use_pretrained, num_classes=num_classes, in_chans=in_channels, **timm_kwargs
    )
    if stem == "small_input":
        if not (hasattr(module, "conv1") and hasattr(module, "maxpool")):
            raise ValueError(f"stem='small_input' needs a ResNet-style model (conv1 + maxpool); "
                             f"{model_name!r} has none")
        width = module.conv1.out_channels
        module.conv1 = torch.nn.Conv2d(in_channels, width, kernel_size=3, stride=1, padding=1, bias=False)
        module.maxpool = torch.nn.Identity()
    elif stem != "default":
        raise ValueError(f"stem must be 'default' or 'small_input', got {stem!r}")
    if checkpoint:
        load_checkpoint(module, checkpoint)
        sources.append(local_weights_record(checkpoint))
    adapter = ClassifierAdapter(module, multilabel=multilabel, name=f"timm/{model_name}")
    adapter.config = {"factory": "timm", "model_name": model_name, "num_classes": num_classes,
                      "in_channels": in_channels, **({"stem": stem} if stem != "default" else {}),
                      **({"hub": sources_identity(sources)} if sources_identity(sources) else {}),
                      **timm_kwargs}
    adapter.weight_sources = sources
    return adapter
