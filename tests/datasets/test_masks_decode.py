"""The one mask / map decoder (``datasets/masks/decode.py``): every container it reads, every
encoding, and each refusal naming the file and the values seen."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from medimg_bench.datasets.masks import (
    MaskDecodeError,
    check_label_map,
    decode_map,
    decode_map_values,
    decode_mask,
    decode_mask_values,
    parse_scale,
    read_stored,
)

_z, _y, _x = np.mgrid[0:3, 0:10, 0:12]
LABELS = np.where((_y - 4) ** 2 + (_x - 5) ** 2 < 10, 1, 0) + np.where((_x > 8) & (_z > 0), 2, 0)
LABELS = np.minimum(LABELS, 2).astype(np.int64)  # a 3-class volume: 0, 1, 2


def _nifti(a: np.ndarray, path: Path) -> Path:
    nib = pytest.importorskip("nibabel")
    nib.save(nib.Nifti1Image(a, np.eye(4)), str(path))
    return path


def _itk(a: np.ndarray, path: Path) -> Path:
    sitk = pytest.importorskip("SimpleITK")
    sitk.WriteImage(sitk.GetImageFromArray(np.ascontiguousarray(np.transpose(a, (2, 1, 0)))), str(path))
    return path


def _h5(a: np.ndarray, path: Path) -> Path:
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        f["label"] = a
    return path


def _npy(a: np.ndarray, path: Path) -> Path:
    np.save(path, a)
    return path


def _npz(a: np.ndarray, path: Path) -> Path:
    np.savez(path, label=a)
    return path


CONTAINERS = {".nii.gz": _nifti, ".nrrd": _itk, ".mha": _itk, ".h5": _h5, ".npy": _npy, ".npz": _npz}
KEYS = {".h5": "label", ".npz": "label"}


@pytest.mark.parametrize("suffix", sorted(CONTAINERS))
def test_label_maps_in_every_container(tmp_path, suffix):
    path = CONTAINERS[suffix](LABELS.astype(np.uint8), tmp_path / f"m{suffix}")
    key = KEYS.get(suffix)
    esc = suffix.replace(".", r"\.")
    got = decode_mask(path, encoding="label_map", num_classes=3, key=key)
    np.testing.assert_array_equal(got, LABELS)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(decode_mask(path, num_classes=3, key=key), LABELS)  # auto, > 2 classes
    # the same labels stored as whole floats are accepted; with fractions they are refused
    whole = CONTAINERS[suffix](LABELS.astype(np.float32), tmp_path / f"f{suffix}")
    np.testing.assert_array_equal(decode_mask(whole, encoding="label_map", num_classes=3, key=key), LABELS)
    soft = CONTAINERS[suffix](LABELS.astype(np.float32) * 0.45, tmp_path / f"s{suffix}")
    for encoding in ("label_map", "binary", "auto"):
        with pytest.raises(MaskDecodeError, match=rf"s{esc}.*(not whole|fractional)"):
            decode_mask(soft, encoding=encoding, num_classes=3, key=key)
    # a label past the classes is refused naming the file and the values
    with pytest.raises(MaskDecodeError, match=rf"m{esc}.*label 2 but the dataset has 2 labels.*values 0, 1, 2"):
        decode_mask(path, encoding="label_map", num_classes=2, key=key)


def test_dicom_seg_is_read_as_labels(tmp_path):
    pytest.importorskip("highdicom", reason="DICOM SEG is read with highdicom")
    from tests.datasets.test_mask_formats import _ct_series, _write_seg

    source = _ct_series(tmp_path / "series")
    liver = np.zeros((4, 32, 32), bool)
    liver[1:, 4:10, 10:20] = True
    spleen = np.zeros_like(liver)
    spleen[2:, 20:24, 2:6] = True
    _write_seg(source, tmp_path / "seg.dcm", {"Liver": liver, "Spleen": spleen})
    stored = read_stored(tmp_path / "seg.dcm", classes=["background", "spleen", "liver"])
    labels = decode_mask(stored, encoding="label_map", num_classes=3)
    assert labels.dtype == np.int64 and set(np.unique(labels)) == {0, 1, 2}
    assert (labels == 2).sum() == liver.sum() and (labels == 1).sum() == spleen.sum()
    with pytest.raises(MaskDecodeError, match=r"seg\.dcm.*label 2 but the dataset has 2 labels"):
        decode_mask(stored, encoding="label_map", num_classes=2)


def _png(a: np.ndarray, path: Path, mode: str | None = None) -> Path:
    (Image.fromarray(a) if mode is None else Image.fromarray(a).convert(mode)).save(path)
    return path


M = LABELS[0] == 1


@pytest.mark.parametrize("name, write, fg", [
    ("8-bit 0/1", lambda p: _png(M.astype(np.uint8), p), 1),
    ("8-bit 0/255", lambda p: _png(np.where(M, 255, 0).astype(np.uint8), p), 255),
    ("16-bit 0/255", lambda p: _png(np.where(M, 255, 0).astype(np.uint16), p), 255),
    ("16-bit 0/65535", lambda p: _png(np.where(M, 65535, 0).astype(np.uint16), p), 65535),
    ("1-bit", lambda p: _png(M, p, "1"), 1),
])
def test_binary_pngs_and_their_foreground(tmp_path, name, write, fg):
    path = write(tmp_path / "m.png")
    np.testing.assert_array_equal(decode_mask(path, encoding="binary"), M.astype(np.int64), err_msg=name)
    np.testing.assert_array_equal(decode_mask(path, encoding="binary", foreground=fg), M.astype(np.int64))
    np.testing.assert_array_equal(decode_map(path), M.astype(np.float64))  # a one-value map is binary
    if fg == 1:  # a foreground the file does not use: the non-empty file would decode empty
        with pytest.raises(MaskDecodeError, match=r"m\.png.*not empty.*values 0, 1.*empty mask"):
            decode_mask(path, encoding="binary", foreground=255)


def test_soft_edges_and_jpeg_keep_the_toolbox_rule(tmp_path):
    """0/255 masks with soft edges (and JPEG noise) keep ``> 128``, bit for bit."""
    a = np.where(M, 255, 0).astype(np.uint8)
    a[0, :5] = [1, 100, 128, 129, 200]
    path = _png(a, tmp_path / "soft.png")
    np.testing.assert_array_equal(decode_mask(path, encoding="binary"), (a > 128).astype(np.int64))
    rgb = np.stack([np.where(M, 250, 3)] * 3, -1).astype(np.uint8)
    Image.fromarray(rgb).save(tmp_path / "m.jpg", quality=70)
    stored = read_stored(tmp_path / "m.jpg")
    assert stored.lossy
    got = decode_mask(tmp_path / "m.jpg", encoding="binary")
    assert (got == M).mean() > 0.95


def test_palette_gives_indices_and_colours_need_declaring(tmp_path):
    im = Image.new("P", (12, 10))
    im.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * 759)
    im.putdata(LABELS[1].astype(np.uint8).ravel().tolist())
    im.save(tmp_path / "pal.png")
    np.testing.assert_array_equal(decode_mask(tmp_path / "pal.png", encoding="label_map", num_classes=3), LABELS[1])
    with pytest.raises(MaskDecodeError, match=r"pal\.png.*values 0, 1, 2"):
        decode_mask(tmp_path / "pal.png", encoding="binary")
    colours = [(0, 0, 0), (255, 0, 0), (0, 0, 255)]
    rgb = np.array(colours, np.uint8)[LABELS[1]]
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    with pytest.raises(MaskDecodeError, match=r"rgb\.png.*2 colours on black.*\(0, 0, 255\), \(255, 0, 0\)"):
        decode_mask(tmp_path / "rgb.png")
    np.testing.assert_array_equal(decode_mask(tmp_path / "rgb.png", encoding="label_map", num_classes=3,
                                              colors=colours), LABELS[1])
    with pytest.raises(MaskDecodeError, match=r"rgb\.png.*\(0, 0, 255\).*not among"):
        decode_mask(tmp_path / "rgb.png", colors=colours[:2])


def test_auto_refuses_ambiguity():
    with pytest.raises(MaskDecodeError, match=r"x\.png.*ambiguous.*values 0, 1, 2"):
        decode_mask_values(LABELS[1], source="x.png", num_classes=2)
    with pytest.raises(MaskDecodeError, match="ambiguous"):
        decode_mask_values(LABELS[1], source="x.png")  # classes unknown: not guessed
    np.testing.assert_array_equal(decode_mask_values(LABELS[1], source="x.png", num_classes=3), LABELS[1])
    # several values, none the declared foreground: labels, not soft edges
    with pytest.raises(MaskDecodeError, match="none is the foreground value 255"):
        decode_mask_values(LABELS[1].astype(np.uint8), source="x.png", encoding="binary", foreground=255)
    with pytest.raises(MaskDecodeError, match="above the foreground value 1"):
        decode_mask_values(np.array([0, 255]), source="x.png", encoding="binary", foreground=1)


def test_probability_scale_logits_and_their_refusals():
    p = np.array([[0.0, 0.25], [0.5, 1.0]])
    assert np.array_equal(decode_map_values(p, source="p.npy"), p)
    for scale, stored in ((255, p * 255), ("percent", p * 100), ("255", p * 255)):
        np.testing.assert_allclose(decode_map_values(stored, source="p.npy", scale=scale), p, rtol=1e-15)
        with pytest.raises(MaskDecodeError, match=r"p\.npy.*not probabilities.*declare"):
            decode_map_values(stored, source="p.npy")
    with pytest.raises(MaskDecodeError, match=r"outside \[0, 1\] after dividing by the scale 100"):
        decode_map_values(p * 255, source="p.npy", scale="percent")
    logits = np.array([[-3.0, 0.0], [2.0, 40.0]])
    np.testing.assert_allclose(decode_map_values(logits, source="l.npy", encoding="logits"),
                               1 / (1 + np.exp(-logits)), rtol=1e-15)
    with pytest.raises(MaskDecodeError, match="holds no logits"):
        decode_map_values(np.zeros((2, 2), np.uint8), source="m.png", encoding="logits", full_scale=255.0)
    # image files: the bit depth is the scale (MATLAB's im2double)
    g = np.array([[0, 51], [204, 255]], np.uint8)
    assert np.array_equal(decode_map_values(g, source="m.png", full_scale=255.0), g / 255.0)
    assert parse_scale(None) is None and parse_scale("%") == 100.0
    with pytest.raises(ValueError, match="scale"):
        parse_scale(-1)


def test_bad_values_are_refused_naming_the_file():
    with pytest.raises(MaskDecodeError, match=r"c\.npy.*complex"):
        decode_mask_values(np.zeros(3, np.complex64), source="c.npy")
    with pytest.raises(MaskDecodeError, match=r"n\.npy.*1 of 3 values are NaN"):
        decode_map_values(np.array([0.0, np.nan, 1.0]), source="n.npy")
    with pytest.raises(MaskDecodeError, match=r"neg\.nii\.gz.*negative label -1"):
        check_label_map(np.array([0, -1]), "neg.nii.gz")
    with pytest.raises(ValueError, match="encoding must be one of"):
        decode_mask_values(np.zeros(3), source="x", encoding="probability")
    with pytest.raises(MaskDecodeError, match=r"not a readable image"):
        read_stored(Path("/nonexistent/m.png"))
