"""Time the mask readers on one generated case: DICOM SEG (ours: frames stacked from their own
positions, vs highdicom's ``segread`` + ``get_volume``), RTSTRUCT rasterisation (ours; rt-utils
is not a dependency), and NRRD / MHA (SimpleITK) vs the same labels as NIfTI (nibabel).

Run: ``python benchmarks/mask_formats.py [--slices 48] [--size 256] [--segments 5]``. Prints
seconds per case for each reader and the ratio (peer / ours) where there is a peer.

Measured (shared 2-core CPU under load, defaults: 48 x 256 x 256, 5 segments): DICOM SEG ours
1.80 s/case, highdicom 0.28.2 ``segread`` + ``get_volume`` 1.91 s (ratio 1.06); RTSTRUCT 5 ROIs x
48 contours 1.79 s/case; NRRD 0.072 s and MHA 0.064 s vs NIfTI 0.114 s for the same compressed
labels.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from _timing import best_of as best  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slices", type=int, default=48)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--segments", type=int, default=5)
    a = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import highdicom as hd
    import nibabel as nib
    import SimpleITK as sitk

    from medimg_bench.datasets.io import read_nifti
    from medimg_bench.datasets.mask_formats import read_label_file
    from medimg_bench.datasets.mask_formats.dicom_seg import read_dicom_seg
    from tests.datasets.test_mask_formats import (
        _ct_series,
        _nifti_from_series,
        _rect,
        _write_rtstruct,
        _write_seg,
    )

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        source = _ct_series(d / "series", n=a.slices, size=a.size)
        _, affine = _nifti_from_series(d / "series", d / "ct.nii.gz")
        rng = np.random.default_rng(0)
        segs = {}
        for k in range(a.segments):
            m = np.zeros((a.slices, a.size, a.size), bool)
            r, c = rng.integers(0, a.size - 40, 2)
            m[:, r:r + 40, c:c + 40] = True
            segs[f"organ{k}"] = m
        _write_seg(source, d / "seg.dcm", segs)
        t_ours = best(lambda: read_dicom_seg(d / "seg.dcm"))
        print(f"DICOM SEG {a.slices}x{a.size}x{a.size}, {a.segments} segments: ours {t_ours:.3f} s")
        try:
            t_hd = best(lambda: hd.seg.segread(str(d / "seg.dcm")).get_volume(combine_segments=False))
            print(f"  highdicom segread + get_volume: {t_hd:.3f} s; ratio highdicom/ours {t_hd / t_ours:.2f}")
        except Exception as exc:  # highdicom refuses SEGs whose SpacingBetweenSlices disagrees
            print(f"  highdicom get_volume refused this SEG: {exc}")
        rois = {f"organ{k}": [_rect(i, 3.5 + 5 * k, 40.5 + 5 * k, 9.5, 60.5) for i in range(a.slices)]
                for k in range(a.segments)}
        _write_rtstruct(d / "rt.dcm", rois)
        shape = (a.size, a.size, a.slices)
        t_rt = best(lambda: read_label_file(d / "rt.dcm", image_affine=affine, image_shape=shape))
        print(f"RTSTRUCT {a.segments} ROIs x {a.slices} contours, rasterised: {t_rt:.3f} s")
        lab = rng.integers(0, a.segments + 1, shape).astype(np.uint8)
        nib.save(nib.Nifti1Image(lab, affine), str(d / "lab.nii.gz"))
        img = sitk.GetImageFromArray(np.ascontiguousarray(lab.transpose(2, 1, 0)))
        for suffix in (".nrrd", ".mha"):
            sitk.WriteImage(img, str(d / f"lab{suffix}"), True)
        t_nii = best(lambda: read_nifti(d / "lab.nii.gz"))
        for suffix in (".nrrd", ".mha"):
            t = best(lambda s=suffix: read_label_file(d / f"lab{s}"))
            print(f"{suffix} labels {shape} (compressed): {t:.3f} s; NIfTI .nii.gz {t_nii:.3f} s")


if __name__ == "__main__":
    main()
