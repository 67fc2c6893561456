"""Chest X-ray pixel handling shared by the CXR loaders: intensity normalization, MONOCHROME1
inversion, grey/RGB channels, DICOM header meta and SIIM run-length masks.

Normalization (``normalize=``), applied after reading with :mod:`medimg_bench.datasets.io`:

* ``"auto"`` (default) — divide by the full range of the stored bit depth: 8-bit PNG/JPEG by 255,
  16-bit PNG by 65535, DICOM by the range of ``BitsStored`` (signed or unsigned) after
  ``RescaleSlope``/``RescaleIntercept``; result in [0, 1] (clipped).
* ``"minmax"`` — per image ``(x - min) / (max - min)`` (constant image → 0).
* ``"none"`` — the stored values as float32 (DICOM: rescaled), no inversion.

With ``"auto"`` and ``"minmax"`` a DICOM with ``PhotometricInterpretation`` ``MONOCHROME1``
(bright = low value, found in VinDr-CXR and other DR exports) is inverted to ``1 - x`` so that
bone is bright in every sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "NORMALIZE_MODES",
    "load_cxr_image",
    "dicom_header",
    "decode_siim_rle",
    "encode_siim_rle",
]

NORMALIZE_MODES = ("auto", "minmax", "none")


def dicom_header(path: str | Path) -> dict[str, Any]:
    """Header fields of a DICOM file needed for intensity scaling and meta (pixels not read).

    Returns a dict with ``bits_stored``, ``signed``, ``slope``, ``intercept``, ``photometric``
    and, when present, ``view`` (ViewPosition), ``sex`` (PatientSex), ``age`` (years, int)."""
    import pydicom

    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True)
    except Exception as exc:
        from medimg_bench.datasets.io import ImageReadError

        raise ImageReadError(
            path, f"DICOM header unreadable ({type(exc).__name__}: {exc})"
        ) from exc
    out: dict[str, Any] = {
        "bits_stored": int(getattr(ds, "BitsStored", 0) or getattr(ds, "BitsAllocated", 0) or 0),
        "signed": int(getattr(ds, "PixelRepresentation", 0) or 0) == 1,
        "slope": float(getattr(ds, "RescaleSlope", 1.0) or 1.0),
        "intercept": float(getattr(ds, "RescaleIntercept", 0.0) or 0.0),
        "photometric": str(getattr(ds, "PhotometricInterpretation", "") or ""),
    }
    view = str(getattr(ds, "ViewPosition", "") or "").strip()
    if view:
        out["view"] = view
    sex = str(getattr(ds, "PatientSex", "") or "").strip()
    if sex:
        out["sex"] = sex
    age = str(getattr(ds, "PatientAge", "") or "").strip()
    if age[:-1].isdigit() and age.endswith("Y"):  # DICOM AS: "058Y"
        out["age"] = int(age[:-1])
    elif age.isdigit():
        out["age"] = int(age)
    return out


def _as_2d_or_rgb(array: np.ndarray, path: Path, *, is_dicom: bool, photometric: str) -> np.ndarray:
    a = np.asarray(array)
    if a.ndim == 3 and not is_dicom:
        if a.shape[-1] in (2, 4):  # LA / RGBA (some NIH PNGs): drop alpha
            a = a[..., :-1]
        if a.shape[-1] == 1:
            a = a[..., 0]
    if a.ndim == 3 and is_dicom and photometric.startswith(("RGB", "YBR")) and a.shape[-1] == 3:
        return a
    if a.ndim == 2 or (a.ndim == 3 and a.shape[-1] == 3 and not is_dicom):
        return a
    from medimg_bench.datasets.io import ImageReadError

    raise ImageReadError(path, f"expected a 2D grey or RGB radiograph, got array shape {a.shape}")


def _full_range(
    array: np.ndarray, meta: dict[str, Any], header: dict[str, Any] | None
) -> tuple[float, float]:
    if header is not None and header["bits_stored"] > 0:
        bits = header["bits_stored"]
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if header["signed"] else (0, 2**bits - 1)
        ends = sorted(
            (header["slope"] * lo + header["intercept"], header["slope"] * hi + header["intercept"])
        )
        return ends[0], ends[1]
    dtype = np.dtype(array.dtype)
    if dtype == np.bool_:
        return 0.0, 1.0
    if dtype.kind in "ui" and dtype.itemsize == 1:
        return 0.0, 255.0
    if dtype.kind in "ui":
        # PIL gives 16-bit PNGs as uint16 ("I;16") or int32 ("I"); both are 16-bit data
        if str(meta.get("mode", "")).startswith("I") or dtype.itemsize == 2:
            return 0.0, 65535.0
    raise ValueError(
        f"normalize='auto' does not know the range of {dtype} pixels in {meta.get('path')!r}; "
        "use normalize='minmax' or 'none'"
    )


def load_cxr_image(
    path: str | Path,
    *,
    normalize: str = "auto",
    channels: int = 1,
    invert_monochrome1: bool = True,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Read a radiograph (PNG/JPEG/TIFF 8/16-bit or DICOM) as a float32 ``C×H×W`` tensor.

    ``channels=1`` averages RGB to grey; ``channels=3`` repeats grey. Returns the tensor (in
    [0, 1] unless ``normalize="none"``) and meta: ``path``, ``photometric``/``bits_stored`` for
    DICOM plus the header's ``view``/``sex``/``age`` when present."""
    from medimg_bench.datasets.io import read_image

    if normalize not in NORMALIZE_MODES:
        raise ValueError(f"normalize must be one of {NORMALIZE_MODES}, got {normalize!r}")
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels!r}")
    path = Path(path)
    array, rmeta = read_image(path)
    is_dicom = "photometric_interpretation" in rmeta
    header = dicom_header(path) if is_dicom else None
    photometric = header["photometric"] if header else ""
    a = _as_2d_or_rgb(array, path, is_dicom=is_dicom, photometric=photometric)
    x = a.astype(np.float32)
    if normalize == "auto":
        lo, hi = _full_range(a, rmeta, header)
        x = np.clip((x - np.float32(lo)) / np.float32(hi - lo), 0.0, 1.0)
    elif normalize == "minmax":
        lo, hi = float(x.min()), float(x.max())
        x = (x - np.float32(lo)) / np.float32(hi - lo) if hi > lo else np.zeros_like(x)
    if normalize != "none" and invert_monochrome1 and photometric == "MONOCHROME1":
        x = 1.0 - x
    if x.ndim == 3:
        x = np.moveaxis(x, -1, 0)
        if channels == 1:
            x = x.mean(axis=0, keepdims=True)
    else:
        x = x[None]
        if channels == 3:
            x = np.repeat(x, 3, axis=0)
    meta: dict[str, Any] = {"path": str(path), "normalize": normalize}
    if header is not None:
        meta.update(photometric=photometric, bits_stored=header["bits_stored"])
        meta.update({k: header[k] for k in ("view", "sex", "age") if k in header})
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), meta


def decode_siim_rle(
    rle: str, height: int, width: int, *, fmt: str = "relative", source: str = ""
) -> np.ndarray:
    """Decode one SIIM-ACR run-length string into a ``height×width`` uint8 mask (1 = pneumothorax).

    Pixels are numbered column by column (top to bottom, then left to right), as in the
    competition's ``mask_functions.rle2mask`` (which reshapes to (width, height) and transposes).
    ``fmt="relative"`` (``train-rle.csv``): pairs ``gap length`` where each gap counts from the end
    of the previous run (the first from pixel 0). ``fmt="absolute"``: standard Kaggle RLE, pairs
    ``start length`` with 1-based starts. ``"-1"`` or blank → empty mask. Runs past the image raise
    ``ValueError`` naming ``source``."""
    if fmt not in ("relative", "absolute"):
        raise ValueError(f"rle format must be 'relative' or 'absolute', got {fmt!r}")
    flat = np.zeros(height * width, dtype=np.uint8)
    text = str(rle).strip() if rle is not None else ""
    if text in ("", "-1", "nan"):
        return flat.reshape(width, height).T.copy()
    try:
        nums = np.array([int(t) for t in text.split()], dtype=np.int64)
    except ValueError:
        raise ValueError(f"{source}: run-length string is not integers: {text[:40]!r}") from None
    if len(nums) % 2 or (nums < 0).any():
        raise ValueError(f"{source}: run-length string must be non-negative start/length pairs")
    starts, lengths = nums[0::2], nums[1::2]
    if fmt == "relative":
        ends_before = np.concatenate([[0], np.cumsum(starts + lengths)[:-1]])
        begin = ends_before + starts
    else:
        begin = starts - 1
        if (begin < 0).any():
            raise ValueError(f"{source}: absolute run-length starts are 1-based; found 0")
    end = begin + lengths
    if len(end) and int(end.max()) > height * width:
        raise ValueError(
            f"{source}: run-length mask runs to pixel {int(end.max())} but the image has "
            f"{height * width} ({height}×{width}); wrong rle_format ({fmt!r})?"
        )
    for b, e in zip(begin.tolist(), end.tolist()):
        flat[b:e] = 1
    return flat.reshape(width, height).T.copy()


def encode_siim_rle(mask: np.ndarray, *, fmt: str = "relative") -> str:
    """Encode a 2D mask in the SIIM column-major run-length format (inverse of
    :func:`decode_siim_rle`); an empty mask gives ``"-1"``."""
    flat = np.asarray(mask).T.reshape(-1) > 0
    padded = np.concatenate([[False], flat, [False]])
    changes = np.flatnonzero(padded[1:] != padded[:-1])
    begin, end = changes[0::2], changes[1::2]
    if not len(begin):
        return "-1"
    if fmt == "absolute":
        pairs = zip((begin + 1).tolist(), (end - begin).tolist())
    else:
        prev_end = np.concatenate([[0], end[:-1]])
        pairs = zip((begin - prev_end).tolist(), (end - begin).tolist())
    return " ".join(f"{a} {b}" for a, b in pairs)
