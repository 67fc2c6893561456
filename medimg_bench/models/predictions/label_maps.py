"""Segmentation label maps from a folder (``<id>.nii.gz``), checked against the image grid."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from medimg_bench.models.predictions.checks import check_label_values
from medimg_bench.models.predictions.lookup import _Lookup

__all__ = ["LabelMapsFromFolder"]


class LabelMapsFromFolder(_Lookup):
    """Segmentation label maps ``<id>.nii.gz`` from a folder: ``predict(batch) -> {"labels"}``.
    A value that is not a whole number (0.6 from a probability map), a negative one or one
    beyond the dataset's labels fails the sample naming the file."""

    task = "segmentation"
    num_classes: int | None = None  # the dataset's label count, once bound: larger labels are refused

    def bind_dataset(self, dataset: Any) -> None:
        """Remember the dataset's label count (``classes`` include the background)."""
        classes = getattr(dataset, "classes", None)
        self.num_classes = len(classes) if classes else None

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        from medimg_bench.datasets.grid import align_to_image_grid
        from medimg_bench.datasets.io import read_image

        out = []
        metas = batch.get("meta") or [{}] * len(batch["id"])
        images = batch["image"]
        for i, sid in enumerate(batch["id"]):
            path = next((self.source / f"{sid}{ext}" for ext in (".nii.gz", ".nii")
                         if (self.source / f"{sid}{ext}").exists()), None)
            if path is None:
                raise self._missing(str(sid))
            array, meta = read_image(path)
            array = check_label_values(array, path, sample_id=str(sid), num_classes=self.num_classes)
            image = images[i]
            shape = tuple(image.shape[1:])
            try:
                labels = align_to_image_grid(
                    np.asarray(array), meta.get("affine"), metas[i].get("affine"), image_shape=shape,
                    sample_id=str(sid), image_path=metas[i].get("path", "?"), mask_path=path,
                )
            except Exception as exc:  # off the image's grid: the prediction's fault, not the label's
                exc.stage = "predict"  # type: ignore[attr-defined]
                raise
            out.append(torch.as_tensor(np.ascontiguousarray(labels)).long())
        return {"labels": torch.stack(out).to(self.device)}
