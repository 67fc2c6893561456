"""Time fastMRI-convention PSNR + SSIM + NMSE per volume: medimg_bench (``metrics.reconstruction``,
float64, all slices in one separable filter) vs fastMRI's ``evaluate.py`` functions (scikit-image
per slice), side by side on the same volumes; plus the SKM-TEA loader (HDF5 read, mask, SENSE
zero-filled) per volume.

Run: ``python benchmarks/recon_metrics.py [--n 4] [--shape 16 320 320] [--fastmri /tmp/fastmri]``.
``--fastmri``: a folder holding the ``fastmri`` package of facebookresearch/fastMRI (see
``tools/fastmri_fixtures.py``); without it scikit-image is called with evaluate.py's settings.
Prints seconds per volume and the ratio (fastMRI / ours; > 1 means we are faster).

Measured (2-core CPU shared with other jobs, load average ~15-19, so only the ratio means much),
2 volumes of 16 x 320 x 320: ours 3.7-4.3 s/volume with torch's 2 threads, 2.3 s with
OMP_NUM_THREADS=1; fastMRI 0.65-0.80 s/volume (ratio 0.17 / 0.30: on CPU our float64 SSIM is
3-6x slower than scikit-image's C filters; swapping our window sums for scipy's correlate1d did
not change the ratio, so the cost is in the element-wise float64 terms). SKM-TEA load
2.0-2.5 s/volume (16 x 256 x 160, 8 coils, mask + SENSE zero-filled).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from _timing import best_of as best  # noqa: E402

from medimg_bench.metrics.reconstruction import nmse, psnr, ssim


def peer(root: str | None):
    if root:
        sys.path.insert(0, str(Path(root).parent if Path(root).name == "fastmri" else root))
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
        from fastmri_fixtures import _import

        ev, _, _ = _import(root)
        return ev.psnr, ev.ssim, ev.nmse
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    def ssim_(gt, pred):
        return np.mean([structural_similarity(gt[i], pred[i], data_range=gt.max()) for i in range(gt.shape[0])])

    return (lambda gt, pred: peak_signal_noise_ratio(gt, pred, data_range=gt.max()), ssim_,
            lambda gt, pred: np.linalg.norm(gt - pred) ** 2 / np.linalg.norm(gt) ** 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--shape", type=int, nargs=3, default=[16, 320, 320])
    ap.add_argument("--fastmri", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    vols = [rng.random(a.shape) for _ in range(a.n)]
    preds = [v + rng.normal(0, 0.05, v.shape) for v in vols]
    ours = best(lambda: [(psnr(torch.from_numpy(p)[None], torch.from_numpy(v)[None]),
                          ssim(torch.from_numpy(p)[None], torch.from_numpy(v)[None]),
                          nmse(torch.from_numpy(p)[None], torch.from_numpy(v)[None])) for v, p in zip(vols, preds)])
    fp, fs, fn = peer(a.fastmri)
    theirs = best(lambda: [(fp(v, p), fs(v, p), fn(v, p)) for v, p in zip(vols, preds)])
    print(f"volumes {a.n} x {tuple(a.shape)} float64")
    print(f"ours   : {ours / a.n:.3f} s/volume")
    print(f"fastMRI: {theirs / a.n:.3f} s/volume; ratio fastMRI/ours {theirs / ours:.2f}")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from medimg_bench.registry import create_dataset
    from tests.datasets.test_mri_recon import make_skm_tea

    with tempfile.TemporaryDirectory() as d:
        make_skm_tea(Path(d), scans=("MTR_001", "MTR_002", "MTR_003"), coils=8, shape=(16, 256, 160))
        ds = create_dataset("skm_tea", root=d, split=None, echoes=[1])
        t = best(lambda: [ds[i] for i in range(len(ds))], 2)
        print(f"skm_tea load (16 x 256 x 160, 8 coils, mask + SENSE zero-filled): {t / len(ds):.3f} s/volume")


if __name__ == "__main__":
    main()
