"""Device measurements in reports (FactCheXcker-style checks): "ETT tip 4.5 cm above the
carina" → (device, distance in cm, relation, landmark); presence precision/recall of measured
devices in generated vs reference reports and the absolute error of matched distances in cm."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["extract_measurements", "measurement_scores"]

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
