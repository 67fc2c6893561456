"""The ``mimic_cxr_reports`` dataset. MIMIC-CXR free-text reports (``files/p10/p10000032/s50414267.txt``, PhysioNet
``mimic-cxr-reports``), sections parsed by :func:`parse_report_sections`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.reports.base import (
    ReportDataset,
    check_options,
    last_paragraph,
    parse_report_sections,
    select_report_text,
)
from medimg_bench.registry import register_dataset

__all__ = ["mimic_cxr_reports"]

log = logging.getLogger(__name__)


# -- MIMIC-CXR reports --------------------------------------------------------------------------

_FRONTAL = ("PA", "AP")


def _find_csv(folders: list[Path], stem: str) -> Path | None:
    for folder in folders:
        for suffix in (".csv", ".csv.gz"):
            if (folder / f"{stem}{suffix}").exists():
                return folder / f"{stem}{suffix}"
    return None


@register_dataset("mimic_cxr_reports", tags=("report", "cxr"))
def mimic_cxr_reports(
    root: str | Path,
    split: str = "test",
    *,
    jpg_root: str | Path | None = None,
    section: str = "findings",
    views: str = "frontal",
    fallback_last_paragraph: bool = False,
    drop_empty: bool = True,
    transform: Callable[[dict], dict] | None = None,
) -> ReportDataset:
    """MIMIC-CXR free-text reports (``files/p10/p10000032/s50414267.txt``, PhysioNet
    ``mimic-cxr-reports``), sections parsed by :func:`parse_report_sections`.

    ``jpg_root``: the MIMIC-CXR-JPG folder; its ``mimic-cxr-2.0.0-split.csv(.gz)`` gives the
    official split (``train``/``validate``/``test``; ``val`` accepted) and
    ``mimic-cxr-2.0.0-metadata.csv(.gz)`` the views, images at
    ``files/p10/p10000032/s50414267/<dicom_id>.jpg``. ``views="frontal"``: the first PA, else
    AP image; studies with no usable image are dropped (logged). Without ``jpg_root`` samples
    are text-only (no ``image``) and ``split`` must be ``all`` unless the split CSV is in
    ``root``. ``fallback_last_paragraph`` uses the last paragraph when the section is missing
    (as MIMIC-CXR's own section script does for reports without headers).
    """
    root = Path(root)
    check_options(section, views)
    jpg = Path(jpg_root) if jpg_root is not None else None
    folders = [p for p in (jpg, root) if p is not None]
    split_key = {"val": "validate", "validation": "validate"}.get(split, split)
    study_split = _study_splits(folders, split, split_key)
    images = _study_images(jpg) if jpg is not None else None
    report_files = sorted((root / "files").glob("p*/p*/s*.txt"))
    if not report_files:
        raise FileNotFoundError(f"mimic_cxr_reports: no files/pXX/pXXXXXXXX/sXXXXXXXX.txt under {str(root)!r}")
    rows, dropped_empty, dropped_images = [], 0, 0
    for f in report_files:
        study, subject = f.stem[1:], f.parent.name[1:]
        if study_split is not None and split_key != "all" and study_split.get(study) != split_key:
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        sections = parse_report_sections(text)
        report = select_report_text(sections, section)
        if report is None and fallback_last_paragraph:
            report = last_paragraph(text)
        if not report:
            if not drop_empty:
                raise ValueError(f"mimic_cxr_reports: {str(f)!r} has no {section} section")
            dropped_empty += 1
            continue
        row: dict[str, Any] = {
            "id": f"s{study}",
            "patient_id": subject,
            "study_id": study,
            "report": report,
            "findings": sections["findings"],
            "impression": sections["impression"],
            "indication": sections.get("indication"),
            "report_path": str(f.relative_to(root)),
            "split": study_split.get(study, "unknown") if study_split else "all",
            "modality": "CR",
        }
        if images is not None and not _attach_images(row, images.get(study, []), views=views):
            dropped_images += 1
            continue
        rows.append(row)
    if dropped_empty:
        log.warning("mimic_cxr_reports: dropped %d reports with no %s text", dropped_empty, section)
    if dropped_images:
        log.warning("mimic_cxr_reports: dropped %d studies with no %s image", dropped_images, views)
    if not rows:
        raise ValueError(f"mimic_cxr_reports: no reports left for split {split!r} under {str(root)!r}")
    return ReportDataset(
        pd.DataFrame(rows),
        root=root,
        multi_view=views == "all" and images is not None,
        meta_columns=("findings", "impression", "indication", "views", "report_path"),
        transform=transform,
        name="mimic_cxr_reports",
    )


def _study_splits(folders: list[Path], split: str, split_key: str) -> dict[str, str] | None:
    """Study id -> official split from ``mimic-cxr-2.0.0-split.csv(.gz)``; None without it
    (only allowed for ``split='all'``)."""
    study_split: dict[str, str] | None = None
    split_csv = _find_csv(folders, "mimic-cxr-2.0.0-split")
    if split_csv is not None:
        table = pd.read_csv(split_csv, dtype=str)
        study_split = dict(zip(table["study_id"], table["split"]))
    elif split_key != "all":
        raise FileNotFoundError(
            f"mimic_cxr_reports: split {split!r} needs mimic-cxr-2.0.0-split.csv(.gz) in "
            f"{[str(f) for f in folders]}; use split='all' otherwise"
        )
    return study_split


def _study_images(jpg: Path) -> dict[str, list[tuple[str, str]]]:
    """Study id -> [(absolute JPG path, ViewPosition)] from MIMIC-CXR-JPG's metadata CSV."""
    meta_csv = _find_csv([jpg], "mimic-cxr-2.0.0-metadata")
    if meta_csv is None:
        raise FileNotFoundError(f"mimic_cxr_reports: no mimic-cxr-2.0.0-metadata.csv(.gz) in {str(jpg)!r}")
    meta = pd.read_csv(meta_csv, dtype=str, keep_default_na=False)
    images: dict[str, list[tuple[str, str]]] = {}
    for dicom, subject, study, view in zip(
        meta["dicom_id"], meta["subject_id"], meta["study_id"], meta["ViewPosition"]
    ):
        rel = f"files/p{subject[:2]}/p{subject}/s{study}/{dicom}.jpg"
        images.setdefault(study, []).append((str((jpg / rel).resolve()), view))
    return images


def _attach_images(row: dict[str, Any], study_images: list[tuple[str, str]], *, views: str) -> bool:
    """Put the study's image(s) into ``row``; False when it has none usable for ``views``."""
    if views == "frontal":
        ranked = sorted(
            (i for i in study_images if i[1] in _FRONTAL), key=lambda i: _FRONTAL.index(i[1])
        )
        if not ranked:
            return False
        row["image_path"], row["view"] = ranked[0]
    else:
        if not study_images:
            return False
        row["image_path"] = [p for p, _ in study_images]
        row["views"] = [v for _, v in study_images]
    return True
