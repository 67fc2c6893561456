"""The ``rexgradient`` dataset: ReXGradient-160K (Zhang et al. 2025, arXiv:2505.00228; Hugging Face
``rajpurkarlab/ReXGradient-160K``, gated, non-commercial) for report generation.

Layout as released (read from third-party loaders of the release, not from the card, which was
not reachable here: radharmony's ReXGradient README and harmonizer, and several training
scripts, all reading the same files):

    ROOT/metadata/{train,valid,test}_metadata_view_position.json
    ROOT/deid_png/<PatientID>/<AccessionNumber>/studies/<StudyUID>/series/<SeriesUID>/instances/<SOP>.png

(the images ship as ``deid_png.part00``…``part09``, a zstd tar to concatenate and extract). Each
JSON maps a study id to one study: ``PatientID``, ``AccessionNumber``, ``PatientSex``,
``PatientAge``, ``StudyDate``, the report sections ``Indication``, ``Comparison``, ``Findings``,
``Impression``, and per-image parallel lists ``ImagePath`` (relative to ``metadata/``, i.e.
``../deid_png/…``) and ``ImageViewPosition`` (PA, AP, LATERAL, LL, …). ``split``: ``train``,
``valid`` (or ``val``) or ``test`` (the public test; ReXrank's private test is not released).

One sample per study: ``report`` is ``section`` (``findings`` — ReXrank's findings-generation
task —, ``impression`` or ``both``), ``views="frontal"`` the first PA/AP image (studies without
one are dropped with a count), ``"all"`` every image; ``meta`` has the four sections, the view
positions, sex and age. Empty / ``"None"`` sections count as missing; studies without the asked
text are dropped with a logged count (``drop_empty=False``: an error). Report metrics:
``task=report`` with the report metrics (docs/reports.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.reports.base import ReportDataset, select_report_text
from medimg_bench.registry import register_dataset

__all__ = ["rexgradient"]

log = logging.getLogger(__name__)

_SPLITS = {"train": "train", "valid": "valid", "val": "valid", "validation": "valid", "test": "test"}
_FRONTAL = ("PA", "AP", "POSTERO_ANTERIOR")
_SECTIONS = ("Indication", "Comparison", "Findings", "Impression")


def _section(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    text = " ".join(str(value).split())
    return None if not text or text.lower() in ("none", "nan") else text


def _image(path: str) -> str:
    """An ``ImagePath`` entry relative to ROOT (``../deid_png/x`` → ``deid_png/x``)."""
    p = str(path).replace("\\", "/")
    return p[3:] if p.startswith("../") else p


def _study(key: str, entry: Any, *, section: str, views: str, where: Path) -> dict[str, Any] | str:
    """The manifest row of one study, or why it is skipped (``"no_frontal"`` / ``"empty"``)."""
    if not isinstance(entry, dict):
        raise ValueError(f"rexgradient: {str(where)!r} study {key!r}: expected an object, got {type(entry).__name__}")
    paths = entry.get("ImagePath") or []
    positions = entry.get("ImageViewPosition") or [None] * len(paths)
    if isinstance(paths, str) or len(positions) != len(paths):
        raise ValueError(f"rexgradient: {str(where)!r} study {key!r}: ImagePath and ImageViewPosition must be "
                         f"lists of equal length, got {paths!r} and {positions!r}")
    sections = {s.lower(): _section(entry.get(s)) for s in _SECTIONS}
    report = select_report_text(sections, section)
    if not report:
        return "empty"
    if views == "frontal":
        frontal = [p for p, v in zip(paths, positions) if str(v).upper() in _FRONTAL]
        if not frontal:
            return "no_frontal"
        image: Any = _image(frontal[0])
    else:
        image = [_image(p) for p in paths] or None
    return {"id": str(key), "patient_id": str(entry.get("PatientID") or key), "study_id": str(key),
            "accession_number": entry.get("AccessionNumber"), "image_path": image, "report": report,
            **sections, "views": [str(v) for v in positions], "sex": _section(entry.get("PatientSex")),
            "age": _section(entry.get("PatientAge")), "study_date": _section(entry.get("StudyDate"))}


@register_dataset("rexgradient", tags=("report", "cxr"))
def rexgradient(
    root: str | Path,
    split: str = "test",
    *,
    section: str = "findings",
    views: str = "frontal",
    drop_empty: bool = True,
    transform: Callable[[dict], dict] | None = None,
) -> ReportDataset:
    """ReXGradient-160K studies of ``split`` in the release layout (module docstring). Returns a
    :class:`ReportDataset` (multi-view with ``views="all"``)."""
    root = Path(root)
    if split not in _SPLITS:
        raise ValueError(f"rexgradient: split must be one of {sorted(_SPLITS)}, got {split!r}")
    if views not in ("frontal", "all"):
        raise ValueError(f"rexgradient: views must be 'frontal' or 'all', got {views!r}")
    path = root / "metadata" / f"{_SPLITS[split]}_metadata_view_position.json"
    if not path.is_file():
        raise FileNotFoundError(f"rexgradient: no {path.relative_to(root)} under {str(root)!r} "
                                "(the Hugging Face release rajpurkarlab/ReXGradient-160K)")
    try:
        studies = json.loads(path.read_text(encoding="utf-8-sig"), parse_constant=lambda c: None)
    except (OSError, ValueError) as exc:
        raise ValueError(f"rexgradient: cannot read {str(path)!r}: {exc}") from exc
    if not isinstance(studies, dict):
        raise ValueError(f"rexgradient: {str(path)!r} must map study ids to studies")
    rows, skipped = [], {"empty": [], "no_frontal": []}
    for key, entry in studies.items():
        one = _study(str(key), entry, section=section, views=views, where=path)
        if isinstance(one, str):
            skipped[one].append(str(key))
        else:
            rows.append(one)
    if skipped["empty"]:
        if not drop_empty:
            raise ValueError(f"rexgradient: {len(skipped['empty'])} studies in {str(path)!r} have no {section} text, "
                             f"e.g. {skipped['empty'][0]!r} (drop_empty=True skips them)")
        log.warning("rexgradient: dropped %d studies with no %s text", len(skipped["empty"]), section)
    if skipped["no_frontal"]:
        log.warning("rexgradient: dropped %d studies without a PA/AP image (views='all' keeps them)",
                    len(skipped["no_frontal"]))
    if not rows:
        raise ValueError(f"rexgradient: no usable studies in {str(path)!r}")
    return ReportDataset(
        pd.DataFrame(rows), root=root, multi_view=views == "all",
        meta_columns=("indication", "comparison", "findings", "impression", "views", "sex", "age"),
        transform=transform, name="rexgradient",
    )
