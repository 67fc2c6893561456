"""One decoder for masks and prediction maps: every stored format into a declared encoding.

Reading (:func:`read_stored`): PNG 1/8/16-bit, palette PNG (its *indices*, not its colours), RGB(A),
JPEG, BMP, GIF, TIFF (PIL); NIfTI, NRRD / MetaImage, DICOM SEG (:mod:`..mask_formats`); HDF5
(a dataset ``key``); ``.npy`` / ``.npz``. An RGB file whose channels are equal is grey; a
lossless colour mask with one colour on black is a 0/1 mask, with several colours it is refused
unless the colours are declared (``colors``: index = label); a lossy (JPEG) colour file is made
grey with MATLAB's ``rgb2gray`` first (compression leaves colour noise).

Encodings (``encoding``):

* ``binary``: one foreground value (``foreground``; by default the file's one nonzero value —
  1, 255, 65535, ... — or, for JPEG and for soft edges of a mask whose top value is the bit
  depth's white, that white); a pixel is foreground when its value is above ``threshold``
  (default: above half the foreground, the toolboxes' ``> 128`` for 255). Values above the
  foreground, negative values and fractional values are refused.
* ``label_map``: the stored whole numbers (palette indices) as labels; refused when a value is
  not a whole number (a float label map with fractions: a probability map cast to int), negative,
  or ``>= num_classes``.
* ``probability``: a map in [0, 1] after dividing by ``scale`` (``255``, ``65535``, ``percent``
  = 100; image files default to their bit depth's white, MATLAB's ``im2double``; arrays to 1);
  refused when outside [0, 1].
* ``logits``: arrays only; the probability is their sigmoid.
* ``auto``: detected from the values, refusing ambiguity. Masks: a label map when the dataset
  has more than two classes; otherwise binary when the file has one nonzero value (or is JPEG,
  or is a soft-edged mask of the bit depth's white); anything else is refused. Maps: binary for
  one nonzero whole value; probability for image files (bit depth) and for arrays within [0, 1];
  an array outside [0, 1] (a 0-255 or percent scale, logits) is refused.

A file with a nonzero value that decodes to an empty mask is an error. Every refusal is a
:class:`MaskDecodeError` (a ``ValueError``) naming the file and the values seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ENCODINGS", "MAP_ENCODINGS", "MASK_ENCODINGS", "PICTURE_SUFFIXES", "MaskDecodeError", "Stored",
           "check_label_map", "decode_map", "decode_map_values", "decode_mask", "decode_mask_values", "grey_of",
           "parse_scale", "read_stored", "values_seen", "colour_labels"]

ENCODINGS = ("auto", "binary", "label_map", "probability", "logits")
MASK_ENCODINGS = ("auto", "binary", "label_map")
MAP_ENCODINGS = ("auto", "binary", "probability", "logits")
#: files read with PIL: integer intensities on their bit depth's scale
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff")
_LOSSY = (".jpg", ".jpeg")
# MATLAB rgb2gray: 0.298936021293775 R + 0.587043074451121 G + 0.114020904255103 B, rounded
_RGB2GRAY = np.array([0.298936021293775, 0.587043074451121, 0.114020904255103])
_NAMED_SCALES = {"percent": 100.0, "%": 100.0}
# under ``auto`` a map whose nonzero values are several whole numbers up to this is labels, not levels
_LABEL_LIKE = 16


class MaskDecodeError(ValueError):
    """A mask or map file that does not decode under its declared encoding (names the file)."""

    def __init__(self, path: str | Path, problem: str, *, what: str = "mask") -> None:
        super().__init__(f"{what} {str(path)!r}: {problem}")
        self.path = str(path)


@dataclass(frozen=True)
class Stored:
    """A mask or map file as stored: ``array`` grey ``H x W`` (or a volume), or ``H x W x 3`` when
    ``colour``; ``full_scale`` is an image file's white (1 for 1-bit, 255, 65535), None for arrays."""

    array: np.ndarray
    path: str
    full_scale: float | None = None
    lossy: bool = False
    palette: bool = False
    colour: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


def values_seen(a: np.ndarray, *, limit: int = 8) -> str:
    """The distinct values of ``a`` for a message: all of them when few, else the range."""
    a = np.asarray(a)
    if a.size == 0:
        return "no values"
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return f"{int((~np.isfinite(a)).sum())} NaN/inf value(s)"
    u = np.unique(a)
    fmt = (lambda v: f"{float(v):.6g}") if a.dtype.kind == "f" else (lambda v: str(int(v)))
    if len(u) <= limit:
        return "values " + ", ".join(fmt(v) for v in u)
    return f"{len(u)} distinct values in [{fmt(u[0])}, {fmt(u[-1])}]"


def parse_scale(scale: Any) -> float | None:
    """``scale`` as a positive number: a number, ``"percent"`` (100) or None."""
    if scale is None:
        return None
    if isinstance(scale, str):
        key = scale.strip().lower()
        if key in _NAMED_SCALES:
            return _NAMED_SCALES[key]
        try:
            scale = float(key)
        except ValueError:
            raise ValueError(f"scale must be a positive number or 'percent', got {scale!r}") from None
    value = float(scale)
    if not value > 0 or not np.isfinite(value):
        raise ValueError(f"scale must be a positive number or 'percent', got {scale!r}")
    return value


def _check_encoding(encoding: str, allowed: Sequence[str], what: str) -> None:
    if encoding not in allowed:
        raise ValueError(f"{what} encoding must be one of {tuple(allowed)}, got {encoding!r}")


# -- reading --------------------------------------------------------------------------------------
def _read_picture(p: Path) -> Stored:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(p) as im:
            mode = im.mode
            a = np.array(im)
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise MaskDecodeError(p, f"not a readable image ({exc})") from exc
    if mode in ("I;16", "I;16B", "I;16L"):
        a = a.astype(np.uint16)
    if mode == "F":  # a float TIFF: an array, no bit depth
        return Stored(a, str(p), None, meta={"mode": mode})
    full = 1.0 if a.dtype == bool else 65535.0 if a.dtype in (np.uint16, np.int32) else 255.0
    if a.ndim == 3:
        a = a[..., :3] if a.shape[-1] >= 3 else a[..., 0]  # alpha dropped
    colour = a.ndim == 3
    if colour and np.array_equal(a[..., 0], a[..., 1]) and np.array_equal(a[..., 1], a[..., 2]):
        a, colour = a[..., 0], False  # grey stored as RGB
    return Stored(a, str(p), full, lossy=p.suffix.lower() in _LOSSY, palette=mode == "P", colour=colour,
                  meta={"mode": mode})


def read_stored(path: str | Path, *, key: str | None = None, classes: Sequence[str] | None = None,
                segment_map: Any = None) -> Stored:
    """The file as stored (no decoding): pictures through PIL, HDF5 / NumPy arrays (``key``: the
    dataset / npz member), NIfTI / NRRD / MHA / DICOM SEG through :mod:`..mask_formats`."""
    p = Path(path)
    low = p.name.lower()
    if low.endswith(PICTURE_SUFFIXES):
        return _read_picture(p)
    from medimg_bench.datasets import io

    if low.endswith((".h5", ".hdf5")):
        array, meta = io.read_hdf5(p, key=key)
    elif low.endswith((".npy", ".npz")):
        array, meta = io.read_numpy(p, key=key, mmap=False)
    else:
        from medimg_bench.datasets.mask_formats import read_label_file

        array, meta = read_label_file(p, classes=classes, segment_map=segment_map)
    return Stored(np.asarray(array), str(p), None, meta=dict(meta))


def grey_of(stored: Stored, *, weights: str = "matlab") -> np.ndarray:
    """A colour file's grey values: MATLAB's ``rgb2gray`` (``"matlab"``) or ITU-R 601 as PIL and
    OpenCV convert (``"itu601"``); a grey file as stored."""
    if not stored.colour:
        return stored.array
    rgb = stored.array
    if weights == "itu601":
        from PIL import Image

        return np.asarray(Image.fromarray(np.ascontiguousarray(rgb, dtype=np.uint8)).convert("L"))
    if weights != "matlab":
        raise ValueError(f"grey weights must be 'matlab' or 'itu601', got {weights!r}")
    return np.clip(np.rint(rgb.astype(np.float64) @ _RGB2GRAY), 0, 255).astype(np.uint8)


def _pack(rgb: np.ndarray) -> np.ndarray:
    r = rgb.astype(np.int64)
    return (r[..., 0] << 16) | (r[..., 1] << 8) | r[..., 2]


def _rgb_text(packed: Sequence[int]) -> str:
    return ", ".join(f"({v >> 16}, {(v >> 8) & 255}, {v & 255})" for v in packed)


def colour_labels(stored: Stored, colors: Sequence[Sequence[int]] | None = None, *, what: str = "mask") -> np.ndarray:
    """Labels of a colour file: ``colors[k]`` is label ``k`` when declared; otherwise one colour
    on black is a 0/1 mask and several colours are refused."""
    packed = _pack(stored.array)
    if colors is not None:
        table = {int(_pack(np.asarray(c, dtype=np.int64)[None])[0]): k for k, c in enumerate(colors)}
        found = [int(v) for v in np.unique(packed)]
        unknown = [v for v in found if v not in table]
        if unknown:
            raise MaskDecodeError(stored.path, f"colour(s) {_rgb_text(unknown[:6])} are not among the declared "
                                  f"colours {[list(c) for c in colors]}", what=what)
        labels = np.zeros(packed.shape, dtype=np.int64)
        for v in found:
            labels[packed == v] = table[v]
        return labels
    found = [int(v) for v in np.unique(packed) if v != 0]
    if len(found) > 1:
        raise MaskDecodeError(stored.path, f"{len(found)} colours on black ({_rgb_text(found[:6])}"
                              f"{', ...' if len(found) > 6 else ''}); a colour file decodes as a binary mask "
                              "only with one colour: declare the colours (mask_colors: [[0, 0, 0], [r, g, b], "
                              "...], index = label) or store labels", what=what)
    return (packed != 0).astype(np.int64)


# -- values ---------------------------------------------------------------------------------------
def _check_numeric(a: np.ndarray, source: str | Path, what: str) -> None:
    if a.dtype.kind == "c":
        raise MaskDecodeError(source, f"complex values ({a.dtype}); a {what} is real", what=what)
    if a.dtype.kind not in "biuf":
        raise MaskDecodeError(source, f"values of type {a.dtype} are not a {what}", what=what)
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise MaskDecodeError(source, f"{int((~np.isfinite(a)).sum())} of {a.size} values are NaN or inf",
                              what=what)


def _fractional(a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind != "f":
        return None
    frac = a != np.rint(a)
    return frac if frac.any() else None


def _nonzero_values(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.uint8 or a.dtype == bool:
        counts = np.bincount(a.ravel().astype(np.uint8), minlength=256)
        return np.flatnonzero(counts[1:]) + 1
    u = np.unique(a)
    return u[u != 0]


def check_label_map(values: Any, source: str | Path, *, num_classes: int | None = None,
                    what: str = "mask") -> np.ndarray:
    """``values`` as an ``int64`` label map, refused naming ``source`` when a value is not a
    whole number (a float label map with fractions), negative, or ``>= num_classes``."""
    a = np.asarray(values)
    _check_numeric(a, source, what)
    frac = _fractional(a)
    if frac is not None:
        raise MaskDecodeError(source, f"{int(frac.sum())} of {a.size} values are not whole numbers (e.g. "
                              f"{float(a[frac].flat[0])!r}; {values_seen(a)}): a label map holds integer labels "
                              "(threshold or argmax a probability map first, or declare it as one)", what=what)
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)  # on the stored dtype: cheaper than int64
    if lo < 0:
        raise MaskDecodeError(source, f"negative label {lo} ({values_seen(a)}); labels are "
                              "0 (background) .. n-1", what=what)
    if num_classes is not None and hi >= num_classes:
        raise MaskDecodeError(source, f"label {hi} but the dataset has {num_classes} labels (0 .. "
                              f"{num_classes - 1}; {values_seen(a)}); declare the encoding (binary with its "
                              "foreground value, or label_map with its classes)", what=what)
    return a.astype(np.int64, copy=False)


def _detect_foreground(nz: np.ndarray, a: np.ndarray, source: str | Path, *, full_scale: float | None,
                       lossy: bool, what: str) -> float:
    if len(nz) <= 1:
        return float(nz[0]) if len(nz) else 1.0
    if full_scale is not None and (lossy or float(nz[-1]) == full_scale):
        return full_scale  # JPEG noise, or the soft edges of a 0/white mask: the toolboxes' rule
    raise MaskDecodeError(source, f"several nonzero values ({values_seen(a)}): a binary {what} has one "
                          "foreground value; declare it (foreground: values above half of it are foreground) "
                          "or declare a label_map with its classes", what=what)


def _binary(a: np.ndarray, source: str | Path, *, foreground: float | None, threshold: float | None,
            full_scale: float | None, lossy: bool, what: str) -> np.ndarray:
    if _fractional(a) is not None:
        raise MaskDecodeError(source, f"fractional values ({values_seen(a)}) under the binary encoding; a "
                              "probability map needs encoding probability", what=what)
    if a.size and a.min() < 0:
        raise MaskDecodeError(source, f"negative values ({values_seen(a)}) under the binary encoding", what=what)
    nz = _nonzero_values(a)
    fg = float(foreground) if foreground is not None else _detect_foreground(
        nz, a, source, full_scale=full_scale, lossy=lossy, what=what)
    if len(nz) > 1 and not lossy and float(nz[-1]) != fg:  # soft edges reach the foreground; labels do not
        raise MaskDecodeError(source, f"several nonzero values ({values_seen(a)}) and none is the foreground "
                              f"value {fg:g}: a label map, not a binary {what}; declare label_map with its classes",
                              what=what)
    if len(nz) and float(nz[-1]) > fg:
        raise MaskDecodeError(source, f"{values_seen(a)} above the foreground value {fg:g} of the binary "
                              "encoding (a label map with more classes, or another foreground value?)", what=what)
    cut = float(threshold) if threshold is not None else (float(np.ceil(fg / 2)) if fg > 1 else fg / 2)
    out = (a > cut).astype(np.int64)
    if len(nz) and not out.any():
        raise MaskDecodeError(source, f"the file is not empty ({values_seen(a)}) but decodes to an empty "
                              f"{what} under the binary encoding (foreground {fg:g}: values above {cut:g}); "
                              "declare the foreground value it uses", what=what)
    return out


def decode_mask_values(values: Any, *, source: str | Path, encoding: str = "auto", foreground: float | None = None,
                       threshold: float | None = None, num_classes: int | None = None,
                       full_scale: float | None = None, lossy: bool = False, what: str = "mask") -> np.ndarray:
    """Stored values -> ``int64`` labels under ``encoding`` (``auto``, ``binary``, ``label_map``;
    rules in the module docstring). ``full_scale``: the white of an image file (None for arrays)."""
    _check_encoding(encoding, MASK_ENCODINGS, what)
    a = np.asarray(values)
    _check_numeric(a, source, what)
    if encoding == "auto":
        encoding = _detect_mask(a, source, num_classes=num_classes, foreground=foreground, full_scale=full_scale,
                                lossy=lossy, what=what)
    if encoding == "label_map":
        return check_label_map(a, source, num_classes=num_classes, what=what)
    return _binary(a, source, foreground=foreground, threshold=threshold, full_scale=full_scale, lossy=lossy,
                   what=what)


def _detect_mask(a: np.ndarray, source: str | Path, *, num_classes: int | None, foreground: float | None,
                 full_scale: float | None, lossy: bool, what: str) -> str:
    if _fractional(a) is not None:
        raise MaskDecodeError(source, f"fractional values ({values_seen(a)}): a {what} holds labels; a "
                              "probability map is not a mask", what=what)
    if num_classes is not None and num_classes > 2:
        return "label_map"
    nz = _nonzero_values(a)
    if foreground is not None or len(nz) <= 1:
        return "binary"
    if full_scale is not None and (lossy or float(nz[-1]) == full_scale):
        return "binary"
    raise MaskDecodeError(source, f"the encoding is ambiguous ({values_seen(a)}"
                          f"{f' under {num_classes} classes' if num_classes else ''}): not one foreground value; "
                          "declare it: binary with its foreground value, or label_map with the classes", what=what)


def decode_mask(path: str | Path | Stored, *, encoding: str = "auto", foreground: float | None = None,
                threshold: float | None = None, num_classes: int | None = None,
                colors: Sequence[Sequence[int]] | None = None, key: str | None = None,
                grey: str = "matlab") -> np.ndarray:
    """A mask file (or a :class:`Stored`) as ``int64`` labels under ``encoding``."""
    stored = path if isinstance(path, Stored) else read_stored(path, key=key)
    if stored.colour and (colors is not None or not stored.lossy):
        labels = colour_labels(stored, colors)
        return decode_mask_values(labels, source=stored.path, encoding=encoding, num_classes=num_classes)
    return decode_mask_values(grey_of(stored, weights=grey), source=stored.path, encoding=encoding,
                              foreground=foreground, threshold=threshold, num_classes=num_classes,
                              full_scale=stored.full_scale, lossy=stored.lossy)


# -- maps -----------------------------------------------------------------------------------------
def _detect_map(a: np.ndarray, source: str | Path, *, full_scale: float | None) -> str:
    nz = _nonzero_values(a)
    if len(nz) == 1 and float(nz[0]) >= 1 and float(nz[0]) == np.rint(nz[0]):
        return "binary"  # 0/1, 0/255, 0/65535: one foreground value
    if len(nz) > 1 and float(nz[-1]) <= _LABEL_LIKE and _fractional(a) is None:
        raise MaskDecodeError(source, f"{values_seen(a)}: small whole numbers look like labels, not grey levels "
                              "or probabilities, and the encoding is ambiguous; declare it (encoding=probability "
                              "with its scale, or store a binary map)", what="map")
    if full_scale is not None:
        return "probability"  # an image file: its bit depth's scale (im2double)
    if a.size == 0 or (float(a.min()) >= 0 and float(a.max()) <= 1):
        return "probability"
    raise MaskDecodeError(source, f"values in [{float(a.min()):.6g}, {float(a.max()):.6g}] ({values_seen(a)}) "
                          "are not probabilities and the encoding is ambiguous (a 0-255 or percent scale, or "
                          "logits?): declare it: encoding=logits, or encoding=probability with scale=255 / "
                          "scale=percent", what="map")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    pos = x >= 0  # two branches: neither overflows
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def decode_map_values(values: Any, *, source: str | Path, encoding: str = "auto", scale: Any = None,
                      foreground: float | None = None, full_scale: float | None = None,
                      lossy: bool = False) -> np.ndarray:
    """Stored values -> a float64 probability map in [0, 1] under ``encoding`` (``auto``,
    ``binary``, ``probability`` with ``scale``, ``logits``; rules in the module docstring)."""
    _check_encoding(encoding, MAP_ENCODINGS, "map")
    a = np.asarray(values)
    _check_numeric(a, source, "map")
    s = parse_scale(scale)
    if encoding == "auto":
        encoding = "probability" if s is not None else _detect_map(a, source, full_scale=full_scale)
    if encoding == "binary":
        return _binary(a, source, foreground=foreground, threshold=None, full_scale=full_scale, lossy=lossy,
                       what="map").astype(np.float64)
    if encoding == "logits":
        if full_scale is not None:
            raise MaskDecodeError(source, "an image file holds no logits (its values are 0 .. "
                                  f"{full_scale:g}); store logits as .npy or declare encoding probability", what="map")
        return _sigmoid(a.astype(np.float64))
    s = s if s is not None else (full_scale or 1.0)
    p = a.astype(np.float64) / s if s != 1.0 else a.astype(np.float64)
    if p.size and (float(p.min()) < 0 or float(p.max()) > 1):
        raise MaskDecodeError(source, f"values in [{float(a.min()):.6g}, {float(a.max()):.6g}] are outside [0, 1]"
                              f"{f' after dividing by the scale {s:g}' if s != 1.0 else ''}: not probabilities; "
                              "declare the scale (scale=255, scale=percent) or encoding=logits", what="map")
    return p


def decode_map(path: str | Path | Stored, *, encoding: str = "auto", scale: Any = None,
               foreground: float | None = None, key: str | None = None) -> np.ndarray:
    """A map file (or a :class:`Stored`) as a float64 probability map in [0, 1]; a colour file
    counts as a map only with one colour on black (a 0/1 map)."""
    stored = path if isinstance(path, Stored) else read_stored(path, key=key)
    if stored.colour:
        labels = colour_labels(stored, None, what="map")
        return decode_map_values(labels, source=stored.path, encoding=encoding, scale=scale)
    return decode_map_values(stored.array, source=stored.path, encoding=encoding, scale=scale,
                             foreground=foreground, full_scale=stored.full_scale, lossy=stored.lossy)
