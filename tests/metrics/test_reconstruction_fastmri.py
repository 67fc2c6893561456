"""PSNR / SSIM / NMSE against fastMRI's ``evaluate.py`` (facebookresearch/fastMRI@91f2df47)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.datasets.mri_recon.base import center_crop
from medimg_bench.metrics.reconstruction import nmse, psnr, ssim

DATA = Path(__file__).parent / "data" / "fastmri_eval.npz"


def _cases():
    d = np.load(DATA)
    start = 0
    for i, shape in enumerate(d["shape"]):
        n = int(np.prod(shape))
        t = d["target"][start:start + n].reshape(shape)
        p = d["pred"][start:start + n].reshape(shape)
        start += n
        if d["float32"][i]:
            t, p = t.astype(np.float32), p.astype(np.float32)
        yield t, p, bool(d["cropped"][i]), d["psnr_ssim_nmse"][i], bool(d["float32"][i])


def test_equal_to_fastmri_evaluate():
    n = 0
    for t, p, cropped, ref, f32 in _cases():
        tt, pp = torch.from_numpy(t)[None], torch.from_numpy(p)[None]
        if cropped:  # evaluate.py's center_crop of both (floor of the margin)
            m = min(t.shape[-2:])
            tt, pp = center_crop(tt, (m, m)), center_crop(pp, (m, m))
        ours = [psnr(pp, tt).item(), ssim(pp, tt, spatial_dims=2).item(), nmse(pp, tt).item()]
        # named difference: scikit-image keeps float32 inputs in float32, we compute in float64
        tol = 2e-4 if f32 else 1e-9
        np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol)
        n += 1
    assert n == 24


def test_data_range_is_the_volume_max_not_per_slice():
    t = torch.rand(1, 3, 16, 16, dtype=torch.float64)
    t[0, 0] *= 10  # one bright slice sets the range of all
    p = t + 0.01
    per_slice = torch.stack([ssim(p[:, i:i + 1], t[:, i:i + 1]) for i in range(3)]).mean()
    assert ssim(p, t).item() != pytest.approx(per_slice.item(), abs=1e-6)
    assert ssim(p, t, data_range=t.max()).item() == pytest.approx(ssim(p, t).item(), abs=1e-15)
