"""Fixed 'models' shared by the engine tests: deterministic, no weights."""

from __future__ import annotations

from typing import Any

import torch


class MeanModel:
    """Scores three classes from each image's mean intensity ``m``: ``(m, 1 - m, m²)``."""

    task = "classification"
    name = "mean"

    def to(self, device: Any) -> MeanModel:
        return self

    def eval(self) -> MeanModel:
        return self

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        m = batch["image"].mean(dim=(1, 2, 3))
        return {"probs": torch.stack([m, 1 - m, m * m], dim=1)}
