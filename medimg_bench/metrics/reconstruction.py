"""Image reconstruction metrics (MRI/CT): PSNR, SSIM and NMSE, per sample.

Conventions follow the fastMRI evaluation: ``data_range`` defaults to the maximum of the target
volume (one value per sample, not per slice), 2D SSIM of a volume is the mean over its slices,
NMSE is ``||target - pred||² / ||target||²``. With the same ``data_range`` and window settings the
values equal ``skimage.metrics.peak_signal_noise_ratio`` / ``structural_similarity`` (computed in
float64 here; scikit-image keeps float32 inputs in float32).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from medimg_bench.metrics._utils import as_tensor
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = ["psnr", "ssim", "nmse", "PSNR", "SSIM", "NMSE"]


def _pair(pred: Any, target: Any, *, min_dims: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    p = as_tensor(pred, name="pred")
    t = as_tensor(target, name="target")
    for name, x in (("pred", p), ("target", t)):
        if x.is_complex():
            raise ValueError(f"{name} is complex; pass magnitude images (e.g. x.abs())")
    if p.shape != t.shape:
        raise ValueError(f"pred and target shapes differ: {tuple(p.shape)} vs {tuple(t.shape)}")
    if p.ndim < min_dims:
        raise ValueError(
            f"expected a batch (B, *spatial) with at least {min_dims} dims, got shape {tuple(p.shape)}"
        )
    if p.shape[0] == 0:
        raise ValueError("empty batch")
    p, t = p.double(), t.to(p.device).double()
    for name, x in (("pred", p), ("target", t)):
        bad = ~torch.isfinite(x).flatten(1).all(1)
        if bad.any():
            raise ValueError(f"{name} has NaN or inf values in sample(s) {bad.nonzero().flatten().tolist()}")
    return p, t


def _data_range(data_range: Any, target: torch.Tensor) -> torch.Tensor:
    """Per-sample data range ``(B,)``: given, or the target's maximum (fastMRI)."""
    b = target.shape[0]
    if data_range is None:
        dr = target.flatten(1).amax(1)
    else:
        dr = as_tensor(data_range, name="data_range").to(target.device).double().reshape(-1)
        if dr.numel() == 1:
            dr = dr.expand(b)
        elif dr.numel() != b:
            raise ValueError(f"data_range has {dr.numel()} values for a batch of {b}")
    bad = ~(dr > 0) | ~torch.isfinite(dr)
    if bad.any():
        raise ValueError(
            f"data_range must be positive and finite; sample(s) {bad.nonzero().flatten().tolist()} "
            "have data_range <= 0 (an all-zero or negative target with the default max-of-target)"
        )
    return dr


def psnr(pred: Any, target: Any, *, data_range: float | Sequence[float] | None = None) -> torch.Tensor:
    """Peak signal-to-noise ratio in dB per sample, ``(B,)`` float64.

    ``pred``/``target``: ``(B, *spatial)``; ``10 log10(data_range² / MSE)`` over all voxels of a
    sample; ``data_range`` defaults to each target's maximum. Identical images give ``inf``.
    """
    p, t = _pair(pred, target)
    dr = _data_range(data_range, t)
    mse = (p - t).square().flatten(1).mean(1)
    out = 10 * torch.log10(dr.square() / mse)
    return torch.where(mse == 0, torch.full_like(mse, math.inf), out)


def nmse(pred: Any, target: Any) -> torch.Tensor:
    """Normalised mean squared error ``||target - pred||² / ||target||²`` per sample, ``(B,)``."""
    p, t = _pair(pred, target)
    den = t.square().flatten(1).sum(1)
    if (den == 0).any():
        raise ValueError(f"NMSE undefined: target is all zero in sample(s) {(den == 0).nonzero().flatten().tolist()}")
    return (p - t).square().flatten(1).sum(1) / den


def _gaussian_1d(sigma: float, radius: int, device: torch.device) -> torch.Tensor:
    x = torch.arange(-radius, radius + 1, dtype=torch.float64, device=device)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def _separable_valid_filter(x: torch.Tensor, kernel: torch.Tensor, dims: int) -> torch.Tensor:
    """Filter ``x`` (N, *S) along its last ``dims`` axes; keep only fully-inside windows.

    A weighted sum of shifted views per axis: exact in float64 on any device, with none of the
    slowness of float64 convolutions on CPU.
    """
    k = kernel.numel()
    weights = kernel.tolist()
    for axis in range(x.ndim - dims, x.ndim):
        n = x.shape[axis] - k + 1
        out = x.narrow(axis, 0, n) * weights[0]
        for i in range(1, k):
            out.add_(x.narrow(axis, i, n), alpha=weights[i])
        x = out
    return x


def ssim(
    pred: Any,
    target: Any,
    *,
    data_range: float | Sequence[float] | None = None,
    spatial_dims: int = 2,
    win_size: int | None = None,
    gaussian_weights: bool = False,
    sigma: float = 1.5,
    k1: float = 0.01,
    k2: float = 0.03,
    use_sample_covariance: bool = True,
) -> torch.Tensor:
    """Structural similarity per sample, ``(B,)`` float64 (scikit-image's definition).

    ``pred``/``target``: ``(B, ..., *spatial)``; SSIM is computed over the last ``spatial_dims``
    (2 or 3) axes and averaged over every other axis but the first (slices of a volume or
    channels), so a ``(B, D, H, W)`` volume with ``spatial_dims=2`` gets the fastMRI per-slice
    mean. Window: uniform ``win_size`` (default 7) or, with ``gaussian_weights``, a Gaussian of
    ``sigma`` truncated at 3.5 σ (11 taps for σ = 1.5). Only windows entirely inside the image
    are averaged, which is scikit-image's border crop. ``data_range`` defaults to each target's
    maximum (fastMRI), one value per sample.
    """
    if spatial_dims not in (2, 3):
        raise ValueError(f"spatial_dims must be 2 or 3, got {spatial_dims}")
    p, t = _pair(pred, target, min_dims=spatial_dims + 1)
    dr = _data_range(data_range, t)
    if k1 < 0 or k2 < 0 or sigma <= 0:
        raise ValueError(f"k1, k2 must be >= 0 and sigma > 0 (got {k1}, {k2}, {sigma})")
    if gaussian_weights:
        radius = int(3.5 * sigma + 0.5)
        if win_size is not None and win_size != 2 * radius + 1:
            raise ValueError(
                f"win_size={win_size} disagrees with the Gaussian window of sigma={sigma} "
                f"({2 * radius + 1} taps); leave win_size unset with gaussian_weights"
            )
        win_size = 2 * radius + 1
        kernel = _gaussian_1d(sigma, radius, p.device)
    else:
        win_size = 7 if win_size is None else win_size
        if win_size < 1 or win_size % 2 == 0:
            raise ValueError(f"win_size must be a positive odd number, got {win_size}")
        kernel = torch.full((win_size,), 1.0 / win_size, dtype=torch.float64, device=p.device)
    spatial = p.shape[-spatial_dims:]
    if min(spatial) < win_size:
        raise ValueError(f"window of {win_size} exceeds the image extent {tuple(spatial)}")

    b = p.shape[0]
    x = p.reshape(-1, *spatial)
    y = t.reshape(-1, *spatial)
    n_per = x.shape[0] // b  # slices (or channels) per sample
    stacked = torch.cat([x, y, x * x, y * y, x * y])
    ux, uy, uxx, uyy, uxy = _separable_valid_filter(stacked, kernel, spatial_dims).chunk(5)
    n_win = win_size**spatial_dims
    cov_norm = n_win / (n_win - 1) if use_sample_covariance and n_win > 1 else 1.0
    vx = cov_norm * (uxx - ux * ux)
    vy = cov_norm * (uyy - uy * uy)
    vxy = cov_norm * (uxy - ux * uy)
    drs = dr.repeat_interleave(n_per).view(-1, *([1] * spatial_dims))
    c1 = (k1 * drs) ** 2
    c2 = (k2 * drs) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return s.reshape(b, -1).mean(1)


class _PerSampleRecon(Metric):
    """Shared per-sample state: one value per image/volume, ``compute`` = mean."""

    per_sample = True
    input_kind = "images"

    def __init__(self, *, class_names: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(class_names=class_names)
        self.kwargs = kwargs
        self.add_state("scores", [], dist_reduce_fx="cat")

    def _fn(self, preds: Any, targets: Any) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:
        values = self._fn(preds, targets).detach()
        self._add_ids(ids, values.shape[0])
        self.scores.append(values[:, None])

    def values(self) -> tuple[list[str], torch.Tensor]:
        vals = torch.cat(self.scores) if self.scores else torch.empty(0, 1, dtype=torch.float64)
        return list(self.ids), vals

    def compute(self) -> torch.Tensor:
        """Mean over samples, ``(1,)`` (infinite PSNR of identical images is kept)."""
        if not self.ids:
            raise ValueError(f"{self.name}: compute() called before any update() (no samples)")
        return self.values()[1].nanmean(0)


@register_metric("psnr", tags=("reconstruction",))
class PSNR(_PerSampleRecon):
    """Stateful PSNR (dB) per sample; keyword options as :func:`psnr`."""

    name = "psnr"
    higher_is_better = True

    def _fn(self, preds: Any, targets: Any) -> torch.Tensor:
        return psnr(preds, targets, **self.kwargs)


@register_metric("ssim", tags=("reconstruction",))
class SSIM(_PerSampleRecon):
    """Stateful SSIM per sample; keyword options as :func:`ssim`."""

    name = "ssim"
    higher_is_better = True
    value_range = (-1.0, 1.0)

    def _fn(self, preds: Any, targets: Any) -> torch.Tensor:
        return ssim(preds, targets, **self.kwargs)


@register_metric("nmse", tags=("reconstruction",))
class NMSE(_PerSampleRecon):
    """Stateful NMSE per sample."""

    name = "nmse"
    higher_is_better = False
    value_range = (0.0, math.inf)

    def _fn(self, preds: Any, targets: Any) -> torch.Tensor:
        return nmse(preds, targets, **self.kwargs)
