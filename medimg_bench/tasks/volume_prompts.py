"""Volumes as vision-language-model input: a named, documented sampling of a 3D volume into 2D
``uint8`` images (slices along an axis, or one montage), so an LVLM that reads images can be
asked about a CT or MRI volume.

A :class:`VolumeSampling` says which slices (``n_slices`` evenly spaced, or one every
``spacing_mm``, between ``start`` and ``stop``), along which axis (an anatomical plane read from
the affine, or an array axis as stored), how intensities become grey levels (a CT window
``(level, width)`` or a preset, per-volume percentiles, or min-max per slice / per volume, with
an optional clip first) and the layout (one image per slice, or one montage). Its
:meth:`~VolumeSampling.to_dict` goes into the request (``GenerationRequest.key_extra``) and so
into the response-cache key: a change of sampling never reuses an answer. Named presets are in
:data:`SAMPLINGS`; ``task.options.volume_sampling`` takes a name, or a dict of fields (with or
without ``preset`` to start from).

Slice selection: ``n_slices`` picks ``np.linspace(first, last, n).astype(int)`` — numpy's
``linspace(..., dtype=int)`` truncation, as 3DReasonKnee's own code does — where ``first`` /
``last`` are ``start`` / ``stop`` (slice indices; negative counts from the end; default the
whole axis); ``spacing_mm`` picks every slice whose offset from ``first`` is the nearest to a
multiple of ``spacing_mm`` (at most one per multiple); ``n_slices=None`` and no spacing take
every slice. Display: with an anatomical axis (``axial``, ``coronal``, ``sagittal``) the volume
is first reoriented to RAS from its affine (flips and permutations only) and each slice is shown
in radiological convention (patient right on the image left; anterior / superior up; sagittal
with anterior on the left). An integer axis slices the array as stored, with no reorientation
(3DReasonKnee's presets). Grey levels are truncated to ``uint8`` after scaling to 0–255 (as
``astype(np.uint8)`` does), a constant slice is black.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["VolumeSampling", "SAMPLINGS", "CT_WINDOWS", "resolve_sampling", "sample_volume", "volume_images"]

#: CT windows (level, width) in HU
CT_WINDOWS: dict[str, tuple[float, float]] = {
    "brain": (40.0, 80.0),
    "subdural": (75.0, 215.0),
    "abdomen": (40.0, 400.0),
    "soft_tissue": (40.0, 350.0),
    "mediastinum": (50.0, 350.0),
    "liver": (60.0, 160.0),
    "lung": (-600.0, 1500.0),
    "bone": (400.0, 1800.0),
}
_PLANES = {"sagittal": 0, "coronal": 1, "axial": 2}  # the axis fixed by each plane, in RAS order
_NORMS = ("window", "percentile", "minmax_slice", "minmax_volume")
_VERSION = 1


@dataclasses.dataclass(frozen=True)
class VolumeSampling:
    """How a volume becomes images (see the module docstring). ``window`` is a preset name of
    :data:`CT_WINDOWS` or ``(level, width)``; ``normalize`` is ``window``, ``percentile``
    (``percentiles`` of the volume's voxels map to 0 and 255), ``minmax_slice`` or
    ``minmax_volume``; ``clip`` clips the voxel values first (before a min-max)."""

    name: str = "custom"
    axis: str | int = "axial"
    n_slices: int | None = 8
    spacing_mm: float | None = None
    start: int | None = None
    stop: int | None = None
    normalize: str = "percentile"
    window: str | tuple[float, float] | None = None
    percentiles: tuple[float, float] = (0.5, 99.5)
    clip: tuple[float, float] | None = None
    layout: str = "slices"
    montage_cols: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.axis, str) and self.axis not in _PLANES:
            raise ValueError(f"volume sampling {self.name!r}: axis must be one of {list(_PLANES)} or 0/1/2, "
                             f"got {self.axis!r}")
        if isinstance(self.axis, int) and self.axis not in (0, 1, 2):
            raise ValueError(f"volume sampling {self.name!r}: array axis must be 0, 1 or 2, got {self.axis}")
        if self.n_slices is not None and int(self.n_slices) < 1:
            raise ValueError(f"volume sampling {self.name!r}: n_slices must be >= 1, got {self.n_slices}")
        if self.spacing_mm is not None and float(self.spacing_mm) <= 0:
            raise ValueError(f"volume sampling {self.name!r}: spacing_mm must be > 0, got {self.spacing_mm}")
        if self.normalize not in _NORMS:
            raise ValueError(f"volume sampling {self.name!r}: normalize must be one of {_NORMS}, "
                             f"got {self.normalize!r}")
        if self.normalize == "window" and self.window is None:
            raise ValueError(f"volume sampling {self.name!r}: normalize='window' needs a window "
                             f"(a preset of {sorted(CT_WINDOWS)} or (level, width))")
        if isinstance(self.window, str) and self.window not in CT_WINDOWS:
            raise ValueError(f"volume sampling {self.name!r}: unknown window {self.window!r}; "
                             f"presets: {sorted(CT_WINDOWS)}")
        if self.layout not in ("slices", "montage"):
            raise ValueError(f"volume sampling {self.name!r}: layout must be 'slices' or 'montage', "
                             f"got {self.layout!r}")

    def window_bounds(self) -> tuple[float, float]:
        """The ``(low, high)`` grey-level bounds of the window."""
        level, width = CT_WINDOWS[self.window] if isinstance(self.window, str) else self.window  # type: ignore[misc]
        return float(level) - float(width) / 2, float(level) + float(width) / 2

    def to_dict(self) -> dict[str, Any]:
        """Every field (JSON types) plus the rule version: what requests and cache keys record."""
        out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}
        out["v"] = _VERSION
        return out


#: named samplings (``task.options.volume_sampling=NAME``)
SAMPLINGS: dict[str, VolumeSampling] = {
    # 8 / 16 axial slices over the whole volume, CT windows
    "axial8_ct_abdomen": VolumeSampling("axial8_ct_abdomen", "axial", 8, normalize="window", window="abdomen"),
    "axial16_ct_abdomen": VolumeSampling("axial16_ct_abdomen", "axial", 16, normalize="window", window="abdomen"),
    "axial8_ct_lung": VolumeSampling("axial8_ct_lung", "axial", 8, normalize="window", window="lung"),
    "axial8_ct_brain": VolumeSampling("axial8_ct_brain", "axial", 8, normalize="window", window="brain"),
    "axial16_ct_abdomen_montage": VolumeSampling("axial16_ct_abdomen_montage", "axial", 16, normalize="window",
                                                 window="abdomen", layout="montage"),
    # one axial slice every 5 mm (CT report-generation style input), abdomen window
    "axial_5mm_ct_abdomen": VolumeSampling("axial_5mm_ct_abdomen", "axial", None, spacing_mm=5.0,
                                           normalize="window", window="abdomen"),
    # MRI: percentiles 0.5 / 99.5 of the volume
    "axial8_mr": VolumeSampling("axial8_mr", "axial", 8, normalize="percentile"),
    "sagittal8_mr": VolumeSampling("sagittal8_mr", "sagittal", 8, normalize="percentile"),
    "coronal8_mr": VolumeSampling("coronal8_mr", "coronal", 8, normalize="percentile"),
    # 3DReasonKnee (rajpurkarlab/3DReasonKnee commit bcc32ba, code/zero_shot/qwen2vl.py): every
    # slice along array axis 0, clipped to [0, 400], min-max per slice (sent as a 4 fps video)
    "reasonknee3d_video": VolumeSampling("reasonknee3d_video", 0, None, normalize="minmax_slice", clip=(0.0, 400.0)),
    # 3DReasonKnee code/zero_shot/o1.py: 32 slices np.linspace(32, 128, 32, dtype=int) along axis 0,
    # each clipped to [0, 400] and scaled by the whole (unclipped) volume's min and max
    "reasonknee3d_o1": VolumeSampling("reasonknee3d_o1", 0, 32, start=32, stop=128, normalize="minmax_volume",
                                      clip=(0.0, 400.0)),
}


def resolve_sampling(spec: str | Mapping[str, Any] | VolumeSampling | None) -> VolumeSampling | None:
    """A :class:`VolumeSampling` from a preset name, a dict of fields (``preset`` starts from a
    named one), or one itself; None stays None."""
    if spec is None or isinstance(spec, VolumeSampling):
        return spec
    if isinstance(spec, str):
        if spec not in SAMPLINGS:
            raise ValueError(f"unknown volume sampling {spec!r}; named ones: {sorted(SAMPLINGS)}")
        return SAMPLINGS[spec]
    if not isinstance(spec, Mapping):
        raise TypeError(f"volume_sampling must be a name or a dict, got {type(spec).__name__}")
    fields = dict(spec)
    base = resolve_sampling(fields.pop("preset", None)) or VolumeSampling()
    known = {f.name for f in dataclasses.fields(VolumeSampling)}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"volume_sampling: unknown field(s) {sorted(unknown)}; fields: {sorted(known)}")
    for key in ("percentiles", "clip", "window"):
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    fields.setdefault("name", "custom" if not spec.get("preset") else f"{base.name}+custom")
    return dataclasses.replace(base, **fields)


def _as_volume(volume: Any) -> np.ndarray:
    """``X×Y×Z`` float64 from a ``C×X×Y×Z`` (C = 1; channels are averaged) or ``X×Y×Z`` array/tensor."""
    if hasattr(volume, "detach"):
        volume = volume.detach().cpu().numpy()
    v = np.asarray(volume, dtype=np.float64)
    if v.ndim == 4:
        v = v.mean(0) if v.shape[0] > 1 else v[0]
    if v.ndim != 3 or min(v.shape) < 1:
        raise ValueError(f"a volume must be X×Y×Z or C×X×Y×Z, got shape {tuple(np.shape(volume))}")
    if not np.isfinite(v).all():
        raise ValueError("the volume has NaN or infinite voxels")
    return v


def _indices(depth: int, spec: VolumeSampling, step_mm: float | None) -> np.ndarray:
    first = 0 if spec.start is None else (spec.start % depth if spec.start < 0 else min(spec.start, depth - 1))
    last = depth - 1 if spec.stop is None else (spec.stop % depth if spec.stop < 0 else min(spec.stop, depth - 1))
    if last < first:
        raise ValueError(f"volume sampling {spec.name!r}: start {spec.start} is after stop {spec.stop} "
                         f"(the axis has {depth} slices)")
    if spec.spacing_mm is not None:
        if not step_mm or step_mm <= 0:
            raise ValueError(f"volume sampling {spec.name!r}: spacing_mm needs the volume's voxel spacing "
                             "(meta['spacing'] or an affine)")
        offsets = np.arange(last - first + 1) * step_mm
        picks = np.unique(np.rint(offsets / float(spec.spacing_mm)))
        return np.array([first + int(np.argmin(np.abs(offsets - k * float(spec.spacing_mm)))) for k in picks])
    if spec.n_slices is None:
        return np.arange(first, last + 1)
    return np.linspace(first, last, int(spec.n_slices)).astype(int)


def _grey(slices: np.ndarray, volume: np.ndarray, spec: VolumeSampling) -> np.ndarray:
    """``K×H×W`` slices as ``uint8`` under the sampling's intensity rule."""
    s = slices if spec.clip is None else np.clip(slices, *spec.clip)
    if spec.normalize == "minmax_slice":
        lo = s.min(axis=(1, 2), keepdims=True)
        span = s.max(axis=(1, 2), keepdims=True) - lo
    else:
        if spec.normalize == "window":
            low, high = spec.window_bounds()
        elif spec.normalize == "percentile":
            low, high = (float(x) for x in np.percentile(volume, spec.percentiles))
        else:  # minmax_volume: the whole volume's range, taken before any clip (3DReasonKnee o1)
            low, high = float(volume.min()), float(volume.max())
        if spec.normalize != "minmax_volume":
            s = np.clip(s, low, high)
        lo, span = np.float64(low), np.float64(high - low)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(span > 0, (s - lo) / np.where(span > 0, span, 1.0) * 255.0, 0.0)
    return np.clip(scaled, 0, 255).astype(np.uint8)


def _montage(images: np.ndarray, cols: int | None) -> np.ndarray:
    k, h, w = images.shape
    cols = cols or math.ceil(math.sqrt(k))
    rows = math.ceil(k / cols)
    out = np.zeros((rows * h, cols * w), dtype=np.uint8)
    for i, im in enumerate(images):
        r, c = divmod(i, cols)
        out[r * h:(r + 1) * h, c * w:(c + 1) * w] = im
    return out


def sample_volume(
    volume: Any, spec: VolumeSampling | str | Mapping[str, Any], *, affine: Any = None,
    spacing: Sequence[float] | None = None,
) -> tuple[list[np.ndarray], list[int]]:
    """The images of ``volume`` (``C×X×Y×Z`` or ``X×Y×Z``) under ``spec``: a list of ``uint8``
    ``H×W`` arrays (one per slice, or one montage) and the slice indices taken (along the
    sliced axis, after reorientation to RAS for an anatomical axis). ``affine`` (RAS voxel →
    mm) is needed for an anatomical axis; ``spacing`` (mm per array axis) for ``spacing_mm``."""
    spec = resolve_sampling(spec)  # type: ignore[assignment]
    assert spec is not None
    v = _as_volume(volume)
    spacing = tuple(float(s) for s in spacing) if spacing is not None else None
    if isinstance(spec.axis, str):
        if affine is None:
            raise ValueError(f"volume sampling {spec.name!r}: the {spec.axis} plane needs the volume's affine "
                             "(meta['affine']); use an array axis (0, 1, 2) for volumes without one")
        from medimg_bench.datasets.io import affine_spacing, reorient

        v, ras_affine = reorient(v, np.asarray(affine, dtype=np.float64), "RAS")
        spacing = affine_spacing(ras_affine)
        axis = _PLANES[spec.axis]
    else:
        axis = int(spec.axis)
    idx = _indices(v.shape[axis], spec, spacing[axis] if spacing else None)
    slices = np.moveaxis(v, axis, 0)[idx]
    if isinstance(spec.axis, str):  # radiological display: rows from anterior / superior down
        slices = slices.transpose(0, 2, 1)[:, ::-1, ::-1]
    images = _grey(np.ascontiguousarray(slices), v, spec)
    if spec.layout == "montage":
        return [_montage(images, spec.montage_cols)], idx.tolist()
    return [np.ascontiguousarray(im) for im in images], idx.tolist()


def volume_images(
    image: Any, meta: Mapping[str, Any] | None, spec: VolumeSampling, *, sample_id: str = "?",
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Images for one sample's volume and what to record (``{"volume_sampling": spec + slices}``);
    a ``ValueError`` naming the sample when the volume cannot be sampled."""
    meta = meta or {}
    try:
        images, idx = sample_volume(image, spec, affine=meta.get("affine"), spacing=meta.get("spacing"))
    except ValueError as exc:
        raise ValueError(f"sample {sample_id!r}: {exc}") from exc
    return images, {"volume_sampling": {**spec.to_dict(), "slices": idx}}
