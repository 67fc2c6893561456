"""2D prediction maps on disk: a folder of ``<id>.png`` or ``<id>.npy`` maps, decoded by the one
map decoder (:func:`medimg_bench.datasets.masks.decode_map`) under a declared ``encoding``
(``auto``, ``binary``, ``probability`` with ``scale``, ``logits``) and served as float64
``maps`` in [0, 1] (exact, for :mod:`medimg_bench.metrics.sod_toolbox`: PNG 8-bit / 255, 16-bit
/ 65535, MATLAB's ``im2double``) and ``labels`` (``map >= threshold``). ``auto`` reads a map with
one nonzero value (0/1, 0/255 PNGs) as binary, a PNG's grey levels on its bit depth, an array in
[0, 1] as probabilities, and refuses an array outside [0, 1] (a 0-255 or percent scale, logits)
until its encoding is declared. A map whose size differs from its mask is an error naming both
files unless ``resize=True`` (bicubic with antialiasing, like the toolbox's ``imresize``; not
bit-exact to MATLAB)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.datasets.masks import MAP_ENCODINGS, decode_map, parse_scale, read_stored
from medimg_bench.models.predictions.lookup import Lookup

__all__ = ["MapsFromFolder", "read_map", "MAP_SUFFIXES"]


MAP_SUFFIXES = (".png", ".npy")


def read_map(path: Path, *, encoding: str = "auto", scale: Any = None, foreground: float | None = None) -> np.ndarray:
    """A 2D prediction map as float64 ``H x W`` in [0, 1] under ``encoding`` (module docstring).
    A volume, a complex array or a multi-channel array is refused: it is no 2D map (a folder of
    ``.npy`` reconstructions needs ``kind=reconstruction``)."""
    stored = read_stored(path)
    a = stored.array
    if stored.full_scale is None and a.ndim == 3 and a.shape[0] == 1:
        stored = type(stored)(a[0], stored.path, meta=stored.meta)
    a = stored.array
    if not stored.colour and a.ndim != 2 or a.dtype.kind == "c":
        what = "complex" if a.dtype.kind == "c" else f"{a.ndim}-D"
        raise ValueError(f"map {str(path)!r}: a {what} array of shape {a.shape} ({a.dtype}) is not a 2D "
                         "prediction map; if the folder holds reconstructions (slices, H, W) set "
                         "model.options.kind=reconstruction (kind=maps reads 2D probability maps)")
    return decode_map(stored, encoding=encoding, scale=scale, foreground=foreground)


class MapsFromFolder(Lookup):
    """2D prediction maps ``<id>.png`` / ``<id>.npy``: ``predict(batch) -> {"maps", "labels"}``
    (lists when the images of a batch differ in size); ``encoding`` / ``scale`` / ``foreground``
    declare how the files store them (module docstring)."""

    task = "segmentation"

    def __init__(self, source: Path, *, threshold: float = 0.5, resize: bool = False, encoding: str = "auto",
                 scale: Any = None, foreground: float | None = None) -> None:
        super().__init__(source)
        if encoding not in MAP_ENCODINGS:
            raise ValueError(f"predictions: encoding of maps must be one of {MAP_ENCODINGS}, got {encoding!r}")
        parse_scale(scale)  # a bad scale fails here, not at the first sample
        self.threshold = threshold
        self.resize = resize
        self.encoding = encoding
        self.scale = scale
        self.foreground = foreground

    def _known_ids(self) -> set[str]:
        return {p.stem for p in self.source.iterdir() if p.suffix in MAP_SUFFIXES}

    def _one(self, sid: str, shape: tuple[int, ...], mask_path: str) -> np.ndarray:
        path = next((self.source / f"{sid}{ext}" for ext in MAP_SUFFIXES if (self.source / f"{sid}{ext}").exists()), None)
        if path is None:
            raise self._missing(sid)
        m = read_map(path, encoding=self.encoding, scale=self.scale, foreground=self.foreground)
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
