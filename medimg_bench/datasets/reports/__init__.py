"""Radiology report generation datasets: IU X-ray (OpenI), MIMIC-CXR reports and ReXGradient-160K.

Samples: ``id`` (the study), ``image`` (float ``C×H×W`` in ``[0, 1]``; a list of views with
``views="all"``), ``report`` (the chosen section text, whitespace collapsed) and ``meta`` with
``patient_id``, ``study_id``, ``view`` (or ``views``), ``findings``, ``impression``.
:func:`parse_report_sections` splits free-text reports into their sections.
"""

from __future__ import annotations

from medimg_bench.datasets.reports.base import (
    ReportDataset,
    parse_report_sections,
    select_report_text,
)
from medimg_bench.datasets.reports.iu_xray import iu_xray
from medimg_bench.datasets.reports.mimic_cxr_reports import mimic_cxr_reports
from medimg_bench.datasets.reports.rexgradient import rexgradient

__all__ = [
    "ReportDataset",
    "iu_xray",
    "mimic_cxr_reports",
    "parse_report_sections",
    "rexgradient",
    "select_report_text",
]
