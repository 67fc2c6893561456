"""Chest X-ray pathology names shared by the CXR loaders, and label harmonization.

Each public dataset spells its findings differently (NIH ``Effusion`` / CheXpert ``Pleural
Effusion``; NIH ``Pleural_Thickening`` / VinDr ``Pleural thickening``). :func:`canonical_name`
maps every known spelling to one canonical name, and :func:`harmonize_labels` re-indexes the
label columns of several datasets (or manifest frames) to one shared list so merged datasets align;
a finding a dataset does not label becomes NaN (unlabelled), never 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.findings import CHEXPERT_PATHOLOGIES

__all__ = [
    "NIH_PATHOLOGIES",
    "CHEXPERT_PATHOLOGIES",
    "PATHOLOGIES",
    "SYNONYMS",
    "canonical_name",
    "harmonize_labels",
    "apply_uncertainty",
]

#: The 14 findings of ChestX-ray14, in the order of the official paper / MedMNIST ChestMNIST.
NIH_PATHOLOGIES = (
    "Atelectasis",
    "Cardiomegaly",
    "Effusion",
    "Infiltration",
    "Mass",
    "Nodule",
    "Pneumonia",
    "Pneumothorax",
    "Consolidation",
    "Edema",
    "Emphysema",
    "Fibrosis",
    "Pleural_Thickening",
    "Hernia",
)

#: Canonical names: the CheXpert spelling where CheXpert has the finding, else the NIH/VinDr one.
PATHOLOGIES = (
    "Atelectasis",
    "Cardiomegaly",
    "Consolidation",
    "Edema",
    "Pleural Effusion",
    "Pneumonia",
    "Pneumothorax",
    "Enlarged Cardiomediastinum",
    "Lung Opacity",
    "Lung Lesion",
    "Fracture",
    "Pleural Other",
    "Support Devices",
    "Infiltration",
    "Mass",
    "Nodule",
    "Emphysema",
    "Fibrosis",
    "Pleural Thickening",
    "Hernia",
    "No Finding",
)

# spelling (compared after lower-casing and mapping "_" / "-" to spaces) → canonical name
SYNONYMS: dict[str, str] = {
    "effusion": "Pleural Effusion",
    "pleural effusion": "Pleural Effusion",
    "pleural thickening": "Pleural Thickening",
    "pleural": "Pleural Thickening",  # MedMNIST ChestMNIST shortens NIH Pleural_Thickening
    "pulmonary fibrosis": "Fibrosis",  # VinDr-CXR
    "no finding": "No Finding",
    "no findings": "No Finding",
    "normal": "No Finding",
    "enlarged cardiomediastinum": "Enlarged Cardiomediastinum",
    "lung opacity": "Lung Opacity",
    "lung lesion": "Lung Lesion",
    "support devices": "Support Devices",
    "pleural other": "Pleural Other",
}


def _key(name: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[_\-]", " ", str(name))).strip().lower()


_CANONICAL_BY_KEY = {_key(n): n for n in PATHOLOGIES}


def canonical_name(name: str) -> str:
    """The canonical spelling of a finding (``"Effusion"`` → ``"Pleural Effusion"``); names that
    are not known findings are returned unchanged."""
    k = _key(name)
    if k in SYNONYMS:
        return SYNONYMS[k]
    return _CANONICAL_BY_KEY.get(k, str(name))


def apply_uncertainty(
    values: pd.DataFrame,
    policy: str,
    *,
    blank: str = "nan",
    source: str = "",
    lines: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Map raw CheXpert-style label values to floats: 1 positive, 0 negative, -1 uncertain
    (→ 1 for ``u_ones``, 0 for ``u_zeros``, NaN for ``ignore``), blank (→ NaN, or 0 with
    ``blank="zero"``). Any other value raises ``ValueError`` naming the column, the row (``lines[i]``
    when given: the file line of each row) and ``source``."""
    if policy not in ("u_ones", "u_zeros", "ignore"):
        raise ValueError(
            f"uncertainty policy must be 'u_ones', 'u_zeros' or 'ignore', got {policy!r}"
        )
    if blank not in ("nan", "zero"):
        raise ValueError(f"blank must be 'nan' or 'zero', got {blank!r}")
    raw_blank = values.isna()
    out = values.apply(pd.to_numeric, errors="coerce").astype(np.float64)
    invalid = (out.isna() & ~raw_blank) | (out.notna() & ~out.isin([-1.0, 0.0, 1.0]))
    if invalid.to_numpy().any():
        i, j = (int(a[0]) for a in np.nonzero(invalid.to_numpy()))
        where = f"line {lines[i]}" if lines is not None else f"data row {i + 1}"
        raise ValueError(
            f"{source}: label column {values.columns[j]!r} has value {str(values.iat[i, j])!r} at "
            f"{where} (expected 1, 0, -1 or blank)"
        )
    uncertain = {"u_ones": 1.0, "u_zeros": 0.0, "ignore": np.nan}[policy]
    out = out.mask(out == -1.0, uncertain)
    if blank == "zero":
        out = out.mask(raw_blank, 0.0)
    return out


def _label_frame(item: Any) -> tuple[pd.DataFrame, list[str]]:
    if isinstance(item, pd.DataFrame):
        return item, [c for c in item.columns if canonical_name(c) in PATHOLOGIES]
    manifest = getattr(item, "manifest", None)
    classes = getattr(item, "classes", None)
    if manifest is None or classes is None or not getattr(item, "multilabel", True):
        raise TypeError(
            "harmonize_labels takes DataFrames or multi-label CXR datasets (with .manifest and "
            f".classes), got {type(item).__name__}"
        )
    return manifest, list(classes)


def harmonize_labels(
    datasets_or_frames: Iterable[Any], names: Sequence[str] | None = None
) -> list[Any]:
    """Align the label columns of several multi-label datasets (or manifest DataFrames).

    Column names are mapped to canonical names (:func:`canonical_name`); each result has exactly
    the label columns ``names`` (canonical spellings; default: every canonical finding labelled by
    at least one input, in :data:`PATHOLOGIES` order), with NaN where an input does not label that
    finding. Returns new DataFrames / datasets (``classes`` replaced) in the input order; inputs
    are not modified. Two columns of one input mapping to the same name raise ``ValueError``.
    """
    items = list(datasets_or_frames)
    parsed = [_label_frame(it) for it in items]
    if names is None:
        seen = {canonical_name(c) for _, cols in parsed for c in cols}
        names = [n for n in PATHOLOGIES if n in seen] + sorted(seen - set(PATHOLOGIES))
    names = [canonical_name(n) for n in names]
    if len(set(names)) != len(names):
        raise ValueError(f"harmonize_labels: names map to duplicate canonical names: {names}")
    out: list[Any] = []
    for item, (frame, cols) in zip(items, parsed):
        rename: dict[str, str] = {}
        for c in cols:
            target = canonical_name(c)
            if target in rename.values():
                raise ValueError(
                    f"harmonize_labels: columns {c!r} and "
                    f"{next(k for k, v in rename.items() if v == target)!r} both mean {target!r}"
                )
            rename[c] = target
        keep = [c for c in frame.columns if c not in rename]
        new = frame[keep].copy()
        for n in names:
            src = next((c for c, t in rename.items() if t == n), None)
            new[n] = frame[src].astype(np.float64) if src is not None else np.nan
        if isinstance(item, pd.DataFrame):
            out.append(new)
        else:
            ds = item.with_manifest(new)
            ds.classes = list(names)
            out.append(ds)
    return out
