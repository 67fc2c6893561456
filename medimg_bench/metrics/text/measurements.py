"""Device measurements in reports (FactCheXcker-style checks): "ETT tip 4.5 cm above the
carina" → (device, distance in cm, relation, landmark); presence precision/recall of measured
devices in generated vs reference reports and the absolute error of matched distances in cm."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["extract_measurements", "measurement_scores", "extract_ett", "factchexcker_ett_scores", "ETT_TARGET_CM"]

#: the guideline FactCheXcker's prompts cite (Radiopaedia): ETT tip 5 ± 2 cm above the carina
ETT_TARGET_CM = (3.0, 7.0)

_DEVICES = {
    "endotracheal tube": r"endotracheal tube|et tube|ett",
    "enteric tube": r"enteric tube|nasogastric tube|ng tube|orogastric tube|og tube|feeding tube|dobhoff",
    "central line": r"picc(?: line)?|central (?:venous )?(?:line|catheter)|(?:ij|subclavian) (?:line|catheter)|swan[- ]ganz(?: catheter)?",
    "tracheostomy tube": r"tracheostomy tube|trach(?:eostomy)?",
    "chest tube": r"chest tube|pigtail catheter",
}
_DEVICE_RE = re.compile(
    r"\b(?:" + "|".join(f"(?P<d{i}>{p})" for i, p in enumerate(_DEVICES.values())) + r")\b"
)
_NAMES = list(_DEVICES)
_VALUE_RE = re.compile(
    r"(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>cm|mm)\b\s*(?P<relation>above|below|from|proximal to|distal to|beyond)?"
    r"(?:\s+the)?\s*(?P<landmark>carina|cavoatrial junction|gastroesophageal junction|ge junction|"
    r"thoracic inlet|clavicular heads|diaphragm)?"
)
_SENT = re.compile(r"(?<!\d)[.!?](?!\d)|[\n;]")


def extract_measurements(text: str) -> list[dict[str, Any]]:
    """Measurements in ``text``: dicts with ``device``, ``value_cm``, ``relation`` and
    ``landmark`` (None where absent); a number is tied to the nearest device named before it in
    its sentence."""
    if not isinstance(text, str):
        raise TypeError(f"expected a report string, got {type(text).__name__}")
    out = []
    for sentence in _SENT.split(" ".join(text.lower().split())):
        devices = [(m.start(), _NAMES[int(m.lastgroup[1:])]) for m in _DEVICE_RE.finditer(sentence)]
        if not devices:
            continue
        for m in _VALUE_RE.finditer(sentence):
            before = [d for pos, d in devices if pos < m.start()]
            if not before:
                continue
            value = float(m.group("value")) / (10.0 if m.group("unit") == "mm" else 1.0)
            out.append({"device": before[-1], "value_cm": value, "relation": m.group("relation"),
                        "landmark": m.group("landmark")})
    return out


def measurement_scores(generated: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Over report pairs: ``presence_precision`` and ``presence_recall`` of measured devices
    (a device with a distance in both reports counts as found), ``mean_abs_error_cm`` over the
    devices measured in both (first measurement of each), and the counts. NaN where undefined."""
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated reports but {len(references)} references")
    tp = n_gen = n_ref = 0
    errors = []
    for g, r in zip(generated, references):
        gm, rm = {}, {}
        for m in extract_measurements(g):
            gm.setdefault(m["device"], m["value_cm"])
        for m in extract_measurements(r):
            rm.setdefault(m["device"], m["value_cm"])
        n_gen += len(gm)
        n_ref += len(rm)
        for device in gm.keys() & rm.keys():
            tp += 1
            errors.append(abs(gm[device] - rm[device]))
    return {
        "presence_precision": tp / n_gen if n_gen else float("nan"),
        "presence_recall": tp / n_ref if n_ref else float("nan"),
        "mean_abs_error_cm": float(np.mean(errors)) if errors else float("nan"),
        "n_generated": float(n_gen),
        "n_reference": float(n_ref),
        "n_matched": float(tp),
    }


_ETT = re.compile(r"\b(?:endotracheal tube|et tube|ett|et)\b")
_ETT_GONE = re.compile(r"\b(?:extubat\w*|(?:endotracheal tube|et tube|ett)\s+(?:has been |was )?removed|removal of the (?:endotracheal tube|et tube|ett))\b")
_ETT_DIST = re.compile(
    r"(?:less than |approximately |about |roughly )?(?P<lo>\d+(?:\.\s?\d+)?)\s*(?:-|to)?\s*(?P<hi>\d+(?:\.\s?\d+)?)?\s*"
    r"(?P<unit>cm|mm)\b(?P<rest>[^.;]{0,40})")
_TOO_LOW = re.compile(r"\b(?:too low|low[- ]lying|low position|advanced into the (?:right|left) (?:main )?bronch\w*|retract\w*)\b")
_TOO_HIGH = re.compile(r"\b(?:too high|high[- ]lying|high position|advance\w* by|above the thoracic inlet)\b")
_OK = re.compile(r"\b(?:appropriate(?:ly)?|satisfactory|standard position|in (?:good|adequate|proper|expected) position|"
                 r"well[- ]positioned|stable|unchanged|terminates? at an appropriate)\b")


def _num(text: str) -> float:
    return float(text.replace(" ", ""))


def extract_ett(text: str) -> dict[str, Any]:
    """Endotracheal-tube facts of a report under FactCheXcker's extraction rules
    (``prompts/extract-ETT.prompt``): ``present`` (False after extubation / removal),
    ``distance_cm`` to the carina (positive above, negative below, above when unstated; "x-y cm"
    → y; "less than x cm" → x; "2. 0 cm" → 2.0; mm → cm; None when no number is given) and
    ``placement`` ("correct", "too low", "too high" or None; "stable"/"unchanged" → correct)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a report string, got {type(text).__name__}")
    low = " ".join(text.lower().split())
    out: dict[str, Any] = {"present": False, "distance_cm": None, "placement": None}
    if _ETT_GONE.search(low):
        return out
    for sentence in re.split(r"(?<!\d)[.!?](?!\s?\d)|[\n;]", low):
        m_dev = _ETT.search(sentence)
        if not m_dev:
            continue
        out["present"] = True
        tail = sentence[m_dev.end():]
        m = _ETT_DIST.search(tail)
        if m and out["distance_cm"] is None and ("carina" in m.group("rest") or "carina" in tail):
            v = _num(m.group("hi") or m.group("lo")) / (10.0 if m.group("unit") == "mm" else 1.0)
            out["distance_cm"] = -v if re.search(r"\bbelow\b|\bbeyond\b|\bdistal to\b", m.group("rest")) else v
        if out["placement"] is None:
            out["placement"] = ("too low" if _TOO_LOW.search(sentence) else "too high" if _TOO_HIGH.search(sentence)
                                else "correct" if _OK.search(sentence) else None)
    return out


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    f = 2 * p * r / (p + r) if tp and (p + r) else (0.0 if tp + fp and tp + fn else float("nan"))
    return p, r, f


def factchexcker_ett_scores(pred_present: Sequence[bool], gt_present: Sequence[bool],
                            pred_distance_cm: Sequence[float | None], gt_distance_cm: Sequence[float | None],
                            *, published_rounding: bool = False) -> dict[str, float]:
    """FactCheXcker's endotracheal-tube measurement protocol (Heiman et al. 2024, Table of
    ``results/metrics/*.json``): presence TP/FP/FN/TN with precision, recall, F1 and accuracy;
    measurement errors (cm) over the studies measured on both sides — ``mae``, ``mse``, ``rmse``,
    ``mape`` (|p − g| / |g|), ``max_error``; the composite ``mae_f1`` = MAE / presence F1 (their
    "Composite" column) and ``precision_mae`` = MAE / presence precision. NaN where undefined.
    ``published_rounding=True`` rounds every figure to 2 decimals and divides the rounded values,
    as their published tables do (their composites are quotients of the rounded MAE and F1)."""
    n = len(pred_present)
    if not (len(gt_present) == len(pred_distance_cm) == len(gt_distance_cm) == n):
        raise ValueError("factchexcker: the four sequences must have one entry per study")
    pp, gp = np.asarray(pred_present, bool), np.asarray(gt_present, bool)
    tp, fp = int((pp & gp).sum()), int((pp & ~gp).sum())
    fn, tn = int((~pp & gp).sum()), int((~pp & ~gp).sum())
    p, r, f = _prf(tp, fp, fn)
    pairs = [(float(a), float(b)) for a, b in zip(pred_distance_cm, gt_distance_cm) if a is not None and b is not None]
    err = np.asarray([abs(a - b) for a, b in pairs])
    mae = float(err.mean()) if len(err) else float("nan")
    rel = [abs(a - b) / abs(b) for a, b in pairs if b != 0]
    if published_rounding:
        p, r, f, mae = (round(x, 2) for x in (p, r, f, mae))
    out = {
        "n_studies": float(n), "tp": float(tp), "fp": float(fp), "fn": float(fn), "tn": float(tn),
        "precision": p, "recall": r, "f1": f, "accuracy": (tp + tn) / n if n else float("nan"),
        "n_measured_both": float(len(pairs)), "mae": mae,
        "mse": float((err ** 2).mean()) if len(err) else float("nan"),
        "rmse": float(np.sqrt((err ** 2).mean())) if len(err) else float("nan"),
        "mape": float(np.mean(rel)) if rel else float("nan"),
        "max_error": float(err.max()) if len(err) else float("nan"),
        "mae_f1": mae / f if f and f == f else float("nan"),
        "precision_mae": mae / p if p and p == p else float("nan"),
    }
    return {k: round(v, 2) for k, v in out.items()} if published_rounding else out
