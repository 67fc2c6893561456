"""Structured (JSON) answers graded item by item: 3DReasonKnee's MOAKS questions.

Each 3DReasonKnee question ends with the JSON object the answer must be (rajpurkarlab/3DReasonKnee
commit bcc32ba, ``data/question_files/questions_nobbox_*.json``), e.g.
``{"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": (grade from 0-3), ...}}}``.
Here:

* :func:`answer_template` reads that object (the brace-balanced ``{...}`` ending the question) out
  of the question text: each graded item (its path) and the values it allows
  (``(grade from 0-3)``, ``(0 | 1)``, ``(0-3)`` ...). Two of the 69 released questions (58, 59)
  lost the start of their template; they have none.
* :func:`parse_answer` turns a reply into a JSON object under a **named rule**: ``qwen2vl`` (the
  authors' ``code/zero_shot/qwen2vl*.py``: remove ```` ```json ```` and ```` ``` ````, then
  ``json.loads``), ``o1`` (``code/zero_shot/o1.py``: ``json.loads`` of the raw reply, which the
  API constrained to a JSON object), ``sft`` (``code/sft/sft_qwen25vl3b_inference.py`` keeps the
  text after the last ``Final diagnosis:``; then the ``qwen2vl`` rule — that second step is ours,
  their script only prints it) and ``lenient`` (ours: ``qwen2vl``, else the first ``{...}`` in the
  reply that decodes as a JSON object). A reply no rule reads is a **parse failure**, recorded with
  its reason — never read as grade 0.
* :func:`grade_items` flattens an object into graded items: integer leaves (``true``/``false`` and
  numeric strings are not grades) keyed by their path *below the top-level key* (the wrapper the
  templates vary: ``MOAKS_scores`` / ``MOAKS_grade`` / ``ACL`` ...; an object with several
  top-level objects has no wrapper: each keeps its name), keys compared case-folded
  with ``_``/``-``/runs of spaces as one space; lists of six numbers are 3D boxes.
* :func:`score_answer` compares a reply with a reference object: per item right or wrong (a
  missing item is wrong), all right, the reply's coverage of the question's template, and the 3D
  box IoU when the reference has a box. The authors publish no scoring code; these rules are ours
  (docs/vlm.md, "3DReasonKnee").

Boxes are ``[start_slice, end_slice, x_min, x_max, y_min, y_max]`` — the order of the remnant of
the box prompt in question 58 — and are scored by :func:`~medimg_bench.metrics.grounding.box_iou_3d`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PARSE_RULES", "ParsedAnswer", "answer_template", "parse_answer", "grade_items",
           "item_key", "score_answer", "box_to_xyzxyz"]

PARSE_RULES = ("qwen2vl", "o1", "sft", "lenient")
_SEP = re.compile(r"[\s_\-]+")
# placeholders of the released templates: "(grade from 0-3)", "(0 | 1)", "0 | 1", "(0-3)"
_RANGE = re.compile(r"\((?:grade from\s*)?(\d+)\s*-\s*(\d+)\)")
_CHOICE = re.compile(r"\(?\s*(\d+)\s*\|\s*(\d+)\s*\)?")


def item_key(path: tuple[str, ...]) -> str:
    """The comparable name of a graded item: its keys case-folded, ``_``/``-``/spaces as one
    space, joined by ``/``."""
    return "/".join(_SEP.sub(" ", str(k)).strip().casefold() for k in path)


@dataclass(frozen=True)
class ParsedAnswer:
    """A reply read under a rule: ``obj`` the JSON object, or None with ``error`` saying why."""

    obj: dict[str, Any] | None
    error: str | None = None
    rule: str = "qwen2vl"

    @property
    def ok(self) -> bool:
        return self.obj is not None


def _as_object(value: Any, rule: str) -> ParsedAnswer:
    if not isinstance(value, dict):
        return ParsedAnswer(None, f"the JSON is a {type(value).__name__}, not an object", rule)
    return ParsedAnswer(value, None, rule)


def _strict(text: str, rule: str) -> ParsedAnswer:
    try:
        return _as_object(json.loads(text), rule)
    except ValueError as exc:
        return ParsedAnswer(None, f"invalid JSON ({exc})", rule)


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_answer(text: str | None, *, rule: str = "qwen2vl") -> ParsedAnswer:
    """The JSON object in ``text`` under ``rule`` (module docstring); a failure says why."""
    if rule not in PARSE_RULES:
        raise ValueError(f"unknown parse rule {rule!r}; rules: {list(PARSE_RULES)}")
    if text is None or not str(text).strip():
        return ParsedAnswer(None, "empty reply", rule)
    text = str(text)
    if rule == "o1":
        return _strict(text, rule)
    if rule == "sft":
        text = text.split("Final diagnosis:")[-1]
    fenced = text.replace("```json", "").replace("```", "")
    parsed = _strict(fenced, rule)
    if parsed.ok or rule != "lenient":
        return parsed
    found = _first_object(text)
    return ParsedAnswer(found, None, rule) if found is not None else ParsedAnswer(
        None, f"no JSON object in the reply ({parsed.error})", rule)


def _is_grade(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_box(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 6
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value))


def _walk(value: Any, path: tuple[str, ...], grades: dict[str, Any], boxes: dict[str, list[float]],
          skip: int) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _walk(v, (*path, str(k)), grades, boxes, skip)
        return
    key = item_key(path[skip:] if len(path) > skip else path)
    if _is_box(value):
        boxes.setdefault(key, [float(v) for v in value])
    elif not isinstance(value, list):
        grades.setdefault(key, value)  # the first of two equal keys wins


def grade_items(obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """``(items, boxes)`` of a JSON object: every non-list leaf by :func:`item_key` of its path
    below the wrapper (values as given; only integers count as grades when scored), and every
    list of six numbers as a box. The wrapper is the top-level key when it is the only one that
    holds an object (``{"MOAKS_scores": {...}, "bbox": [...]}``); with several top-level objects
    (``{"patella medial BML": {...}, "patella lateral BML": {...}}``) each keeps its name, so
    their items stay apart."""
    grades: dict[str, Any] = {}
    boxes: dict[str, list[float]] = {}
    nested = sum(isinstance(v, Mapping) for v in obj.values())
    _walk(obj, (), grades, boxes, 1 if nested <= 1 else 0)
    return grades, boxes


def _placeholder(m: re.Match[str]) -> str:
    return json.dumps(f"__range__{m.group(1)}__{m.group(2)}__")


def _trailing_object(text: str) -> str | None:
    """The brace-balanced ``{...}`` that ends ``text`` (a final period allowed), or None."""
    body = text.rstrip().rstrip(".").rstrip()
    if not body.endswith("}"):
        return None
    depth = 0
    for i in range(len(body) - 1, -1, -1):
        depth += {"}": 1, "{": -1}.get(body[i], 0)
        if depth == 0:
            return body[i:]
    return None


def answer_template(question: str) -> dict[str, tuple[int, int]] | None:
    """``{item key: (lowest, highest) allowed value}`` from the JSON object that ends a
    3DReasonKnee question; None when the question has no readable template."""
    body = _trailing_object(question)
    if body is None:
        return None
    body = _RANGE.sub(_placeholder, body)
    body = _CHOICE.sub(lambda m: json.dumps(f"__choice__{m.group(1)}__{m.group(2)}__"), body)
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    items, _ = grade_items(obj) if isinstance(obj, dict) else ({}, {})
    out = {}
    for key, value in items.items():
        m = re.fullmatch(r"__(?:range|choice)__(\d+)__(\d+)__", str(value))
        if m is None:
            return None
        out[key] = (int(m.group(1)), int(m.group(2)))
    return out or None


def box_to_xyzxyz(box: list[float]) -> list[float] | None:
    """``[start_slice, end_slice, x_min, x_max, y_min, y_max]`` as ``(s1, x1, y1, s2, x2, y2)``
    for :func:`~medimg_bench.metrics.grounding.box_iou_3d`; None when a maximum is below its minimum."""
    s1, s2, x1, x2, y1, y2 = (float(v) for v in box)
    if s2 < s1 or x2 < x1 or y2 < y1:
        return None
    return [s1, x1, y1, s2, x2, y2]


def _box_iou(pred: list[float] | None, ref: list[float], inclusive: bool) -> float:
    from medimg_bench.metrics.grounding import box_iou_3d

    r = box_to_xyzxyz(ref)
    if r is None:
        raise ValueError(f"reference box {ref} has a maximum below its minimum "
                         "(expected [start_slice, end_slice, x_min, x_max, y_min, y_max])")
    p = box_to_xyzxyz(pred) if pred is not None else None
    return 0.0 if p is None else float(box_iou_3d([p], [r], inclusive=inclusive)[0])


def _coverage(items: Mapping[str, Any], template: Mapping[str, tuple[int, int]] | None) -> dict[str, Any]:
    if not template:
        return {"complete": float("nan"), "out_of_range": 0}
    bad = [k for k, (lo, hi) in template.items()
           if not (k in items and _is_grade(items[k]) and lo <= int(items[k]) <= hi)]
    return {"complete": float(not bad), "out_of_range": len(bad)}


def score_answer(
    text: str | None,
    reference: Mapping[str, Any] | None,
    *,
    rule: str = "qwen2vl",
    template: Mapping[str, tuple[int, int]] | None = None,
    inclusive: bool = False,
) -> dict[str, Any]:
    """One reply scored: ``parse_failed`` (1.0/0.0) and ``parse_error``; ``items`` (the reply's
    graded items); ``complete`` (every item of ``template`` given as an integer in its range;
    NaN without a template) and ``out_of_range`` (how many were not); with a ``reference``
    object: ``n_items``, ``n_correct``, ``correct`` (item → 0/1), ``grade_accuracy``
    (``n_correct / n_items``), ``exact_match`` and, when the reference has a box, ``box_iou``
    (0 for a reply with no box or an invalid one). A parse failure scores every reference item
    wrong — and is counted as such."""
    parsed = parse_answer(text, rule=rule)
    items, boxes = grade_items(parsed.obj) if parsed.ok else ({}, {})
    out: dict[str, Any] = {"parse_failed": float(not parsed.ok), "parse_error": parsed.error,
                           "items": items, **_coverage(items, template)}
    if reference is None:
        return out
    ref_items, ref_boxes = grade_items(reference)
    graded = {k: v for k, v in ref_items.items() if _is_grade(v)}
    if not graded and not ref_boxes:
        raise ValueError(f"the reference holds no integer grade and no box: {dict(reference)}")
    correct = {k: float(_is_grade(items.get(k)) and int(items[k]) == int(v)) for k, v in graded.items()}
    n = len(correct)
    out.update(n_items=n, n_correct=int(sum(correct.values())), correct=correct,
               grade_accuracy=sum(correct.values()) / n if n else float("nan"),
               exact_match=float(all(correct.values())) if n else float("nan"))
    if ref_boxes:
        key, ref = next(iter(ref_boxes.items()))
        pred = boxes.get(key, next(iter(boxes.values()), None))
        out["box_iou"] = _box_iou(pred, ref, inclusive)
    return out
