"""Radiology report generation datasets: IU X-ray (OpenI) and MIMIC-CXR reports.

Samples: ``id`` (the study), ``image`` (float ``C×H×W`` in ``[0, 1]``; a list of views with
``views="all"``), ``report`` (the chosen section text, whitespace collapsed) and ``meta`` with
``patient_id``, ``study_id``, ``view`` (or ``views``), ``findings``, ``impression``.
:func:`parse_report_sections` splits free-text reports into their sections.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.registry import register_dataset

__all__ = [
    "ReportDataset",
    "parse_report_sections",
    "select_report_text",
    "iu_xray",
    "mimic_cxr_reports",
]

log = logging.getLogger(__name__)

# headers recognised in any case; other headers are recognised only in upper case
_KNOWN_HEADERS = {
    "findings": "findings",
    "finding": "findings",
    "impression": "impression",
    "impressions": "impression",
    "conclusion": "impression",
    "conclusions": "impression",
    "findings and impression": "findings_and_impression",
    "impression and findings": "findings_and_impression",
    "findings/impression": "findings_and_impression",
    "findings / impression": "findings_and_impression",
    "indication": "indication",
    "indications": "indication",
    "history": "history",
    "clinical history": "history",
    "comparison": "comparison",
    "comparisons": "comparison",
    "technique": "technique",
    "examination": "examination",
    "exam": "examination",
    "reason for exam": "reason for exam",
    "recommendation": "recommendation",
    "recommendations": "recommendation",
    "notification": "notification",
    "wet read": "wet read",
    "addendum": "addendum",
}
_HEADER = re.compile(r"^[ \t]*([A-Za-z][A-Za-z /&()\-]{1,48}?)[ \t]*:", re.M)


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def parse_report_sections(text: str) -> dict[str, str | None]:
    """Split a free-text radiology report into sections.

    A header is a line start, a name and a colon: any of the usual section names in any case
    (``findings:``, ``IMPRESSION:``, ``Conclusion:``...) or any upper-case name of 3+ letters
    (``TECHNIQUE:``, ``WET READ:``). Returns ``{section: text}`` with lower-case keys
    (``findings``, ``impression``, ``indication``, ``comparison``, ``technique``, ...),
    whitespace collapsed; ``findings`` and ``impression`` are always present (None when absent
    or empty). A ``FINDINGS AND IMPRESSION:`` section fills both. Repeated headers are joined.
    Text before the first header is ``preamble`` (e.g. MIMIC's ``FINAL REPORT``).
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_report_sections() needs a str, got {type(text).__name__}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    marks: list[tuple[int, int, str]] = []
    for m in _HEADER.finditer(text):
        raw = _clean(m.group(1))
        key = _KNOWN_HEADERS.get(raw.lower())
        if key is None and raw.isupper() and sum(c.isalpha() for c in raw) >= 3:
            key = raw.lower()
        if key is not None:
            marks.append((m.start(), m.end(), key))
    sections: dict[str, str | None] = {}
    first = marks[0][0] if marks else len(text)
    preamble = _clean(text[:first])
    if preamble:
        sections["preamble"] = preamble
    for i, (_, end, key) in enumerate(marks):
        stop = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        body = _clean(text[end:stop])
        if not body:
            continue
        targets = ("findings", "impression") if key == "findings_and_impression" else (key,)
        for t in targets:
            sections[t] = f"{sections[t]} {body}" if sections.get(t) else body
    sections.setdefault("findings", None)
    sections.setdefault("impression", None)
    return sections


def _last_paragraph(text: str) -> str | None:
    paragraphs = [p for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]
    return _clean(paragraphs[-1]) if paragraphs else None


def select_report_text(sections: Mapping[str, str | None], section: str) -> str | None:
    """The report text for ``section``: ``findings``, ``impression`` or ``both`` (findings then
    impression, each where present). None when the asked sections are all missing."""
    if section == "both":
        parts = [sections.get("findings"), sections.get("impression")]
        parts = [p for p in parts if p]
        if len(parts) == 2 and parts[0] == parts[1]:  # "FINDINGS AND IMPRESSION:" fills both
            parts = parts[:1]
        return " ".join(parts) or None
    if section not in ("findings", "impression"):
        raise ValueError(f"section must be 'findings', 'impression' or 'both', got {section!r}")
    return sections.get(section)


class ReportDataset(ManifestDataset):
    """Report generation samples over a manifest with ``id``, ``report``, ``patient_id``,
    ``study_id`` and ``image_path`` (a path, or a list of paths with ``multi_view``; rows without
    images give text-only samples)."""

    task = "report"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None = None,
        multi_view: bool = False,
        meta_columns: tuple[str, ...] = (),
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        cols = ["image_path"] if "image_path" in manifest.columns else []
        super().__init__(manifest, root=root, path_columns=cols, transform=transform, name=name)
        self.multi_view = multi_view
        self.meta_columns = meta_columns

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.vqa import decode_image

        meta = self.meta_for(row)
        for col in self.meta_columns:
            value = row.get(col)
            if value is not None and not (isinstance(value, float) and pd.isna(value)):
                meta[col] = value
        sample: dict[str, Any] = {"id": str(row["id"]), "report": str(row["report"])}
        value = row.get("image_path")
        if isinstance(value, str) or (isinstance(value, list) and value):
            paths = [str(self.resolve(p)) for p in (value if isinstance(value, list) else [value])]
            images = [decode_image(p) for p in paths]
            sample["image"] = images if self.multi_view else images[0]
            meta["path"] = paths if self.multi_view else paths[0]
        sample["meta"] = meta
        return sample


def _check_options(section: str, views: str) -> None:
    if section not in ("findings", "impression", "both"):
        raise ValueError(f"section must be 'findings', 'impression' or 'both', got {section!r}")
    if views not in ("frontal", "all"):
        raise ValueError(f"views must be 'frontal' or 'all', got {views!r}")


# -- IU X-ray -----------------------------------------------------------------------------------


@register_dataset("iu_xray", tags=("report", "cxr"))
def iu_xray(
    root: str | Path,
    split: str = "test",
    *,
    layout: str = "auto",
    section: str = "findings",
    views: str = "frontal",
    image_dir: str | None = None,
    drop_empty: bool = True,
    transform: Callable[[dict], dict] | None = None,
) -> ReportDataset:
    """IU X-ray (Indiana University, OpenI) report generation.

    ``layout="openi"``: ``indiana_reports.csv`` (``uid``, ``findings``, ``impression``,
    ``indication``, ``MeSH``...) + ``indiana_projections.csv`` (``uid``, ``filename``,
    ``projection`` Frontal/Lateral), images in ``images/images_normalized/``; no official split,
    so ``split`` must be ``all`` (split by patient with :mod:`medimg_bench.datasets.splits`).
    ``layout="r2gen"``: ``annotation.json`` ``{"train"|"val"|"test": [{id, report, image_path,
    split}]}`` with images in ``images/`` (the R2Gen 70/10/20 split; ``report`` is the cleaned
    findings, ``section`` is ignored). ``auto`` picks the layout whose files exist.
    ``views="frontal"``: one image (first frontal view; R2Gen: first listed), ``"all"``: a list.
    """
    root = Path(root)
    _check_options(section, views)
    if layout == "auto":
        layout = "r2gen" if (root / "annotation.json").exists() else "openi"
    if layout == "r2gen":
        frame = _iu_r2gen(root, split, image_dir or "images", views)
    elif layout == "openi":
        frame = _iu_openi(root, split, image_dir or "images/images_normalized", section, views)
    else:
        raise ValueError(f"iu_xray: layout must be auto, openi or r2gen, got {layout!r}")
    empty = frame["report"].isna() | (frame["report"].astype(str).str.strip() == "")
    if empty.any():
        if not drop_empty:
            raise ValueError(
                f"iu_xray: {int(empty.sum())} studies have no {section} text, e.g. "
                f"{frame['id'][empty].iloc[0]!r} (drop_empty=True skips them)"
            )
        log.warning("iu_xray: dropped %d studies with no %s text", int(empty.sum()), section)
        frame = frame[~empty]
    return ReportDataset(
        frame,
        root=root,
        multi_view=views == "all",
        meta_columns=("findings", "impression", "indication", "mesh", "views"),
        transform=transform,
        name="iu_xray",
    )


def _iu_r2gen(root: Path, split: str, image_dir: str, views: str) -> pd.DataFrame:
    import json

    path = root / "annotation.json"
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    key = {"validate": "val", "validation": "val"}.get(split, split)
    if key not in data:
        raise ValueError(f"iu_xray: split {split!r} not in {str(path)!r} (has {list(data)})")
    rows = []
    for n, item in enumerate(data[key]):
        images = item.get("image_path") or []
        if not images or "id" not in item:
            raise ValueError(f"iu_xray: {str(path)!r} {key}[{n}]: missing id or image_path")
        sid = str(item["id"])
        paths = [f"{image_dir}/{p}" for p in images]
        rows.append(
            {
                "id": sid,
                "patient_id": sid.split("_")[0],  # "CXR2384_IM-0942" -> report CXR2384
                "study_id": sid,
                "report": _clean(str(item.get("report", ""))),
                "findings": _clean(str(item.get("report", ""))),
                "image_path": paths if views == "all" else paths[0],
                "split": key,
                "modality": "CR",
            }
        )
    return pd.DataFrame(rows)


def _iu_openi(root: Path, split: str, image_dir: str, section: str, views: str) -> pd.DataFrame:
    if split != "all":
        raise ValueError(
            "iu_xray: the OpenI layout (indiana_reports.csv) has no official split; use "
            "split='all' and a patient-level split, or the R2Gen annotation.json layout"
        )
    reports_csv, proj_csv = root / "indiana_reports.csv", root / "indiana_projections.csv"
    for f in (reports_csv, proj_csv):
        if not f.exists():
            raise FileNotFoundError(f"iu_xray: {str(f)!r} does not exist")
    reports = pd.read_csv(reports_csv, dtype=str, keep_default_na=False)
    projections = pd.read_csv(proj_csv, dtype=str, keep_default_na=False)
    for col in ("uid", "findings", "impression"):
        if col not in reports.columns:
            raise ValueError(f"iu_xray: {str(reports_csv)!r} has no column {col!r}")
    for col in ("uid", "filename", "projection"):
        if col not in projections.columns:
            raise ValueError(f"iu_xray: {str(proj_csv)!r} has no column {col!r}")
    by_uid: dict[str, list[tuple[str, str]]] = {}
    for uid, fname, proj in zip(projections["uid"], projections["filename"], projections["projection"]):
        by_uid.setdefault(uid.strip(), []).append((fname.strip(), proj.strip()))
    rows, no_images = [], 0
    for rec in reports.to_dict("records"):
        uid = rec["uid"].strip()
        images = by_uid.get(uid, [])
        if not images:
            no_images += 1
            continue
        frontal = [f for f, p in images if p.lower() == "frontal"]
        sections = {"findings": _clean(rec["findings"]) or None, "impression": _clean(rec["impression"]) or None}
        if views == "all":
            image_path: Any = [f"{image_dir}/{f}" for f, _ in images]
            view: Any = [p for _, p in images]
        else:
            image_path = f"{image_dir}/{(frontal or [images[0][0]])[0]}"
            view = "Frontal" if frontal else images[0][1]
        rows.append(
            {
                "id": uid,
                "patient_id": uid,
                "study_id": uid,
                "report": select_report_text(sections, section),
                **sections,
                "indication": _clean(rec.get("indication", "")) or None,
                "mesh": rec.get("MeSH") or None,
                "image_path": image_path,
                "view": view if isinstance(view, str) else None,
                "views": view if isinstance(view, list) else None,
                "split": "all",
                "modality": "CR",
            }
        )
    if no_images:
        log.warning("iu_xray: %d reports have no image in %s; dropped", no_images, proj_csv)
    return pd.DataFrame(rows)


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
    _check_options(section, views)
    jpg = Path(jpg_root) if jpg_root is not None else None
    folders = [p for p in (jpg, root) if p is not None]
    split_key = {"val": "validate", "validation": "validate"}.get(split, split)
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
    images: dict[str, list[tuple[str, str]]] | None = None
    if jpg is not None:
        meta_csv = _find_csv([jpg], "mimic-cxr-2.0.0-metadata")
        if meta_csv is None:
            raise FileNotFoundError(f"mimic_cxr_reports: no mimic-cxr-2.0.0-metadata.csv(.gz) in {str(jpg)!r}")
        meta = pd.read_csv(meta_csv, dtype=str, keep_default_na=False)
        images = {}
        for dicom, subject, study, view in zip(
            meta["dicom_id"], meta["subject_id"], meta["study_id"], meta["ViewPosition"]
        ):
            rel = f"files/p{subject[:2]}/p{subject}/s{study}/{dicom}.jpg"
            images.setdefault(study, []).append((str((jpg / rel).resolve()), view))
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
            report = _last_paragraph(text)
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
        if images is not None:
            study_images = images.get(study, [])
            if views == "frontal":
                ranked = sorted(
                    (i for i in study_images if i[1] in _FRONTAL), key=lambda i: _FRONTAL.index(i[1])
                )
                if not ranked:
                    dropped_images += 1
                    continue
                row["image_path"], row["view"] = ranked[0]
            else:
                if not study_images:
                    dropped_images += 1
                    continue
                row["image_path"] = [p for p, _ in study_images]
                row["views"] = [v for _, v in study_images]
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
