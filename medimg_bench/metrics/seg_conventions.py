"""Named conventions for segmentation metrics: the rules each peer library applies.

A :class:`SegConvention` says which voxels form a surface, how a percentile Hausdorff distance
combines the two directions, how a symmetric mean distance is averaged, whether NSD counts
voxels or sums surfel areas, and which value each metric takes when one or both masks are
empty. ``docs/metrics.md`` carries the same rules as a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["SegConvention", "CONVENTIONS", "get_convention", "SEG_METRIC_NAMES"]

NAN = math.nan
INF = math.inf
#: Placeholder in an edge-case table for "the configurable empty distance" (image diagonal).
EMPTY_DISTANCE = "empty_distance"

SEG_METRIC_NAMES = (
    "dice",
    "iou",
    "precision",
    "recall",
    "volume_difference",
    "hausdorff",
    "hd95",
    "assd",
    "masd",
    "nsd",
)
_DISTANCES = ("hausdorff", "hd95", "assd", "masd")


def _table(both: dict[str, float | str], one: dict[str, float | str]) -> dict[str, dict]:
    return {"both_empty": both, "one_empty": one}


@dataclass(frozen=True)
class SegConvention:
    """Rules of one convention.

    Attributes:
        name: the convention's name.
        surface: ``"edge"`` (mask voxels with a 6/4-neighbour outside the mask or the image,
            i.e. ``mask ^ binary_erosion(mask)`` with a cross structure and border value 0) or
            ``"surfel"`` (marching-cubes surface elements on the half-voxel corner grid, each
            weighted by its area in mm² or contour length in mm — DeepMind).
        percentile_rule: ``"directed_max"`` (max of the two directed linear-interpolated
            percentiles), ``"pooled"`` (one linear percentile of both directions pooled) or
            ``"area_weighted"`` (first sorted distance whose cumulative surfel area reaches the
            percentile, per direction, then the max; no interpolation).
        assd_rule: ``"pooled"`` (mean over both directions' points together) or
            ``"mean_of_means"`` (mean of the two directed means).
        both_empty / one_empty: value per metric name when both / exactly one mask is empty;
            ``"empty_distance"`` stands for the configurable empty distance (image diagonal in
            mm unless ``default_empty_distance`` is set). ``one_empty`` may be keyed ``"<metric>:pred_empty"`` or
            ``"<metric>:target_empty"`` where the side matters.
    """

    name: str
    surface: str
    percentile_rule: str
    assd_rule: str
    both_empty: dict[str, float | str] = field(default_factory=dict)
    one_empty: dict[str, float | str] = field(default_factory=dict)
    default_empty_distance: float | None = None

    def empty_value(self, metric: str, *, pred_empty: bool, target_empty: bool) -> float | str:
        """The convention's value for ``metric`` when a mask is empty (float or the placeholder)."""
        if pred_empty and target_empty:
            return self.both_empty.get(metric, NAN)
        side = "pred_empty" if pred_empty else "target_empty"
        key = f"{metric}:{side}"
        if key in self.one_empty:
            return self.one_empty[key]
        return self.one_empty.get(metric, NAN)


def _all(value: float | str, names: tuple[str, ...] = SEG_METRIC_NAMES) -> dict[str, float | str]:
    return {n: value for n in names}


_DEFAULT_ONE = {
    "dice": 0.0,
    "iou": 0.0,
    "nsd": 0.0,
    **_all(EMPTY_DISTANCE, _DISTANCES),
    # precision = TP / |pred| is undefined for an empty prediction, recall for an empty target
    "precision:pred_empty": NAN,
    "precision:target_empty": 0.0,
    "recall:pred_empty": 0.0,
    "recall:target_empty": NAN,
    "volume_difference:pred_empty": -1.0,
    "volume_difference:target_empty": NAN,
}

CONVENTIONS: dict[str, SegConvention] = {
    "default": SegConvention(
        "default", "edge", "directed_max", "pooled", _all(NAN), dict(_DEFAULT_ONE)
    ),
    # MONAI 1.6.1: DiceMetric/MeanIoU ignore_empty=True (NaN when the target is empty),
    # HD(max) and ASSD inf, HD-percentile NaN (torch.quantile of infs), NSD 0 on a one-sided miss.
    "monai": SegConvention(
        "monai",
        "edge",
        "directed_max",
        "pooled",
        _all(NAN),
        {
            **_DEFAULT_ONE,
            "dice:target_empty": NAN,
            "iou:target_empty": NAN,
            "hausdorff": INF,
            "hd95": NAN,
            "assd": INF,
            "masd": INF,
        },
    ),
    # DeepMind surface-distance 0.1: 0/0 -> NaN, no surfels -> inf robust Hausdorff.
    "deepmind": SegConvention(
        "deepmind",
        "surfel",
        "area_weighted",
        "pooled",
        {**_all(NAN), "hausdorff": INF, "hd95": INF},
        {**_DEFAULT_ONE, "hausdorff": INF, "hd95": INF, "assd": INF, "masd": INF},
    ),
    # medpy 0.5.2 pools both directions for HD95 and ASSD; it raises RuntimeError for
    # distances on an empty mask (we return NaN); dc/precision/recall return 0 on 0/0.
    "medpy": SegConvention(
        "medpy",
        "edge",
        "pooled",
        "pooled",
        {**_all(NAN), "dice": 0.0, "precision": 0.0, "recall": 0.0},
        {
            **_DEFAULT_ONE,
            **_all(NAN, _DISTANCES),
            "nsd": NAN,
            "precision:pred_empty": 0.0,
            "recall:target_empty": 0.0,
        },
    ),
    # MetricsReloaded: MONAI's surfaces and percentile rule; both empty -> distances 0 and
    # Dice/IoU 1 ("perfect prediction"), NSD 0/0 = NaN; one empty -> the distance transform
    # of an image without surface is undefined there, we use the empty distance.
    "metrics_reloaded": SegConvention(
        "metrics_reloaded",
        "edge",
        "directed_max",
        "pooled",
        {**_all(NAN), "dice": 1.0, "iou": 1.0, **_all(0.0, _DISTANCES)},
        dict(_DEFAULT_ONE),
    ),
    # BraTS 2023 lesion-wise evaluation: DeepMind surfaces and robust Hausdorff; both empty ->
    # Dice 1 / HD95 0; one empty -> Dice 0 / HD95 373.13 (the diagonal of 240x240x155 at 1 mm).
    "brats": SegConvention(
        "brats",
        "surfel",
        "area_weighted",
        "pooled",
        {
            **_all(NAN),
            "dice": 1.0,
            "iou": 1.0,
            "nsd": 1.0,
            "precision": 1.0,
            "recall": 1.0,
            "volume_difference": 0.0,
            **_all(0.0, _DISTANCES),
        },
        dict(_DEFAULT_ONE),
        default_empty_distance=373.13,
    ),
}


def get_convention(name: str | SegConvention) -> SegConvention:
    """The :class:`SegConvention` called ``name``; ``ValueError`` listing the known names."""
    if isinstance(name, SegConvention):
        return name
    try:
        return CONVENTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown segmentation convention {name!r}; expected one of {sorted(CONVENTIONS)}"
        ) from None
