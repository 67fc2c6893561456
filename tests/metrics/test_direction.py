"""Every registered metric declares its direction (``higher_is_better``: True, False or None for
signed statistics), per column for combined metrics and per statistic for agreement; the
summary writes those directions (issue #19: ``unparsed_rate`` was marked higher-is-better)."""

from __future__ import annotations

import pytest
import torch

from medimg_bench.metrics.agreement import AGREEMENT_STATS
from medimg_bench.metrics.base import Metric
from medimg_bench.metrics.seg_conventions import SEG_METRIC_NAMES
from medimg_bench.metrics.sod_toolbox import SOD_MEASURES
from medimg_bench.metrics.text.cxreasonbench import CASE_FIGURES
from medimg_bench.metrics.text.report_metrics import REPORT_NLG_COLUMNS
from medimg_bench.metrics.text.vqa_metrics import VQA_COLUMNS
from medimg_bench.metrics.video import PHASE_SUMMARY_NAMES
from medimg_bench.registry import METRICS

#: what a metric with several outputs writes (summary keys or classes); a new combined metric
#: fails ``test_every_combined_metric_lists_its_outputs`` until it is added here
OUTPUTS = {
    "segmentation": SEG_METRIC_NAMES,
    "vqa": VQA_COLUMNS,
    "report_nlg": REPORT_NLG_COLUMNS,
    "agreement": AGREEMENT_STATS,
    "phase_metrics": PHASE_SUMMARY_NAMES,
    "sod_toolbox": SOD_MEASURES,
    "box_iou_3d": ("iou", "acc@0.25", "acc@0.5", "no_box_rate"),
    "cholec80_phase": ("cholec80_jaccard_relaxed", "cholec80_precision_relaxed", "cholec80_recall_relaxed",
                       "cholec80_accuracy_relaxed"),
    "phase_frames": tuple(f"phase_{k}" for k in PHASE_SUMMARY_NAMES),
    "pitvis_phase": ("pitvis_score", "pitvis_f1", "pitvis_edit"),
    "cxreasonbench_reasoning": CASE_FIGURES,
    "moaks": ("grade_accuracy", "exact_match", "parse_failed", "complete", "box_iou", "acc@0.25", "acc@0.5"),
}

LOWER_IS_BETTER = {
    ("hausdorff", "hausdorff"), ("hd95", "hd95"), ("assd", "assd"), ("masd", "masd"),
    ("segmentation", "hausdorff"), ("segmentation", "hd95"), ("segmentation", "assd"), ("segmentation", "masd"),
    ("nmse", "nmse"), ("ece", "ece"), ("vqa", "unparsed_rate"), ("agreement", "mae"), ("agreement", "rmse"),
    ("sod_toolbox", "mae"), ("box_iou_3d", "no_box_rate"), ("moaks", "parse_failed"),
    ("verse_localisation_distance", "verse_localisation_distance"),
}
SIGNED = {
    ("volume_difference", "volume_difference"), ("segmentation", "volume_difference"),
    ("agreement", "bias"), ("agreement", "loa_low"), ("agreement", "loa_high"),
    ("cxreasonbench_reasoning", "init_idk"),
}


def _cls(name: str) -> type:
    entry = METRICS.get(name)
    return entry if isinstance(entry, type) else getattr(entry, "fn", entry)


def _directions() -> dict[tuple[str, str], bool | None]:
    out = {}
    for name in METRICS.list():
        cls = _cls(name)
        bare = cls.__new__(cls)  # no states needed: directions are class-level declarations
        for column in OUTPUTS.get(name, (name,)):
            out[(name, column)] = bare.higher_is_better_of(column)
    return out


@pytest.mark.parametrize("name", METRICS.list())
def test_every_registered_metric_declares_its_direction(name):
    cls = _cls(name)
    declared = [c for c in cls.__mro__ if c is not Metric and "higher_is_better" in vars(c)]
    assert declared, f"metric {name!r} ({cls.__name__}) inherits higher_is_better from Metric: declare it"
    assert cls.higher_is_better in (True, False, None)


def test_every_combined_metric_lists_its_outputs():
    def several(n: str) -> bool:  # a single segmentation metric has metric_values of its one name
        cls = _cls(n)
        return (cls.metric_values is not Metric.metric_values and getattr(cls, "metric_names", None) != (n,)) or \
            (cls.higher_is_better is None and not cls.per_sample)

    missing = [n for n in METRICS.list() if several(n) and n not in OUTPUTS]
    assert not missing, f"list the columns / statistics of {missing} in OUTPUTS with their directions"


def test_lower_is_better_and_signed_lists():
    d = _directions()
    assert {k for k, v in d.items() if v is False} == LOWER_IS_BETTER
    assert {k for k, v in d.items() if v is None} == SIGNED
    assert all(v in (True, False, None) for v in d.values())


def test_summary_writes_each_columns_direction():
    from medimg_bench.engine.summary import summarize
    from medimg_bench.registry import create_metric

    vqa = create_metric("vqa")
    scored = [{"correct": True, "unparsed": False}, {"correct": False, "unparsed": True}]
    vqa.update(scored, ["closed", "closed"], ids=["q1", "q2"])
    agreement = create_metric("agreement")
    agreement.update(torch.tensor([1.0, 2.0, 3.5, 4.0]), torch.tensor([1.2, 2.1, 3.0, 4.4]), ids=list("abcd"))
    summary = summarize({"vqa": vqa, "agreement": agreement}, _samples(["q1", "q2", *"abcd"]), n_resamples=20)
    m = summary["metrics"]
    assert m["unparsed_rate"]["higher_is_better"] is False  # issue #19: was True
    assert m["accuracy"]["higher_is_better"] is True
    assert m["agreement"]["higher_is_better"] is None
    assert m["agreement"]["per_class"]["mae"]["higher_is_better"] is False
    assert m["agreement"]["per_class"]["pearson"]["higher_is_better"] is True


def _samples(ids):
    import pandas as pd

    return pd.DataFrame({"id": ids, "status": "ok"})
