"""Model adapters: wrap a network so the engine can call ``predict(batch) -> dict``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

__all__ = ["ModelAdapter", "load_checkpoint", "state_dict_sha256"]


def read_state(path: Path) -> dict[str, Any]:
    """The state dict in ``path``; ``ValueError`` naming the file and the reason otherwise."""
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"checkpoint {str(path)!r} is empty (0 bytes): the file was not written "
                         "completely; copy or save it again")
    with open(path, "rb") as f:
        head = f.read(8)
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        if head[:2] == b"PK" or head[:1] == b"\x80":  # a zip (torch.save) or a raw pickle
            raise ValueError(
                f"checkpoint {str(path)!r} is not a safetensors file: it is a pickle-based "
                "torch.save file with a .safetensors name; rename it to .pt (it is then read with "
                "weights_only=True) or convert it with safetensors.torch.save_file"
            )
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ValueError(f"checkpoint {str(path)!r} is not a valid safetensors file "
                             f"({size} bytes): {exc}") from exc
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"checkpoint {str(path)!r} could not be loaded safely ({size} bytes, "
                         f"read with weights_only=True): {type(exc).__name__}: {exc}") from exc
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint {str(path)!r} holds a {type(state).__name__}, not a state dict")
    return state


def load_checkpoint(module: torch.nn.Module, path: str | Path, *, strict: bool = True) -> None:
    """Load weights into ``module`` from a ``.safetensors`` file or a ``torch.save`` state dict
    (read with ``weights_only=True``: no arbitrary code from checkpoints). Errors name the file
    and the reason (missing, empty, pickle-based file under a .safetensors name, mismatch)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"checkpoint {str(path)!r} is a directory, not a weights file")
    state = read_state(path)
    try:
        missing, unexpected = module.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # shape mismatches raise even with strict=False
        raise ValueError(f"checkpoint {str(path)!r} does not match the model: {exc}") from exc
    if strict and (missing or unexpected):
        raise ValueError(
            f"checkpoint {str(path)!r} does not match the model: missing {list(missing)[:5]}, "
            f"unexpected {list(unexpected)[:5]}"
        )


def state_dict_sha256(module: torch.nn.Module) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of ``module``'s state dict (hex).

    The same weights give the same digest whether they came from training, a ``.pt`` or a
    ``.safetensors`` file, on any device."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        t = t.detach()
        h.update(f"{name}|{str(t.dtype)}|{tuple(t.shape)}|".encode())
        if t.numel():
            t = t.to("cpu").contiguous()
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class ModelAdapter:
    """Base adapter. Subclasses hold ``self.module`` (an ``nn.Module``) and implement
    :meth:`forward_batch` (training logits) and :meth:`predict` (evaluation outputs)."""

    task: str = ""

    #: parameters in the identity another way: the network (architecture and weights' SHA-256)
    #: and where the weights come from (the same weights trained here, read from a .pt or a
    #: .safetensors file or downloaded give the same identity, so a trained run resumes)
    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        "module": "its architecture (`config`) and the SHA-256 of its weights are in the identity",
        "name": "a label for results: decides no prediction",
        **{k: "where the weights come from: their SHA-256 is in the identity"
           for k in ("checkpoint", "pretrained", "revision", "offline")},
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from medimg_bench.identity import declaring

        declaring(cls)  # every adapter records its declared parameters: they are its identity

    def __init__(self, module: torch.nn.Module, *, name: str = "") -> None:
        self.module = module
        self.name = name or type(module).__name__
        self.device = torch.device("cpu")
        #: how the network was built (factory arguments); set by the registered factories
        self.config: dict[str, Any] = {"module": f"{type(module).__module__}.{type(module).__qualname__}"}

    def prediction_options(self) -> dict[str, Any]:
        """Adapter options that change predictions (overridden by subclasses)."""
        return {}

    def fingerprint(self) -> dict[str, Any]:
        """What produced the predictions: adapter class, name, the declared parameters it was
        built with (:func:`medimg_bench.identity.param_identity`: the registered factory's, or
        the constructor's, neutral ones left out), architecture config, options that change
        predictions and the SHA-256 of the weights (:func:`state_dict_sha256`). A resumed run
        must match it field by field."""
        from medimg_bench.identity import param_identity

        return {
            "adapter": type(self).__name__,
            "name": self.name,
            "params": param_identity(self),
            "config": {k: _plain(v) for k, v in sorted(self.config.items())},
            "options": {k: _plain(v) for k, v in sorted(self.prediction_options().items())},
            "weights_sha256": state_dict_sha256(self.module),
        }

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


def _plain(value: Any) -> Any:
    """JSON-like form of a config value (tuples → lists, paths → str)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
