"""Pictures for the run page: any image a loader returns shown as 8-bit, label maps drawn over it
(filled at 40 % and outlined), reference-versus-prediction error maps, PNG bytes."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

__all__ = ["to_display", "thumbnail", "png_bytes", "overlay", "error_map", "PALETTE", "class_color"]

#: label colours (RGB) for classes 1, 2, …; class k > len uses PALETTE[(k-1) % len]
PALETTE = np.array([
    (230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
    (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212), (0, 128, 128), (220, 190, 255),
    (170, 110, 40), (255, 250, 200), (128, 0, 0), (170, 255, 195), (128, 128, 0), (255, 215, 180),
    (0, 0, 128), (128, 128, 128),
], dtype=np.uint8)
_MISSED = np.array((0, 200, 255), dtype=np.uint8)  # in the reference, not predicted
_EXTRA = np.array((255, 60, 60), dtype=np.uint8)  # predicted, not in the reference


def class_color(label: int) -> tuple[int, int, int]:
    """RGB colour of label value ``label`` (>= 1)."""
    return tuple(int(c) for c in PALETTE[(int(label) - 1) % len(PALETTE)])  # type: ignore[return-value]


def to_display(image: Any) -> np.ndarray:
    """``image`` (tensor or array; ``(H, W)``, ``(C, H, W)`` channel-first or ``(H, W, C)``;
    float or integer) as ``uint8`` ``(H, W)`` or ``(H, W, 3)``: floats in [0, 1] scaled by 255,
    anything else windowed to its 1st–99th percentile. Volumes show their middle slice."""
    if hasattr(image, "detach"):
        image = image.detach().cpu().numpy()
    a = np.asarray(image)
    if a.ndim == 4:  # (C, X, Y, Z): the middle slice of the last axis
        a = a[..., a.shape[-1] // 2]
    if a.ndim == 3 and a.shape[-1] in (1, 3, 4) and a.shape[0] > 4:  # (H, W, C)
        a = a[..., :3] if a.shape[-1] >= 3 else a[..., 0]
    elif a.ndim == 3:  # (C, H, W): RGB when three channels, else the first (one MR sequence…)
        a = np.moveaxis(a, 0, -1) if a.shape[0] == 3 else a[0]
    if a.ndim != 2 and not (a.ndim == 3 and a.shape[-1] == 3):
        raise ValueError(f"cannot show an image of shape {np.asarray(image).shape}")
    if a.dtype == np.uint8:
        return a
    f = a.astype(np.float64)
    finite = f[np.isfinite(f)]
    if finite.size and finite.min() >= 0.0 and finite.max() <= 1.0 + 1e-6 and a.dtype.kind == "f":
        lo, hi = 0.0, 1.0
    elif finite.size:
        lo, hi = np.percentile(finite, [1, 99])
        if not hi > lo:
            lo, hi = float(finite.min()), float(finite.max()) + 1e-6
    else:
        lo, hi = 0.0, 1.0
    return np.clip(np.rint((np.nan_to_num(f, nan=lo) - lo) / (hi - lo) * 255.0), 0, 255).astype(np.uint8)


def thumbnail(a: np.ndarray, max_side: int, *, labels: bool = False) -> np.ndarray:
    """``a`` shrunk so its longest side is at most ``max_side`` (area averaging for images,
    nearest neighbour for label maps)."""
    h, w = a.shape[:2]
    if max(h, w) <= max_side:
        return a
    from PIL import Image

    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    resample = Image.NEAREST if labels else Image.BOX
    return np.asarray(Image.fromarray(a).resize(size, resample))


def png_bytes(a: np.ndarray, *, min_side: int = 0) -> bytes:
    """PNG of a ``uint8`` ``(H, W)`` or ``(H, W, 3)`` array; enlarged by an integer factor
    (nearest neighbour) until its longest side is at least ``min_side``."""
    from PIL import Image

    a = np.ascontiguousarray(a)
    if min_side and max(a.shape[:2]) < min_side:
        f = -(-min_side // max(a.shape[:2]))
        a = np.repeat(np.repeat(a, f, axis=0), f, axis=1)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _rgb(gray: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
    if gray is None or gray.shape[:2] != shape[:2]:
        return np.zeros((*shape[:2], 3), dtype=np.uint8)
    return np.repeat(gray[..., None], 3, axis=2) if gray.ndim == 2 else gray.copy()


def _edges(mask: np.ndarray) -> np.ndarray:
    """Pixels of ``mask`` with a 4-neighbour outside it."""
    m = np.pad(mask, 1)
    inner = m[1:-1, 1:-1] & m[:-2, 1:-1] & m[2:, 1:-1] & m[1:-1, :-2] & m[1:-1, 2:]
    return mask & ~inner


def overlay(gray: np.ndarray | None, labels: np.ndarray, *, alpha: float = 0.4) -> np.ndarray:
    """``labels`` (label values, 0 = background) drawn over ``gray``: each class filled at
    ``alpha`` in its :func:`class_color` and outlined at full colour."""
    out = _rgb(gray, labels.shape).astype(np.float32)
    for value in np.unique(labels):
        if value == 0:
            continue
        mask = labels == value
        color = np.asarray(class_color(int(value)), dtype=np.float32)
        out[mask] = (1 - alpha) * out[mask] + alpha * color
        out[_edges(mask)] = color
    return np.clip(out, 0, 255).astype(np.uint8)


def error_map(gray: np.ndarray | None, reference: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Where the prediction is wrong: cyan = in the reference but labelled otherwise (missed or
    another class), red = predicted foreground where the reference has another label."""
    out = _rgb(gray, reference.shape)
    out = (out.astype(np.float32) * 0.6).astype(np.uint8)  # dimmed so the errors stand out
    wrong = reference != prediction
    out[wrong & (reference > 0)] = _MISSED
    out[wrong & (reference == 0) & (prediction > 0)] = _EXTRA
    return out
