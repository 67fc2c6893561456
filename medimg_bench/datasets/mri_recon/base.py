"""Shared loader of accelerated-MRI reconstruction datasets (k-space in HDF5).

A sample is one volume (one echo for multi-echo scans): ``kspace`` the undersampled multi-coil
k-space ``(S, C, H, W)`` complex64 (slices first, coils, then the 2D k-space plane; the mask runs
along the last axis, as fastMRI's columns), ``sampling_mask`` ``(W,)`` float32, ``maps`` coil
sensitivities ``(S, C, H, W)`` when the file has them, ``target`` the reference magnitude
``(S, H', W')`` float32, ``image`` the zero-filled magnitude ``(1, S, H', W')`` (SENSE adjoint
with maps, else root-sum-of-squares; centre-cropped to the target's plane like fastMRI's
baselines), and ``mask`` a tissue label map ``(S, H', W')`` where the dataset has one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.mri_recon.masks import file_seed, undersampling_mask
from medimg_bench.sample import SampleError

__all__ = ["ReconDataset", "center_crop", "ifft2c", "zero_filled"]


def ifft2c(k: torch.Tensor) -> torch.Tensor:
    """Centred orthonormal 2D inverse FFT over the last two axes (fastMRI's ``ifft2c``)."""
    k = torch.fft.ifftshift(k, dim=(-2, -1))
    return torch.fft.fftshift(torch.fft.ifft2(k, dim=(-2, -1), norm="ortho"), dim=(-2, -1))


def fft2c(x: torch.Tensor) -> torch.Tensor:
    """Centred orthonormal 2D FFT over the last two axes (fastMRI's ``fft2c``)."""
    x = torch.fft.ifftshift(x, dim=(-2, -1))
    return torch.fft.fftshift(torch.fft.fft2(x, dim=(-2, -1), norm="ortho"), dim=(-2, -1))


def center_crop(x: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Centre crop of the last two axes (fastMRI's ``center_crop`` rule: floor of the margin)."""
    h, w = int(shape[0]), int(shape[1])
    if not (0 < h <= x.shape[-2] and 0 < w <= x.shape[-1]):
        raise ValueError(f"cannot crop {tuple(x.shape[-2:])} to {(h, w)}")
    top, left = (x.shape[-2] - h) // 2, (x.shape[-1] - w) // 2
    return x[..., top: top + h, left: left + w]


def zero_filled(kspace: torch.Tensor, maps: torch.Tensor | None = None) -> torch.Tensor:
    """Magnitude of the zero-filled reconstruction of ``(S, C, H, W)`` k-space, ``(S, H, W)``:
    coil images combined with ``conj(maps)`` (SENSE adjoint) or by root-sum-of-squares."""
    coils = ifft2c(kspace)
    if maps is not None:
        return (coils * maps.conj()).sum(1).abs()
    return coils.abs().square().sum(1).sqrt()


class ReconDataset(ManifestDataset):
    """Rows name an HDF5 file (``file``), optionally a tissue label map (``seg``); subclasses
    read the arrays with :meth:`read_arrays`. Masks: ``mask_kind`` (``random``, ``equispaced``,
    ``equispaced_fraction``), ``accelerations`` / ``center_fractions`` (one pair chosen per
    volume, fastMRI's rule), ``mask_seed`` (``"file"``: fastMRI's seed from the file name, an int,
    or None: random)."""

    task = "reconstruction"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path,
        classes: Sequence[str] | None = None,
        name: str = "reconstruction",
        mask_kind: str = "random",
        accelerations: Sequence[float] = (4,),
        center_fractions: Sequence[float] = (0.08,),
        mask_seed: str | int | None = "file",
        transform: Any = None,
    ) -> None:
        super().__init__(manifest, root=root, path_columns=("file", "seg"), classes=classes,
                         name=name, transform=transform)
        undersampling_mask(mask_kind, 16, center_fractions=list(center_fractions),
                           accelerations=list(accelerations), seed=0)  # bad options fail here
        if not (mask_seed is None or mask_seed == "file" or isinstance(mask_seed, int)):
            raise ValueError(f"{name}: mask_seed must be 'file', an int or None, got {mask_seed!r}")
        self.mask_kind = mask_kind
        self.accelerations = [float(a) if float(a) != int(a) else int(a) for a in accelerations]
        self.center_fractions = [float(c) for c in center_fractions]
        self.mask_seed = mask_seed

    def read_arrays(self, row: Mapping[str, Any], path: Path) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """``(kspace (S, C, H, W), maps (S, C, H, W) or None, target magnitude (S, H', W'))``."""
        raise NotImplementedError

    def read_seg(self, row: Mapping[str, Any], path: Path, shape: tuple[int, ...]) -> np.ndarray:
        """The tissue label map of ``row`` as ``(S, H', W')`` int64 (subclasses convert)."""
        raise NotImplementedError

    def sampling_mask(self, row: Mapping[str, Any], num_cols: int) -> tuple[np.ndarray, int]:
        seed = file_seed(Path(row["file"]).name) if self.mask_seed == "file" else self.mask_seed
        return undersampling_mask(self.mask_kind, num_cols, center_fractions=self.center_fractions,
                                  accelerations=self.accelerations, seed=seed)

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        path = self.resolve(row["file"])
        kspace, maps, target = self.read_arrays(row, path)
        if kspace.ndim != 4 or (maps is not None and maps.shape != kspace.shape):
            raise SampleError(f"k-space must be (S, C, H, W) with maps of the same shape; got "
                              f"{kspace.shape} and {None if maps is None else maps.shape}",
                              sample_id=str(row["id"]), path=str(path))
        if not (np.isfinite(kspace).all() and np.isfinite(target).all()):
            raise SampleError("k-space or target has NaN/inf values", sample_id=str(row["id"]), path=str(path))
        mask, num_low = self.sampling_mask(row, kspace.shape[-1])
        k = torch.from_numpy(np.ascontiguousarray(kspace, dtype=np.complex64)) * torch.from_numpy(mask)
        m = None if maps is None else torch.from_numpy(np.ascontiguousarray(maps, dtype=np.complex64))
        t = torch.from_numpy(np.ascontiguousarray(target, dtype=np.float32))
        if t.ndim != 3 or t.shape[0] != k.shape[0]:
            raise SampleError(f"target must be (S, H, W) with S = {k.shape[0]} slices, got {tuple(t.shape)}",
                              sample_id=str(row["id"]), path=str(path))
        zf = center_crop(zero_filled(k, m), t.shape[-2:]).float()
        meta = {**self.meta_for(row), "path": str(path), "num_low_frequencies": int(num_low),
                "acceleration": float(mask.size / mask.sum())}
        if isinstance(row.get("spacing"), (list, tuple)):
            meta["spacing"] = tuple(float(s) for s in row["spacing"])
        sample = {"id": str(row["id"]), "image": zf[None], "kspace": k, "sampling_mask": torch.from_numpy(mask.astype(np.float32)),
                  "target": t, "meta": meta}
        if m is not None:
            sample["maps"] = m
        seg = row.get("seg")
        if isinstance(seg, str):
            seg_path = self.resolve(seg)
            labels = self.read_seg(row, seg_path, tuple(t.shape))
            if labels.shape != tuple(t.shape):
                err = SampleError(f"tissue mask shape {labels.shape} differs from the target {tuple(t.shape)}",
                                  sample_id=str(row["id"]), path=str(seg_path))
                err.stage = "target"  # type: ignore[attr-defined]
                raise err
            sample["mask"] = torch.from_numpy(np.ascontiguousarray(labels, dtype=np.int64))
        return sample
