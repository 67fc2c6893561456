"""Parameter groups (head / encoder learning-rate scale) and the optimiser of a recipe."""

from __future__ import annotations

from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter

__all__ = ["head_module", "make_optimizer", "param_groups"]


def head_module(module: torch.nn.Module) -> torch.nn.Module | None:
    """The classifier head: ``get_classifier()`` of timm models, else the last ``Linear``."""
    getter = getattr(module, "get_classifier", None)
    if callable(getter):
        head = getter()
        if isinstance(head, torch.nn.Module) and any(True for _ in head.parameters()):
            return head
    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return linears[-1] if linears else None


def param_groups(model: ModelAdapter, encoder_lr_scale: float) -> list[dict[str, Any]]:
    """The head at scale 1, every other trainable parameter at ``encoder_lr_scale``."""
    params = [p for p in model.module.parameters() if p.requires_grad]
    if encoder_lr_scale == 1.0:
        return [{"params": params, "lr_scale": 1.0}]
    head = head_module(model.module)
    head_ids = {id(p) for p in head.parameters()} if head is not None else set()
    if not head_ids:
        raise ValueError("fit(): encoder_lr_scale needs a head (get_classifier() or a Linear layer) to tell "
                         "encoder from head")
    groups = [{"params": [p for p in params if id(p) in head_ids], "lr_scale": 1.0}]
    rest = [p for p in params if id(p) not in head_ids]
    if rest:
        groups.append({"params": rest, "lr_scale": float(encoder_lr_scale)})
    return groups


def make_optimizer(name: str, groups: list[dict[str, Any]], *, lr: float, weight_decay: float,
                   momentum: float) -> torch.optim.Optimizer:
    """``adam`` (weight decay as L2), ``sgd`` (with momentum) or ``adamw``."""
    if name == "adam":
        return torch.optim.Adam(groups, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum, weight_decay=weight_decay)
    return torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)
