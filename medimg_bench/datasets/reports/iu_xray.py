"""The ``iu_xray`` dataset. IU X-ray (Indiana University, OpenI) report generation."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.reports.base import (
    ReportDataset,
    check_options,
    clean,
    select_report_text,
)
from medimg_bench.registry import register_dataset

__all__ = ["iu_xray"]

log = logging.getLogger(__name__)


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
    findings, ``section`` is ignored). ``layout="reports_csv"``: ``gts.csv`` (``study_id,report``,
    the ground truth ReXrank submissions commit; the R2Gen test split), text-only samples, split
    ``test``. ``auto`` picks the layout whose files exist.
    ``views="frontal"``: one image (first frontal view; R2Gen: first listed), ``"all"``: a list.
    """
    root = Path(root)
    check_options(section, views)
    if not root.is_dir():
        raise FileNotFoundError(
            f"iu_xray: root folder {str(root)!r} does not exist; set dataset.root to the folder holding "
            "annotation.json (R2Gen), gts.csv or indiana_reports.csv, e.g. dataset.root=/data/iu_xray")
    if layout == "auto":
        layout = ("r2gen" if (root / "annotation.json").exists()
                  else "reports_csv" if (root / "gts.csv").exists() else "openi")
    if layout == "reports_csv":
        frame = _iu_reports_csv(root / "gts.csv", split)
    elif layout == "r2gen":
        frame = _iu_r2gen(root, split, image_dir or "images", views)
    elif layout == "openi":
        frame = _iu_openi(root, split, image_dir or "images/images_normalized", section, views)
    else:
        raise ValueError(f"iu_xray: layout must be auto, openi, r2gen or reports_csv, got {layout!r}")
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
    with open(path, encoding="utf-8-sig") as fh:
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
                "report": clean(str(item.get("report", ""))),
                "findings": clean(str(item.get("report", ""))),
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
        sections = {"findings": clean(rec["findings"]) or None, "impression": clean(rec["impression"]) or None}
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
                "indication": clean(rec.get("indication", "")) or None,
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


def _iu_reports_csv(path: Path, split: str) -> pd.DataFrame:
    if split != "test":
        raise ValueError(f"iu_xray: {str(path)!r} holds the test split only, got split={split!r}")
    from medimg_bench.datasets.columns import find_column

    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    where = f"iu_xray: {str(path)!r}"
    # by name up to case and punctuation (the one column matcher): ReXrank's gts.csv is study_id,report
    id_col = find_column(list(table.columns), ("study_id", "id"), where=where, what="id")
    text_col = find_column(list(table.columns), REFERENCE_NAMES, where=where, what="reference report")
    dup = table[id_col][table[id_col].duplicated()]
    if len(dup):
        raise ValueError(f"{where}: duplicate {id_col}(s) {sorted(set(dup))[:5]}")
    ids = table[id_col].astype(str)
    return pd.DataFrame({"id": ids, "patient_id": ids.str.split("_").str[0], "study_id": ids,
                         "report": [clean(t) for t in table[text_col]],
                         "findings": [clean(t) for t in table[text_col]], "split": "test", "modality": "CR"})


#: the reference report's column in a reports CSV, in order of preference
REFERENCE_NAMES = ("report", "reference", "reference_report", "ground_truth", "gt_report", "gt")
