"""Segmentation label maps from a folder (``<id>.nii.gz``, ``.nii``, ``.nrrd``, ``.mha``, ``.mhd``,
or a DICOM SEG / RTSTRUCT ``<id>.dcm``), checked against the image grid."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.models.predictions.checks import check_label_values
from medimg_bench.models.predictions.lookup import Lookup

__all__ = ["LabelMapsFromFolder"]

_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd", ".dcm")


class LabelMapsFromFolder(Lookup):
    """Segmentation label maps ``<id>.<suffix>`` from a folder: ``predict(batch) -> {"labels"}``.
    A value that is not a whole number (0.6 from a probability map), a negative one or one
    beyond the dataset's labels fails the sample naming the file. A DICOM SEG's segments (an
    RTSTRUCT's ROIs) become classes by label (the dataset's class names) or by number
    (``segment_map``); a SEG covering part of the image is placed on the image's grid."""

    task = "segmentation"
    num_classes: int | None = None  # the dataset's label count, once bound: larger labels are refused

    def __init__(self, source: Path, *, segment_map: Mapping[Any, Any] | None = None) -> None:
        super().__init__(source)
        self.segment_map = dict(segment_map) if segment_map else None
        self.classes: list[str] | None = None

    def bind_dataset(self, dataset: Any) -> None:
        """Remember the dataset's class names and label count (``classes`` include the background)."""
        classes = getattr(dataset, "classes", None)
        self.classes = list(classes) if classes else None
        self.num_classes = len(classes) if classes else None

    def _known_ids(self) -> set[str]:
        from medimg_bench.datasets.mask_formats import is_label_file, label_stem

        return {label_stem(p.name) for p in self.source.iterdir() if is_label_file(p.name)}

    def _path(self, sid: str) -> Path:
        path = next((self.source / f"{sid}{ext}" for ext in _SUFFIXES if (self.source / f"{sid}{ext}").exists()), None)
        if path is None:
            raise self._missing(sid)
        return path

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        from medimg_bench.datasets.grid import align_to_image_grid
        from medimg_bench.datasets.mask_formats import place_on_grid, read_label_file

        out = []
        metas = batch.get("meta") or [{}] * len(batch["id"])
        images = batch["image"]
        for i, sid in enumerate(batch["id"]):
            path = self._path(str(sid))
            image = images[i]
            shape = tuple(image.shape[1:])
            array, meta = read_label_file(path, classes=self.classes, segment_map=self.segment_map,
                                          image_affine=metas[i].get("affine"), image_shape=shape)
            array = check_label_values(array, path, sample_id=str(sid), num_classes=self.num_classes)
            try:
                array, affine = place_on_grid(np.asarray(array), meta.get("affine"), shape, metas[i].get("affine"))
                labels = align_to_image_grid(
                    np.asarray(array), affine, metas[i].get("affine"), image_shape=shape,
                    sample_id=str(sid), image_path=metas[i].get("path", "?"), mask_path=path,
                )
            except Exception as exc:  # off the image's grid: the prediction's fault, not the label's
                exc.stage = "predict"  # type: ignore[attr-defined]
                raise
            out.append(torch.as_tensor(np.ascontiguousarray(labels)).long())
        return {"labels": torch.stack(out).to(self.device)}
