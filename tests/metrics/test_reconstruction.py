"""PSNR / SSIM / NMSE against scikit-image and the fastMRI definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from medimg_bench.metrics.reconstruction import NMSE, PSNR, SSIM, nmse, psnr, ssim
from medimg_bench.registry import create_metric

skm = pytest.importorskip("skimage.metrics")


def _pair(shape, seed=0, noise=0.1):
    rng = np.random.default_rng(seed)
    t = rng.random(shape) * 3.0
    p = t + noise * rng.standard_normal(shape)
    return p, t


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("use_sample_covariance", [True, False])
def test_ssim_2d_equals_skimage(gaussian, use_sample_covariance):
    p, t = _pair((3, 24, 31), seed=1)
    ours = ssim(p, t, gaussian_weights=gaussian, use_sample_covariance=use_sample_covariance)
    for i in range(3):
        ref = skm.structural_similarity(
            t[i], p[i], data_range=t[i].max(), gaussian_weights=gaussian,
            use_sample_covariance=use_sample_covariance,
        )
        assert ours[i].item() == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("gaussian", [False, True])
def test_ssim_3d_equals_skimage(gaussian):
    p, t = _pair((2, 13, 14, 15), seed=2)
    ours = ssim(p, t, spatial_dims=3, gaussian_weights=gaussian, data_range=4.0)
    for i in range(2):
        ref = skm.structural_similarity(t[i], p[i], data_range=4.0, gaussian_weights=gaussian)
        assert ours[i].item() == pytest.approx(ref, abs=1e-12)


def test_ssim_custom_window_constants_and_sigma():
    p, t = _pair((1, 20, 20), seed=3)
    ours = ssim(p, t, win_size=5, k1=0.02, k2=0.05, data_range=2.5)
    ref = skm.structural_similarity(t[0], p[0], win_size=5, K1=0.02, K2=0.05, data_range=2.5)
    assert ours.item() == pytest.approx(ref, abs=1e-12)
    ours_g = ssim(p, t, gaussian_weights=True, sigma=1.0, data_range=2.5)
    ref_g = skm.structural_similarity(t[0], p[0], gaussian_weights=True, sigma=1.0, data_range=2.5)
    assert ours_g.item() == pytest.approx(ref_g, abs=1e-12)


def test_ssim_fastmri_volume_convention():
    """fastMRI: data_range = max of the whole target volume, SSIM per slice, mean over slices."""
    p, t = _pair((2, 4, 16, 18), seed=4)
    ours = ssim(p, t)  # (B, D, H, W), spatial_dims=2
    for b in range(2):
        maxval = t[b].max()  # volume max, not the per-slice max
        ref = np.mean([skm.structural_similarity(t[b, s], p[b, s], data_range=maxval) for s in range(4)])
        assert ours[b].item() == pytest.approx(ref, abs=1e-12)
        per_slice_max = np.mean(
            [skm.structural_similarity(t[b, s], p[b, s], data_range=t[b, s].max()) for s in range(4)]
        )
        assert ours[b].item() != pytest.approx(per_slice_max, abs=1e-9)


def test_ssim_float32_close_to_skimage_float32():
    """We compute in float64; scikit-image keeps float32 in float32 (a named difference)."""
    p, t = _pair((1, 32, 32), seed=5)
    p32, t32 = p.astype(np.float32), t.astype(np.float32)
    ours = ssim(torch.from_numpy(p32), torch.from_numpy(t32), data_range=3.0).item()
    ref = skm.structural_similarity(t32[0], p32[0], data_range=3.0)
    assert ours == pytest.approx(ref, abs=1e-5)


def test_psnr_and_nmse_equal_references():
    p, t = _pair((3, 10, 12), seed=6)
    ours = psnr(p, t)
    for i in range(3):
        ref = skm.peak_signal_noise_ratio(t[i], p[i], data_range=t[i].max())
        assert ours[i].item() == pytest.approx(ref, abs=1e-10)
    ours_fixed = psnr(torch.from_numpy(p), torch.from_numpy(t), data_range=5.0)
    assert ours_fixed[1].item() == pytest.approx(skm.peak_signal_noise_ratio(t[1], p[1], data_range=5.0), abs=1e-10)
    # fastMRI nmse = ||gt - pred||^2 / ||gt||^2; skimage's normalized_root_mse('euclidean') is its sqrt
    n = nmse(p, t)
    for i in range(3):
        assert math.sqrt(n[i].item()) == pytest.approx(
            skm.normalized_root_mse(t[i], p[i], normalization="euclidean"), rel=1e-12
        )


def test_identical_images():
    t = np.random.default_rng(0).random((2, 9, 9)) + 0.1
    assert torch.isinf(psnr(t, t)).all()
    assert torch.allclose(ssim(t, t), torch.ones(2, dtype=torch.float64))
    assert (nmse(t, t) == 0).all()


def test_invalid_inputs():
    p, t = _pair((2, 8, 8))
    with pytest.raises(ValueError, match="shapes differ"):
        ssim(p, t[:, :7])
    bad = p.copy()
    bad[1, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"NaN or inf.*\[1\]"):
        psnr(bad, t)
    with pytest.raises(ValueError, match="exceeds the image extent"):
        ssim(p[:, :5, :5], t[:, :5, :5])
    with pytest.raises(ValueError, match="odd"):
        ssim(p, t, win_size=4)
    with pytest.raises(ValueError, match="data_range"):
        psnr(p, np.zeros_like(t))
    with pytest.raises(ValueError, match="all zero"):
        nmse(p, np.zeros_like(t))
    with pytest.raises(ValueError, match="data_range has 3 values"):
        psnr(p, t, data_range=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="complex"):
        psnr(torch.ones(1, 4, 4, dtype=torch.complex64), torch.ones(1, 4, 4, dtype=torch.complex64))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), noise=st.floats(0.0, 2.0))
def test_ssim_bounds_and_symmetry(seed, noise):
    p, t = _pair((1, 12, 12), seed=seed, noise=noise)
    a = ssim(p, t, data_range=3.0).item()
    b = ssim(t, p, data_range=3.0).item()
    assert -1 - 1e-12 <= a <= 1 + 1e-12
    assert a == pytest.approx(b, abs=1e-12)  # symmetric for a fixed data_range
    # PSNR is symmetric too with a fixed data range; NMSE is not
    assert psnr(p, t, data_range=3.0).item() == pytest.approx(psnr(t, p, data_range=3.0).item())


def test_stateful_forms_and_registry():
    p, t = _pair((4, 10, 10), seed=7)
    m = create_metric("ssim", data_range=3.0)
    assert isinstance(m, SSIM)
    m.update(p[:2], t[:2], ids=["a", "b"])
    m.update(p[2:], t[2:], ids=["c", "d"])
    ids, vals = m.values()
    assert ids == ["a", "b", "c", "d"] and vals.shape == (4, 1)
    assert torch.allclose(vals[:, 0], ssim(p, t, data_range=3.0))
    assert m.compute().item() == pytest.approx(ssim(p, t, data_range=3.0).mean().item())
    m.reset()
    assert m.values()[1].shape == (0, 1)
    ps, nm = PSNR(), NMSE()
    ps.update(p, t)
    nm.update(p, t)
    assert ps.compute().item() == pytest.approx(psnr(p, t).mean().item())
    assert nm.compute().item() == pytest.approx(nmse(p, t).mean().item())
    assert not NMSE.higher_is_better


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    p, t = _pair((2, 3, 16, 16), seed=8)
    cpu = ssim(p, t, gaussian_weights=True)
    gpu = ssim(torch.from_numpy(p).cuda(), torch.from_numpy(t).cuda(), gaussian_weights=True)
    assert gpu.device.type == "cuda"
    assert torch.allclose(cpu, gpu.cpu(), atol=1e-12)
