"""Named conventions for segmentation metrics: the rules each peer library applies.

A :class:`SegConvention` says which voxels form a surface, how a percentile Hausdorff distance
combines the two directions, how a symmetric mean distance is averaged, whether NSD counts
voxels or sums surfel areas, which distance metrics it offers, and which value each metric
takes when one or both masks are empty (symmetric and, where it differs, directed). Each
convention names the implementation and commit (or release) it reproduces; ``docs/metrics.md``
carries the same rules as tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "SegConvention",
    "CONVENTIONS",
    "get_convention",
    "SEG_METRIC_NAMES",
    "DISTANCE_METRICS",
    "OPTION_USERS",
]

NAN = math.nan
INF = math.inf
#: Placeholder in an edge-case table for "the configurable empty distance" (image diagonal).
EMPTY_DISTANCE = "empty_distance"
#: Placeholder: NSD of a one-sided miss measured as MetricsReloaded's code measures it. Its
#: border-distance map of the empty mask is ``scipy.ndimage.distance_transform_edt`` of an image
#: without background, which SciPy (1.17) returns as the distance to a virtual background voxel
#: at index ``(-1, 0, ..., 0)``: the non-empty mask's border voxels within the tolerance of that
#: point count as "overlapping".
EDT_CORNER = "edt_corner"

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
#: ``distance_metric=`` values (MONAI's option name and spellings).
DISTANCE_METRICS = ("euclidean", "chessboard", "taxicab")
#: Which metrics read each option; an option given for none of the metrics asked is an error.
OPTION_USERS: dict[str, tuple[str, ...]] = {
    "percentile": ("hausdorff", "hd95"),
    "tolerance": ("nsd",),
    "directed": ("hausdorff", "hd95", "assd", "masd", "nsd"),
    "empty_distance": _DISTANCES,
    "distance_metric": ("hausdorff", "hd95", "assd", "masd", "nsd"),
    "relative": ("volume_difference",),
}


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
            mm unless ``default_empty_distance`` is set), ``"edt_corner"`` for MetricsReloaded's
            NSD of a one-sided miss (see :data:`EDT_CORNER`). ``one_empty`` may be keyed
            ``"<metric>:pred_empty"`` or ``"<metric>:target_empty"`` where the side matters.
        directed_empty: values for ``directed=True`` where they differ from the symmetric
            ones, keyed ``"<metric>:both_empty"``, ``"<metric>:pred_empty"`` or
            ``"<metric>:target_empty"``.
        distance_metrics: the ``distance_metric`` values the implementation offers.
        chamfer_in_voxels: chessboard / taxicab distances are counted in voxel steps whatever
            the spacing (MONAI's chamfer distance transform ignores its spacing).
        reference: the implementation and commit (or release) reproduced.
    """

    name: str
    surface: str
    percentile_rule: str
    assd_rule: str
    both_empty: dict[str, float | str] = field(default_factory=dict)
    one_empty: dict[str, float | str] = field(default_factory=dict)
    default_empty_distance: float | None = None
    directed_empty: dict[str, float | str] = field(default_factory=dict)
    distance_metrics: tuple[str, ...] = ("euclidean",)
    chamfer_in_voxels: bool = False
    reference: str = ""

    def empty_value(self, metric: str, *, pred_empty: bool, target_empty: bool,
                    directed: bool = False) -> float | str:
        """The convention's value for ``metric`` when a mask is empty (float or a placeholder)."""
        case = ("both_empty" if pred_empty and target_empty
                else "pred_empty" if pred_empty else "target_empty")
        if directed and f"{metric}:{case}" in self.directed_empty:
            return self.directed_empty[f"{metric}:{case}"]
        if case == "both_empty":
            return self.both_empty.get(metric, NAN)
        key = f"{metric}:{case}"
        if key in self.one_empty:
            return self.one_empty[key]
        return self.one_empty.get(metric, NAN)

    def uses_empty_distance(self, metrics: tuple[str, ...] | list[str]) -> bool:
        """Whether a one-sided miss of any of ``metrics`` takes the configurable empty distance."""
        tables = (self.one_empty, self.both_empty, self.directed_empty)
        return any(v == EMPTY_DISTANCE and k.split(":")[0] in metrics
                   for table in tables for k, v in table.items())


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

# DeepMind: a directed quantity measured *from* an empty surface is 0/0 (NaN); measured *to* an
# empty surface every distance is inf; its robust Hausdorff of no surfels is inf.
_DEEPMIND_DIRECTED = {
    "hausdorff:both_empty": INF, "hd95:both_empty": INF,
    "assd:both_empty": NAN, "masd:both_empty": NAN, "nsd:both_empty": NAN,
    "assd:pred_empty": NAN, "masd:pred_empty": NAN, "nsd:pred_empty": NAN,
    "assd:target_empty": INF, "masd:target_empty": INF, "nsd:target_empty": 0.0,
}


def _metrics_reloaded(name: str, reference: str, *, nsd_both: float, vd_both: float,
                      vd_target: float) -> SegConvention:
    """MetricsReloaded ``BinaryPairwiseMeasures``: MONAI's surfaces and percentile rule; Dice 1
    and distances 0 when both masks are empty, IoU / PPV / recall NaN there; a one-sided miss
    gives NaN distances (main: explicit; 00219d0: ``measured_distance`` raises) and the
    EDT-corner NSD."""
    return SegConvention(
        name, "edge", "directed_max", "pooled",
        {**_all(NAN), "dice": 1.0, **_all(0.0, _DISTANCES), "nsd": nsd_both,
         "volume_difference": vd_both},
        {**_DEFAULT_ONE, **_all(NAN, _DISTANCES), "nsd": EDT_CORNER,
         "precision:pred_empty": 0.0, "volume_difference:target_empty": vd_target},
        directed_empty={"nsd:pred_empty": NAN},
        reference=reference,
    )


CONVENTIONS: dict[str, SegConvention] = {
    "default": SegConvention(
        "default", "edge", "directed_max", "pooled", _all(NAN), dict(_DEFAULT_ONE),
        distance_metrics=DISTANCE_METRICS,
        reference="medimg_bench: MONAI 1.6.1's numbers with finite empty-mask values",
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
        distance_metrics=DISTANCE_METRICS,
        chamfer_in_voxels=True,
        reference="MONAI 1.6.1 (Project-MONAI/MONAI tests at d388d1c)",
    ),
    # MONAI 1.6.1 with ignore_empty=False (DiceMetric / MeanIoU / compute_dice / compute_iou):
    # an empty target scores 1 when the prediction is empty too, else 0; the rest as "monai".
    "monai_ignore_empty_false": SegConvention(
        "monai_ignore_empty_false",
        "edge",
        "directed_max",
        "pooled",
        {**_all(NAN), "dice": 1.0, "iou": 1.0},
        {
            **_DEFAULT_ONE,
            "hausdorff": INF,
            "hd95": NAN,
            "assd": INF,
            "masd": INF,
        },
        distance_metrics=DISTANCE_METRICS,
        chamfer_in_voxels=True,
        reference="MONAI 1.6.1, ignore_empty=False (Project-MONAI/MONAI tests at d388d1c)",
    ),
    # DeepMind surface-distance 0.1: 0/0 -> NaN, no surfels -> inf robust Hausdorff; our masd is
    # np.mean of its two directed averages, so (inf, nan) gives NaN.
    "deepmind": SegConvention(
        "deepmind",
        "surfel",
        "area_weighted",
        "pooled",
        {**_all(NAN), "hausdorff": INF, "hd95": INF},
        {**_DEFAULT_ONE, "hausdorff": INF, "hd95": INF, "assd": INF, "masd": NAN},
        directed_empty=dict(_DEEPMIND_DIRECTED),
        reference="google-deepmind/surface-distance 0.1 (1f805ce)",
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
        reference="loli/medpy 0.5.2 (d6abf41)",
    ),
    # MetricsReloaded main: both empty -> NSD 1 (cb38dfc, 2025-06-02); a one-sided miss ->
    # NaN distances (a805dd9, 2025-04-23); AVDR |Vp - Vr| / Vr: NaN for an empty reference.
    "metrics_reloaded": _metrics_reloaded(
        "metrics_reloaded", "Project-MONAI/MetricsReloaded main @ cb38dfc (2025-06-02)",
        nsd_both=1.0, vd_both=NAN, vd_target=NAN),
    # MetricsReloaded at 00219d0 (2024-06-06, on pull-request refs only): both empty -> NSD 0/0;
    # a one-sided miss makes measured_distance raise (np.percentile of an empty array);
    # rel_vol_error is 0 % for two empty masks and +100 % for an empty reference.
    "metrics_reloaded_00219d0": _metrics_reloaded(
        "metrics_reloaded_00219d0", "Project-MONAI/MetricsReloaded @ 00219d0 (2024-06-06)",
        nsd_both=NAN, vd_both=0.0, vd_target=1.0),
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
        reference="BraTS 2023 lesion-wise evaluation (surface-distance 0.1 surfels)",
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
