"""The evaluation toolbox of Fan et al. (Inf-Net ``EvaluationTool/main.m``, PraNet ``eval/``) as a
named convention: ``metrics=sod_toolbox``.

What the toolbox does, per image: the map's first channel through ``im2double`` (8-bit / 255,
16-bit / 65535, 1-bit 0/1), **min-max normalised per image** (MATLAB ``mapminmax``; a constant map
is left as it is); the GT binary (``> 128`` for 8-bit masks; the dataset readers apply that
rule). At each of the 256 thresholds of ``1:-1/255:0`` (as MATLAB's colon operator builds them,
:func:`matlab_thresholds`) a pixel is positive when ``map >= t``, and **Dice, IoU, sensitivity,
specificity and precision are all 0 whenever TP = 0** — even for an empty prediction on an
empty mask. ``mean_*`` is the mean over the 256 thresholds (of the per-image values: the
toolbox's mean over thresholds of the mean over images is the same number), ``max_*`` the
maximum over thresholds of the mean over images (dataset-level: :class:`SODToolboxMax`),
``adaptive_*`` the single threshold ``2 * mean(map)`` (capped at 1 for Dice; not capped for the
E-measure). The E-measure (IJCAI 2018) binarises with ``map > t`` in the published version
(``inf_net_2020_06``, main.m up to commit 4a75db7, 2020-06-28) and with ``map >= t`` from commit
e723632 (2020-11-21, ``inf_net_2020_11``, the repository's head). ``s_measure`` is the structure
measure (ICCV 2017, alpha 0.5), ``weighted_f_measure`` ``original_WFb.m`` (CVPR 2014, beta 1),
``mae`` the mean absolute error of the normalised map. See ``docs/metrics.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics import _sod_core as core
from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = [
    "SOD_MEASURES",
    "SOD_CURVES",
    "SOD_VERSIONS",
    "SodToolboxVersion",
    "matlab_thresholds",
    "sod_normalize",
    "sod_curves",
    "sod_image_scores",
    "sod_toolbox",
    "SODToolbox",
    "SODToolboxMax",
]

matlab_thresholds = core.matlab_thresholds


@dataclass(frozen=True)
class SodToolboxVersion:
    """One version of the toolbox's rules."""

    name: str
    commit: str
    date: str
    e_measure_strict: bool  # the E-measure binarises with map > t (True) or map >= t
    note: str


SOD_VERSIONS: dict[str, SodToolboxVersion] = {
    "inf_net_2020_06": SodToolboxVersion(
        "inf_net_2020_06", "4a75db7", "2020-06-28", True,
        "Inf-Net EvaluationTool/main.m up to 4a75db7 (PraNet eval/ 5393c5a): the published tables"),
    "inf_net_2020_11": SodToolboxVersion(
        "inf_net_2020_11", "e723632", "2020-11-21", False,
        "Inf-Net main.m from e723632 (PraNet eval/ 5a02cc8), the repositories' head"),
}
_ALIASES = {"published": "inf_net_2020_06", "head": "inf_net_2020_11"}

#: per-image values (one column each in the sample table)
SOD_MEASURES = ("mean_dice", "adaptive_dice", "mean_iou", "mean_sensitivity", "mean_specificity",
                "s_measure", "mean_e_measure", "adaptive_e_measure", "weighted_f_measure", "mae")
#: curves over the 256 thresholds (``max_<curve>`` is the maximum of their mean over images)
SOD_CURVES = ("dice", "iou", "sensitivity", "specificity", "precision", "f1", "e_measure")
_LOWER_IS_BETTER = {"mae"}


def get_version(version: str | SodToolboxVersion) -> SodToolboxVersion:
    """The :class:`SodToolboxVersion` called ``version`` (or ``published`` / ``head``)."""
    if isinstance(version, SodToolboxVersion):
        return version
    key = _ALIASES.get(version, version)
    if key not in SOD_VERSIONS:
        raise ValueError(f"unknown sod_toolbox version {version!r}; expected one of "
                         f"{sorted(SOD_VERSIONS)} or {sorted(_ALIASES)}")
    return SOD_VERSIONS[key]


def _first_channel(pred: Any, name: str) -> np.ndarray:
    a = pred.detach().cpu().numpy() if isinstance(pred, torch.Tensor) else np.asarray(pred)
    if a.ndim == 3 and a.shape[0] in (1, 3, 4) and a.shape[-1] not in (1, 3, 4):
        a = a[0]  # channel-first: the first channel, as the toolbox takes
    elif a.ndim == 3:
        a = a[..., 0]
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"{name}: expected one 2-D map, got shape {a.shape}")
    return a


_CODE_SCALE = {np.dtype(np.bool_): 1.0, np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0}


@dataclass
class _Map:
    """A normalised map ``y``; for integer maps also the codes and ``y`` of each code."""

    y: np.ndarray
    codes: np.ndarray | None = None
    lut: np.ndarray | None = None


def _prepare(pred: Any, *, name: str = "pred") -> _Map:
    """``im2double`` (8-bit / 255, 16-bit / 65535, 1-bit 0/1, float as is) and ``mapminmax``."""
    a = _first_channel(pred, name)
    scale = _CODE_SCALE.get(a.dtype)
    if scale is not None:
        codes = a.astype(np.intp)
        values = np.arange(int(scale) + 1, dtype=np.float64) / scale
        lo, hi = int(codes.min()), int(codes.max())
        lut = core.mapminmax01(values[lo:hi + 1])
        # mapminmax of the present range equals mapminmax of the image (same min and max)
        full = np.zeros(int(scale) + 1)
        full[lo:hi + 1] = lut
        return _Map(full[codes], codes, full)
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name}: maps must be bool, uint8, uint16 or float, got {a.dtype}")
    out = a.astype(np.float64)
    if not np.isfinite(out).all():
        raise ValueError(f"{name}: NaN or inf in the map")
    return _Map(core.mapminmax01(out))


def _as_gt(target: Any, shape: tuple[int, ...], *, name: str = "target") -> np.ndarray:
    t = target.detach().cpu().numpy() if isinstance(target, torch.Tensor) else np.asarray(target)
    if t.ndim == 3 and t.shape[0] == 1:
        t = t[0]
    if t.shape != shape:
        raise ValueError(f"{name}: mask shape {t.shape} differs from the map's {shape}")
    if t.dtype == np.bool_:
        return t
    if np.issubdtype(t.dtype, np.floating) and not np.isfinite(t).all():
        raise ValueError(f"{name}: NaN or inf in the mask")
    values = np.unique(t)
    if not np.isin(values, (0, 1)).all():
        raise ValueError(f"{name}: the toolbox scores one foreground class: mask values must be 0/1 "
                         f"(label map) or bool, got {values[:6].tolist()} (pick one class with the "
                         "dataset's `class` option; 8-bit 0/255 masks are read as GT > 128)")
    return t.astype(bool)


def sod_normalize(pred: Any) -> np.ndarray:
    """The map as the toolbox scores it: ``im2double`` then per-image ``mapminmax`` to [0, 1]
    (float64 ``H x W``)."""
    return _prepare(pred).y


def _histograms(m: _Map, gt: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    if m.codes is None:
        return core.level_histograms(m.y, gt, strict=strict)
    n_codes = m.lut.size
    per_code = np.bincount(m.codes.reshape(-1) + n_codes * gt.reshape(-1), minlength=2 * n_codes)
    levels = core.threshold_levels(m.lut, strict=strict)
    fg = np.bincount(levels, weights=per_code[n_codes:], minlength=core.N_THRESHOLDS + 1)
    bg = np.bincount(levels, weights=per_code[:n_codes], minlength=core.N_THRESHOLDS + 1)
    return fg, bg


def _curves(m: _Map, gt: np.ndarray, version: SodToolboxVersion) -> dict[str, np.ndarray]:
    n, n_gt = float(gt.size), float(gt.sum())
    fg, bg = _histograms(m, gt, strict=False)
    tp = core.positives_per_threshold(fg)
    n_pred = tp + core.positives_per_threshold(bg)
    out = core.fmeasure_counts(tp, n_pred, n_gt, n)
    if version.e_measure_strict:
        fg, bg = _histograms(m, gt, strict=True)
        tp = core.positives_per_threshold(fg)
        n_pred = tp + core.positives_per_threshold(bg)
    out["e_measure"] = core.emeasure_counts(n_pred, tp, n_gt, n)
    return out


def sod_curves(pred: Any, target: Any, *, version: str = "published") -> dict[str, np.ndarray]:
    """Per-threshold values of one image: ``{curve: (256,) float64}`` for the names in
    :data:`SOD_CURVES`, thresholds in the toolbox's order (1 down to 0)."""
    v = get_version(version)
    m = _prepare(pred)
    return _curves(m, _as_gt(target, m.y.shape), v)


def _adaptive(y: np.ndarray, gt: np.ndarray, version: SodToolboxVersion) -> tuple[float, float]:
    threshold = 2 * core.mean2(y)
    capped = min(threshold, 1.0)  # Fmeasure_calu caps the threshold at 1, the E-measure does not
    pred = y >= capped
    tp = np.array([float((pred & gt).sum())])
    dice = core.fmeasure_counts(tp, np.array([float(pred.sum())]), float(gt.sum()), float(gt.size))["dice"]
    fm = y > threshold if version.e_measure_strict else y >= threshold
    return float(dice[0]), core.emeasure_binary(fm, gt)


def _scalars(y: np.ndarray, gt: np.ndarray, v: SodToolboxVersion, want: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    if "adaptive_dice" in want or "adaptive_e_measure" in want:
        out["adaptive_dice"], out["adaptive_e_measure"] = _adaptive(y, gt, v)
    if "s_measure" in want:
        out["s_measure"] = core.s_measure(y, gt)
    if "weighted_f_measure" in want:
        out["weighted_f_measure"] = core.weighted_f_measure(y, gt)
    if "mae" in want:
        out["mae"] = core.mean2(np.abs(gt.astype(np.float64) - y))
    return out


def sod_image_scores(pred: Any, target: Any, *, version: str = "published",
                     measures: Iterable[str] | None = None) -> dict[str, float]:
    """The toolbox's per-image values (:data:`SOD_MEASURES`, or the ``measures`` asked for) of
    one map against one mask; ``mae`` in [0, 1], all others higher-is-better in [0, 1] (NaN:
    ``s_measure`` with an empty quadrant, ``weighted_f_measure`` with an empty mask)."""
    v = get_version(version)
    want = tuple(measures) if measures is not None else SOD_MEASURES
    bad = [m for m in want if m not in SOD_MEASURES]
    if bad:
        raise ValueError(f"sod_toolbox: unknown measure(s) {bad}; expected {SOD_MEASURES}")
    prepared = _prepare(pred)
    y = prepared.y
    gt = _as_gt(target, y.shape)
    out: dict[str, float] = {}
    if any(m.startswith("mean_") for m in want):
        curves = _curves(prepared, gt, v)
        for m in want:
            if m.startswith("mean_"):
                out[m] = float(curves[m[5:]].mean())
    out.update(_scalars(y, gt, v, want))
    return {m: out[m] for m in want}


def sod_toolbox(preds: Sequence[Any], targets: Sequence[Any], *, version: str = "published") -> dict[str, float]:
    """The toolbox's summary of a set of images, as ``main.m`` prints it: ``mean_<x>`` and
    ``max_<x>`` of each curve (mean over thresholds / maximum over thresholds of the mean over
    images) and the mean over images of ``s_measure``, ``weighted_f_measure``, ``mae`` and the
    adaptive scores."""
    if not len(preds) or len(preds) != len(targets):
        raise ValueError(f"sod_toolbox: {len(preds)} maps and {len(targets)} masks (empty, or the lengths differ)")
    curves: dict[str, list[np.ndarray]] = {c: [] for c in SOD_CURVES}
    rows: dict[str, list[float]] = {m: [] for m in SOD_MEASURES if not m.startswith("mean_")}
    v = get_version(version)
    for i, (p, t) in enumerate(zip(preds, targets)):
        m = _prepare(p, name=f"pred {i}")
        gt = _as_gt(t, m.y.shape, name=f"target {i}")
        for c, values in _curves(m, gt, v).items():
            curves[c].append(values)
        for name, value in _scalars(m.y, gt, v, tuple(rows)).items():
            rows[name].append(value)
    out: dict[str, float] = {}
    for c, values in curves.items():
        column = np.mean(np.stack(values), axis=0)
        out[f"mean_{c}"] = float(column.mean())
        out[f"max_{c}"] = float(column.max())
    for m, values in rows.items():
        out[m] = float(np.mean(values))
    return out


def _maps_and_masks(preds: Any, targets: Any, name: str) -> list[tuple[Any, Any]]:
    """Split a batch (``(B, H, W)`` tensors or lists of ``(H, W)``) into per-sample pairs."""
    p = list(preds) if isinstance(preds, list | tuple) or getattr(preds, "ndim", 0) >= 3 else [preds]
    t = list(targets) if isinstance(targets, list | tuple) or getattr(targets, "ndim", 0) >= 3 else [targets]
    if not p:
        raise ValueError(f"{name}: empty batch (no maps)")
    if len(p) != len(t):
        raise ValueError(f"{name}: {len(p)} maps and {len(t)} masks: the lengths differ")
    return list(zip(p, t))


def _check_classes(name: str, num_classes: int | None, include_background: bool) -> None:
    if num_classes is not None and (num_classes != 2 or include_background):
        raise ValueError(f"{name}: the toolbox scores one foreground class against background; the "
                         f"dataset has {num_classes} classes (pick one with the dataset's `class` "
                         "option)")


class SODToolbox(Metric):
    """The toolbox's per-image values (see the module docstring): one column per measure in the
    sample table, each summarised (mean, bootstrap CI over images) by the engine.

    Options: ``version`` (``published`` = ``inf_net_2020_06`` or ``head`` = ``inf_net_2020_11``),
    ``measures`` (a subset of :data:`SOD_MEASURES`).
    """

    name = "sod_toolbox"
    per_sample = True
    higher_is_better = True
    directions = MappingProxyType({"mae": False})  # the mean absolute error of the map: lower is better
    value_range = (0.0, 1.0)  # every measure is a share, a similarity in [0, 1] or an error of [0, 1] maps
    input_kind = "prob_maps"
    concat_updates = True

    def __init__(self, *, version: str = "published", measures: Sequence[str] | None = None,
                 num_classes: int | None = None, include_background: bool = False,
                 class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=class_names)
        _check_classes(self.name, num_classes, include_background)
        self.version = get_version(version)
        names = tuple(measures) if measures else SOD_MEASURES
        bad = [m for m in names if m not in SOD_MEASURES]
        if bad:
            raise ValueError(f"sod_toolbox: unknown measure(s) {bad}; expected {SOD_MEASURES}")
        self.metric_names = names
        self.add_state("scores", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *,
               ids: Sequence[str] | None = None) -> None:
        """Score a batch of maps (``(B, H, W)`` or a list of ``(H, W)``, any of bool / uint8 /
        uint16 / float in [0, 1]) against binary masks of the same sizes."""
        pairs = _maps_and_masks(preds, targets, self.name)
        rows = []
        for i, (p, t) in enumerate(pairs):
            sid = ids[i] if ids is not None and i < len(ids) else str(i)
            try:
                s = sod_image_scores(p, t, version=self.version.name, measures=self.metric_names)
            except ValueError as exc:
                raise ValueError(f"{self.name}: sample {sid!r}: {exc}") from None
            rows.append([s[m] for m in self.metric_names])
        self._add_ids(ids, len(pairs))
        self.scores.append(torch.tensor(rows, dtype=torch.float64).reshape(len(pairs), len(self.metric_names)))

    def metric_values(self) -> dict[str, tuple[list[str], torch.Tensor]]:
        """Per measure: the sample ids and a ``(N, 1)`` float64 tensor."""
        table = torch.cat(self.scores) if self.scores else torch.empty(0, len(self.metric_names), dtype=torch.float64)
        ids = list(self.ids)
        return {m: (ids, table[:, j:j + 1]) for j, m in enumerate(self.metric_names)}

    def higher_is_better_of(self, name: str) -> bool:
        return name not in _LOWER_IS_BETTER

    def values(self) -> tuple[list[str], torch.Tensor]:
        return self.metric_values()[self.metric_names[0]]

    def compute(self) -> torch.Tensor:
        """Mean over images of each measure, in ``metric_names`` order (NaN-aware)."""
        if not self.ids:
            raise ValueError(f"{self.name}: compute() called before any update()")
        return torch.cat(self.scores).nanmean(0)


class SODToolboxMax(Metric):
    """``max_<curve>`` of the toolbox: the maximum over the 256 thresholds of the curve's mean
    over images (dataset-level, so its bootstrap CI resamples images and recomputes the max).

    Options: ``curve`` (one of :data:`SOD_CURVES`, default ``dice``), ``version``.
    """

    name = "sod_toolbox_max"
    per_sample = False
    higher_is_better = True
    input_kind = "prob_maps"
    concat_updates = True

    def __init__(self, *, curve: str = "dice", version: str = "published", num_classes: int | None = None,
                 include_background: bool = False, class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=class_names)
        _check_classes(self.name, num_classes, include_background)
        if curve not in SOD_CURVES:
            raise ValueError(f"sod_toolbox_max: unknown curve {curve!r}; expected one of {SOD_CURVES}")
        self.curve = curve
        self.version = get_version(version)
        self.add_state("curves", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *,
               ids: Sequence[str] | None = None) -> None:
        """Keep each image's 256-point curve."""
        pairs = _maps_and_masks(preds, targets, self.name)
        rows = []
        for i, (p, t) in enumerate(pairs):
            sid = ids[i] if ids is not None and i < len(ids) else str(i)
            try:
                rows.append(sod_curves(p, t, version=self.version.name)[self.curve])
            except ValueError as exc:
                raise ValueError(f"{self.name}: sample {sid!r}: {exc}") from None
        self._add_ids(ids, len(pairs))
        self.curves.append(torch.from_numpy(np.stack(rows)))

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.curves:
            raise ValueError(f"{self.name}: compute() called before any update()")
        curves = torch.cat(self.curves)
        return curves, torch.zeros(curves.shape[0], dtype=torch.float64)

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The maximum over thresholds of the mean curve of the images ``preds`` (``(N, 256)``)."""
        return torch.as_tensor(preds, dtype=torch.float64).mean(0).max().reshape(1)

    def compute(self) -> torch.Tensor:
        return self.functional(*self.state_arrays())


register_metric("sod_toolbox", tags=("segmentation", "sod"))(SODToolbox)
register_metric("sod_toolbox_max", tags=("segmentation", "sod"))(SODToolboxMax)
