"""Model adapters: wrap a network so the engine can call ``predict(batch) -> dict``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

__all__ = ["ModelAdapter", "load_checkpoint"]


def load_checkpoint(module: torch.nn.Module, path: str | Path, *, strict: bool = True) -> None:
    """Load weights into ``module`` from a ``.safetensors`` file or a ``torch.save`` state dict
    (read with ``weights_only=True``: no arbitrary code from checkpoints)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state = load_file(str(path))
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise ValueError(f"checkpoint {str(path)!r} could not be loaded safely: {exc}") from exc
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # shape mismatches raise even with strict=False
        raise ValueError(f"checkpoint {str(path)!r} does not match the model: {exc}") from exc
    if strict and (missing or unexpected):
        raise ValueError(
            f"checkpoint {str(path)!r} does not match the model: missing {list(missing)[:5]}, "
            f"unexpected {list(unexpected)[:5]}"
        )


class ModelAdapter:
    """Base adapter. Subclasses hold ``self.module`` (an ``nn.Module``) and implement
    :meth:`forward_batch` (training logits) and :meth:`predict` (evaluation outputs)."""

    task: str = ""

    def __init__(self, module: torch.nn.Module, *, name: str = "") -> None:
        self.module = module
        self.name = name or type(module).__name__
        self.device = torch.device("cpu")

    def to(self, device: str | torch.device) -> ModelAdapter:
        self.device = torch.device(device)
        self.module.to(self.device)
        return self

    def train(self, mode: bool = True) -> ModelAdapter:
        self.module.train(mode)
        return self

    def eval(self) -> ModelAdapter:
        return self.train(False)

    def parameters(self) -> Any:
        return self.module.parameters()

    def images(self, batch: dict[str, Any]) -> torch.Tensor:
        """The batch's images as one tensor on the model's device."""
        image = batch["image"]
        if isinstance(image, list):
            raise ValueError(
                f"{self.name}: images of different sizes in one batch ({[tuple(i.shape) for i in image][:3]}...); "
                "resize them in the dataset transform or use batch_size=1"
            )
        return image.to(self.device, non_blocking=True)

    def forward_batch(self, batch: dict[str, Any]) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        n = sum(p.numel() for p in self.module.parameters())
        return f"{type(self).__name__}(name={self.name!r}, params={n:,}, device={self.device})"
