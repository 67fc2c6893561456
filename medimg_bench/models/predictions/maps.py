"""2D probability maps on disk: a folder of ``<id>.png`` (8-bit / 255, 16-bit / 65535, 1-bit 0/1, the
first channel of colour PNGs: MATLAB's ``im2double``) or ``<id>.npy`` maps, served as float64
``maps`` (exact, for :mod:`medimg_bench.metrics.sod_toolbox`) and ``labels`` (``map >= threshold``).
A map whose size differs from its mask is an error naming both files unless ``resize=True``
(bicubic with antialiasing, like the toolbox's ``imresize``; not bit-exact to MATLAB)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.models.predictions.lookup import _Lookup

__all__ = ["MapsFromFolder", "read_map", "MAP_SUFFIXES"]


MAP_SUFFIXES = (".png", ".npy")


def read_map(path: Path) -> np.ndarray:
    """A 2D prediction map as float64 ``H x W``: PNG 8-bit / 255, 16-bit / 65535, 1-bit 0/1 (the
    first channel of a colour PNG), ``.npy`` as stored (must be 2-D and finite)."""
    if path.suffix == ".npy":
        a = np.load(path, allow_pickle=False)
        if a.ndim == 3 and a.shape[0] == 1:
            a = a[0]
        if a.ndim != 2 or not np.issubdtype(a.dtype, np.number) or not np.isfinite(a).all():
            raise ValueError(f"map {str(path)!r}: expected a finite 2-D array, got {a.dtype} {a.shape}")
        return a.astype(np.float64)
    from PIL import Image

    with Image.open(path) as im:
        if im.mode == "P":
            im = im.convert("RGB")
        a = np.asarray(im)
    if a.ndim == 3:
        a = a[..., 0]
    scale = {np.dtype(bool): 1.0, np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0,
             np.dtype(np.int32): 65535.0}.get(a.dtype)
    if scale is None:
        raise ValueError(f"map {str(path)!r}: unsupported pixel type {a.dtype}")
    return a.astype(np.float64) / scale


class MapsFromFolder(_Lookup):
    """2D probability maps ``<id>.png`` / ``<id>.npy``: ``predict(batch) -> {"maps", "labels"}``
    (lists when the images of a batch differ in size)."""

    task = "segmentation"

    def __init__(self, source: Path, *, threshold: float = 0.5, resize: bool = False) -> None:
        super().__init__(source)
        self.threshold = threshold
        self.resize = resize

    def _known_ids(self) -> set[str]:
        return {p.stem for p in self.source.iterdir() if p.suffix in MAP_SUFFIXES}

    def _one(self, sid: str, shape: tuple[int, ...], mask_path: str) -> np.ndarray:
        path = next((self.source / f"{sid}{ext}" for ext in MAP_SUFFIXES if (self.source / f"{sid}{ext}").exists()), None)
        if path is None:
            raise self._missing(sid)
        m = read_map(path)
        if m.shape != shape:
            if not self.resize:
                raise ValueError(f"sample {sid!r}: map {str(path)!r} is {m.shape[0]}x{m.shape[1]} but mask "
                                 f"{mask_path!r} is {shape[0]}x{shape[1]} (height x width); set "
                                 "model.options.resize=true to resize maps as the toolbox does")
            t = torch.from_numpy(m)[None, None]
            m = torch.nn.functional.interpolate(t, size=shape, mode="bicubic", antialias=True,
                                                align_corners=False)[0, 0].clamp(0, 1).numpy()
        return m

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        metas = batch.get("meta") or [{}] * len(batch["id"])
        masks = batch.get("mask")
        images = batch["image"]
        maps = []
        for i, sid in enumerate(batch["id"]):
            ref = masks[i] if masks is not None else images[i][0]
            maps.append(torch.from_numpy(self._one(str(sid), tuple(ref.shape[-2:]), (metas[i] or {}).get("mask_path", "?"))))
        labels = [(m >= self.threshold).long() for m in maps]
        if len({tuple(m.shape) for m in maps}) == 1:
            return {"maps": torch.stack(maps).to(self.device), "labels": torch.stack(labels).to(self.device)}
        return {"maps": [m.to(self.device) for m in maps], "labels": [x.to(self.device) for x in labels]}
