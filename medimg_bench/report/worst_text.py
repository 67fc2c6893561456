"""Worst samples of the generative tasks: VQA questions answered wrongly (question, image,
reference, response, parsed answer and the rule that decided) and generated reports beside
their references with the labeler's findings."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from medimg_bench.report.html import esc, fmt, img, note, table
from medimg_bench.report.images import png_bytes
from medimg_bench.report.inputs import input_images
from medimg_bench.report.rundir import RunData, per_sample_columns

__all__ = ["vqa_worst", "report_worst", "vqa_breakdown", "findings_disagreement", "MAX_TEXT_ROWS"]

#: rows of the table of all wrong answers / reports
MAX_TEXT_ROWS = 1000
_LABELS = {1.0: "positive", 0.0: "negative", -1.0: "uncertain"}
_CATEGORY_COLUMNS = ("answer_type", "question_type", "content_type", "modality", "organ", "department",
                     "clinical_task", "perceptual_granularity")


def _is_true(v: Any) -> bool:
    return str(v) in ("True", "1", "1.0")


def _text(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) or str(v) in ("None", "nan") else str(v)


def _pictures(images: dict[str, list[np.ndarray]], sid: str) -> str:
    return "".join(img(png_bytes(p, min_side=160), alt=sid) for p in images.get(sid, []))


def vqa_breakdown(s: Any) -> str:
    """Accuracy and unparsed rate per answer type and per category column of the questions."""
    parts = []
    for col in _CATEGORY_COLUMNS:
        if col not in s.columns or s[col].isna().all():
            continue
        rows = []
        for value, g in s.groupby(s[col].astype(str), sort=True):
            rows.append([value, len(g), float(g["correct"].mean()) if g["correct"].notna().any() else None,
                         float(g["unparsed"].mean()) if "unparsed" in g and g["unparsed"].notna().any() else None])
        parts.append(table([col, "questions", "accuracy", "unparsed rate"], rows))
    return "".join(parts)


def _vqa_card(r: Any, images: dict[str, list[np.ndarray]]) -> str:
    sid = str(r["id"])
    try:
        options = json.loads(r["options"]) if isinstance(r.get("options"), str) else []
    except ValueError:
        options = []
    listed = "<br>".join(f"{chr(65 + k)}. {esc(o)}" for k, o in enumerate(options))
    facts = [("question", esc(r.get("question"))), ("options", listed), ("reference", esc(r.get("answer"))),
             ("response", esc(r.get("response"))),
             ("parsed", esc(_text(r.get("parsed"))) or "<i>unparsed</i>"),
             ("rule", esc(_text(r.get("rule")))), ("decided by", esc(_text(r.get("parsed_by"))) or "no rule matched")]
    if _text(r.get("judge_response")):
        facts.append(("judge reply", esc(r.get("judge_response"))))
    body = "".join(f"<tr><th>{k}</th><td class=\"text\">{v}</td></tr>" for k, v in facts if v)
    return (f'<div class="card"><h4>{esc(sid)} <span class="tag">{esc(r.get("answer_type"))}</span></h4>'
            f'<div class="panels">{_pictures(images, sid)}</div><table>{body}</table></div>')


def vqa_worst(run: RunData, *, pictures: int = 8) -> str:
    """Wrong answers: those a rule parsed first (confidently wrong), then the unparsed; cards
    with the image for the first ones, a table of all."""
    s = run.samples[run.samples["status"] == "ok"].drop_duplicates("id")
    if "answer_withheld" in s:
        s = s[~s["answer_withheld"].map(_is_true)]
    if "correct" not in s or s.empty:
        return note("No scored answer in samples.parquet (answers withheld?).")
    parts = ["<h3>By answer type and category</h3>", vqa_breakdown(s)]
    wrong = s[s["correct"] == 0].copy()
    unparsed = wrong["unparsed"].fillna(0).astype(float) if "unparsed" in wrong else 0.0
    wrong["_order"] = unparsed
    wrong = wrong.sort_values("_order", kind="stable")
    n_unparsed = int((wrong["_order"] > 0).sum())
    parts.append(note(f"{len(wrong)} of {len(s)} answers are wrong: {len(wrong) - n_unparsed} parsed but wrong, "
                      f"{n_unparsed} that no rule could parse (wrong, never guessed). Parsed-but-wrong first."))
    if wrong.empty:
        return "".join(parts)
    first = wrong.head(pictures)
    images, notes = input_images(run, first["id"].astype(str).tolist())
    parts.append(f'<div class="cards">{"".join(_vqa_card(r, images) for _, r in first.iterrows())}</div>')
    parts += [note(n) for n in notes[:5]]
    cols = [c for c in ("id", "answer_type", "question", "answer", "response", "parsed", "rule", "parsed_by")
            if c in wrong.columns]
    rows = [[{"html": f'<div class="text">{esc(_text(v))}</div>', "sort": _text(v)} for v in r]
            for r in wrong[cols].head(MAX_TEXT_ROWS).itertuples(index=False)]
    parts.append("<h3>All wrong answers</h3>" + table([c if c != "answer" else "reference" for c in cols], rows))
    return "".join(parts)


# -- report generation ----------------------------------------------------------------------------
def _observations(s: Any) -> list[str]:
    return [c[4:] for c in s.columns if c.startswith("gen_") and f"ref_{c[4:]}" in s.columns]


def findings_disagreement(s: Any, observations: list[str]) -> np.ndarray:
    """Per report: the observations whose labeler value differs between the reference and the
    generated report (not mentioned counts as a value)."""
    if not observations:
        return np.zeros(len(s), dtype=int)
    g = s[[f"gen_{o}" for o in observations]].to_numpy(dtype=float)
    r = s[[f"ref_{o}" for o in observations]].to_numpy(dtype=float)
    same = (g == r) | (np.isnan(g) & np.isnan(r))
    return (~same).sum(axis=1)


def _findings_table(r: Any, observations: list[str]) -> str:
    rows = []
    for o in observations:
        g, ref = r.get(f"gen_{o}"), r.get(f"ref_{o}")
        gv = None if g is None or (isinstance(g, float) and math.isnan(g)) else float(g)
        rv = None if ref is None or (isinstance(ref, float) and math.isnan(ref)) else float(ref)
        if gv is None and rv is None:
            continue
        differ = gv != rv
        rows.append([o, _LABELS.get(rv, "not mentioned") if rv is not None else "not mentioned",
                     {"html": esc(_LABELS.get(gv, "not mentioned") if gv is not None else "not mentioned"),
                      "cls": "bad" if differ else "good"}])
    if not rows:
        return note("The labeler found no observation in either report.")
    return table(["observation", "reference", "generated"], rows, sortable=False)


def _report_card(r: Any, observations: list[str], images: dict[str, list[np.ndarray]], metrics: list[str]) -> str:
    sid = str(r["id"])
    scores = " · ".join(f"{m} {fmt(r.get(m))}" for m in metrics)
    texts = table(["reference", "generated"], [[{"html": f'<div class="text">{esc(_text(r.get("reference")))}</div>'},
                                                {"html": f'<div class="text">{esc(_text(r.get("generated")))}</div>'}]],
                  sortable=False)
    n = int(r["_disagree"])
    return (f'<div class="card"><h4>{esc(sid)} — {n} finding{"s differ" if n != 1 else " differs"}</h4>'
            f'<div class="panels">{_pictures(images, sid)}</div><p class="note">{esc(scores)}</p>'
            f"{texts}{_findings_table(r, observations)}</div>")


def report_worst(run: RunData, *, pictures: int = 8) -> str:
    """Generated reports with the most labeler disagreements (then the lowest first per-report
    metric): both texts and the findings side by side; a table of all."""
    s = run.samples[run.samples["status"] == "ok"].drop_duplicates("id").copy()
    if s.empty or "generated" not in s:
        return note("No generated report in samples.parquet.")
    observations = _observations(s)
    metrics = per_sample_columns(run)
    s["_disagree"] = findings_disagreement(s, observations)
    keys, asc = ["_disagree"], [False]
    if metrics:
        keys.append(metrics[0])
        asc.append(True)
    s = s.sort_values(keys, ascending=asc, kind="stable", na_position="last")
    how = (f"Sorted by the number of the labeler's {len(observations)} observations on which the generated report "
           f"and the reference disagree" + (f", then by {metrics[0]} (lowest first)." if metrics else "."))
    first = s.head(pictures)
    images, notes = input_images(run, first["id"].astype(str).tolist())
    parts = [note(how), f'<div class="cards">{"".join(_report_card(r, observations, images, metrics) for _, r in first.iterrows())}</div>']
    parts += [note(n) for n in notes[:3]]
    cols = ["id", "_disagree", *metrics[:4], "reference", "generated"]
    rows = []
    for r in s[cols].head(MAX_TEXT_ROWS).itertuples(index=False):
        rows.append([r[0], int(r[1]), *[float(v) for v in r[2:-2]],
                     {"html": f'<div class="text">{esc(_text(r[-2]))}</div>'}, {"html": f'<div class="text">{esc(_text(r[-1]))}</div>'}])
    parts.append("<h3>All reports, most disagreement first</h3>"
                 + table(["id", "findings differ", *metrics[:4], "reference", "generated"], rows))
    return "".join(parts)
