"""The report dataset shared by the loaders and report-section parsing (FINDINGS / IMPRESSION)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.base import ManifestDataset

__all__ = ["parse_report_sections", "select_report_text", "ReportDataset"]

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


def clean(text: str) -> str:
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
        raw = clean(m.group(1))
        key = _KNOWN_HEADERS.get(raw.lower())
        if key is None and raw.isupper() and sum(c.isalpha() for c in raw) >= 3:
            key = raw.lower()
        if key is not None:
            marks.append((m.start(), m.end(), key))
    sections: dict[str, str | None] = {}
    first = marks[0][0] if marks else len(text)
    preamble = clean(text[:first])
    if preamble:
        sections["preamble"] = preamble
    for i, (_, end, key) in enumerate(marks):
        stop = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        body = clean(text[end:stop])
        if not body:
            continue
        targets = ("findings", "impression") if key == "findings_and_impression" else (key,)
        for t in targets:
            sections[t] = f"{sections[t]} {body}" if sections.get(t) else body
    sections.setdefault("findings", None)
    sections.setdefault("impression", None)
    return sections


def last_paragraph(text: str) -> str | None:
    paragraphs = [p for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]
    return clean(paragraphs[-1]) if paragraphs else None


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
        if self.pixels and (isinstance(value, str) or (isinstance(value, list) and value)):
            paths = [str(self.resolve(p)) for p in (value if isinstance(value, list) else [value])]
            images = [decode_image(p) for p in paths]
            sample["image"] = images if self.multi_view else images[0]
            meta["path"] = paths if self.multi_view else paths[0]
        sample["meta"] = meta
        return sample


def check_options(section: str, views: str) -> None:
    if section not in ("findings", "impression", "both"):
        raise ValueError(f"section must be 'findings', 'impression' or 'both', got {section!r}")
    if views not in ("frontal", "all"):
        raise ValueError(f"views must be 'frontal' or 'all', got {views!r}")
