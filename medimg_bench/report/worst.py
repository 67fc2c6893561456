"""The worst samples of a run, with pictures: segmentation overlays on the worst slices,
classification's most confident errors; VQA and report generation in
:mod:`medimg_bench.report.worst_text`. :func:`worst_section` picks by task."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from medimg_bench.report.html import esc, fmt, img, note, table
from medimg_bench.report.images import class_color, error_map, overlay, png_bytes, thumbnail
from medimg_bench.report.inputs import input_images
from medimg_bench.report.rundir import RunData, per_sample_columns

__all__ = ["worst_section", "segmentation_worst", "classification_errors", "phase_worst",
           "THRESHOLD", "TABLE_ROWS"]

#: decision threshold for multi-label classification errors (the metrics' default)
THRESHOLD = 0.5
#: rows of the text tables of worst samples
TABLE_ROWS = 50
_PANEL_MIN, _PANEL_MAX = 160, 288


def worst_section(run: RunData, *, pictures: int = 8) -> str:
    """The task's worst-sample view ('' when the run has no per-sample table)."""
    if run.samples is None or run.samples.empty:
        return ""
    from medimg_bench.report.worst_text import report_worst, vqa_worst

    cols = set(run.samples.columns)
    if run.task == "segmentation" or {"target_voxels", "pred_voxels"} <= cols:
        return segmentation_worst(run, pictures=pictures)
    if run.task == "vqa" or {"question", "response"} <= cols:
        return vqa_worst(run, pictures=pictures)
    if run.task == "report_generation" or {"generated", "reference"} <= cols:
        return report_worst(run, pictures=pictures)
    if run.task == "phase_recognition" or {"video_id", "frame_index", "pred"} <= cols:
        return phase_worst(run)
    if {"score", "label"} <= cols:
        return classification_errors(run, pictures=pictures)
    return ""


# -- phase recognition ----------------------------------------------------------------------------
def phase_worst(run: RunData) -> str:
    """Videos worst first by frame accuracy (frames whose predicted phase is the reference's),
    with their wrong frames; scores are not needed (stored labels have none)."""
    s = run.samples
    if not {"video_id", "frame_index", "label", "pred"} <= set(s.columns):
        return note("No per-frame rows in samples.parquet.")
    f = s[(s["status"] == "ok") & s["frame_index"].notna() & s["label"].notna() & s["pred"].notna()]
    if f.empty:
        return note("No scored frame in samples.parquet.")
    f = f.assign(wrong=(f["label"] != f["pred"]))
    v = f.groupby("video_id", sort=True).agg(frames=("wrong", "size"), wrong=("wrong", "sum"))
    v["frame accuracy"] = 1.0 - v["wrong"] / v["frames"]
    v = v.sort_values(["frame accuracy"], kind="stable")
    rows = [[vid, int(r["frames"]), int(r["wrong"]), float(r["frame accuracy"])] for vid, r in v.head(TABLE_ROWS).iterrows()]
    parts = [note("Frame accuracy per video: the share of its frames whose predicted phase is the reference "
                  "phase; the challenge metrics per video are in the summary above."),
             "<h3>Videos, worst first</h3>" + table(["video", "frames", "wrong frames", "frame accuracy"], rows)]
    wrong = f[f["wrong"]].sort_values(["video_id", "frame_index"], kind="stable")
    if not wrong.empty:
        cols = [c for c in ("video_id", "frame_index", "timestamp", "label", "pred", "score") if c in wrong.columns]
        body = [[None if isinstance(x, float) and math.isnan(x) else x for x in r]
                for r in wrong[cols].head(TABLE_ROWS).itertuples(index=False)]
        parts.append(f"<h3>Wrong frames (first {min(len(wrong), TABLE_ROWS)} of {len(wrong)})</h3>" + table(cols, body))
    return "".join(parts)


# -- segmentation ---------------------------------------------------------------------------------
def _case_table(run: RunData) -> tuple[Any, str | None]:
    """Per case: the mean over classes of each per-sample metric (ok rows only), sorted worst
    first by the first metric whose direction is known; and that metric's name."""
    s = run.samples[run.samples["status"] == "ok"]
    cols = per_sample_columns(run)
    if not cols or s.empty:
        return None, None
    by_case = s.groupby("id", sort=False)[cols].mean()
    metrics = run.summary.get("metrics") or {}
    key = next((c for c in cols if metrics[c].get("higher_is_better") is not None), cols[0])
    asc = metrics[key].get("higher_is_better", True) is not False
    return by_case.sort_values(key, ascending=asc, na_position="last"), key


def _load_worst(run: RunData) -> tuple[dict[str, Any] | None, Any, str | None]:
    meta, npz = run.path / "worst" / "segmentation.json", run.path / "worst" / "segmentation.npz"
    if not meta.is_file() or not npz.is_file():
        return None, None, ("No pictures: this run kept no worst slices (worst/segmentation.npz is absent: a run "
                            "written before the report existed, a merge of shards, or task.options.keep_worst=0).")
    try:
        return json.loads(meta.read_text()), np.load(npz, allow_pickle=False), None
    except (OSError, ValueError) as exc:
        return None, None, f"worst/segmentation.* cannot be read ({type(exc).__name__}: {exc})"


def _seg_panels(arrays: Any, j: int, has_image: bool) -> str:
    ref, pred = arrays[f"reference_{j}"], arrays[f"prediction_{j}"]
    gray = arrays[f"image_{j}"] if has_image and f"image_{j}" in arrays else None
    views = [("image", gray if gray is not None else np.zeros(ref.shape, np.uint8)),
             ("reference", overlay(gray, ref)), ("prediction", overlay(gray, pred)),
             ("errors", error_map(gray, ref, pred))]
    parts = []
    for name, a in views:
        a = thumbnail(a, _PANEL_MAX)
        parts.append(f'<div class="panel">{img(png_bytes(a, min_side=_PANEL_MIN), alt=name)}{esc(name)}</div>')
    return f'<div class="panels">{"".join(parts)}</div>'


def _legend(classes: list[str], values: set[int]) -> str:
    items = [f'<span style="background:rgb{class_color(v)}"></span>{esc(classes[v] if v < len(classes) else v)}'
             for v in sorted(values) if v > 0]
    items.append('<span style="background:rgb(0,200,255)"></span>missed (reference, not predicted)')
    items.append('<span style="background:rgb(255,60,60)"></span>extra (predicted, not reference)')
    return f'<p class="legend note">{"".join(items)}</p>'


def _case_rows(run: RunData, sid: str) -> str:
    rows = run.samples[(run.samples["id"] == sid) & (run.samples["status"] == "ok")]
    cols = per_sample_columns(run)
    shown = [c for c in ("target_ml", "pred_ml", "target_voxels", "pred_voxels") if c in rows.columns]
    if "target_ml" in shown and rows["target_ml"].isna().all():
        shown = [c for c in shown if not c.endswith("_ml")]
    else:
        shown = [c for c in shown if not c.endswith("_voxels")]
    keep = rows
    if len(rows) > 8 and {"target_voxels", "pred_voxels"} <= set(rows.columns):
        keep = rows[(rows["target_voxels"] > 0) | (rows["pred_voxels"] > 0)]
    body = [[r["class"], *[float(r[c]) for c in cols], *[float(r[c]) for c in shown]] for _, r in keep.iterrows()]
    return table(["class", *cols, *shown], body)


def segmentation_worst(run: RunData, *, pictures: int = 8) -> str:
    """The worst cases (lowest mean Dice first): one slice each of image, reference,
    prediction and errors, with the case's per-class values; then the ranking of all cases."""
    ranking, key = _case_table(run)
    if ranking is None:
        return note("No per-sample segmentation metric in samples.parquet.")
    info, arrays, problem = _load_worst(run)
    parts = []
    if problem:
        parts.append(note(problem))
    if info is not None:
        kept = {c["id"]: (j, c) for j, c in enumerate(info.get("cases") or [])}
        order = [sid for sid in ranking.index if sid in kept][:pictures]
        classes = list(info.get("classes") or [])
        cards = []
        for sid in order:
            j, c = kept[sid]
            where = f"slice {c['slice']} of the last axis ({c['shape'][-1]})" if c.get("slice") is not None else "2-D"
            val = ranking.loc[sid, key]
            cards.append(f'<div class="card"><h4>{esc(sid)} — mean {esc(key)} {fmt(val)} · {esc(where)}</h4>'
                         f"{_seg_panels(arrays, j, bool(c.get('has_image')))}{_case_rows(run, sid)}</div>")
            values = set(np.unique(arrays[f"reference_{j}"]).tolist()) | set(np.unique(arrays[f"prediction_{j}"]).tolist())
            cards[-1] = cards[-1].replace("</h4>", "</h4>" + _legend(classes, {int(v) for v in values}), 1)
        parts.append(f'<div class="cards">{"".join(cards)}</div>')
        parts.append(note(f"Pictures: the {len(kept)} cases the run kept ({info.get('rule', '')}), shown worst first "
                          f"by the mean {key} over classes in samples.parquet."))
    rows = [[sid, *[float(v) for v in r.values]] for sid, r in ranking.head(TABLE_ROWS).iterrows()]
    parts.append("<h3>Cases, worst first (mean over classes)</h3>" + table(["id", *ranking.columns], rows))
    return "".join(parts)


# -- classification ------------------------------------------------------------------------------
def _errors(run: RunData) -> tuple[Any, str]:
    """The errors, most confident first, and a sentence saying how they were chosen."""
    s = run.samples[(run.samples["status"] == "ok") & run.samples["label"].notna()].copy()
    opts = (run.config.get("task") or {}).get("options") or {}
    if opts.get("multilabel", True) is False:  # multi-class: the arg-max class is the prediction
        s = s[s["score"].notna()]  # stored labels carry no score: no confidence to rank by
        idx = s.groupby("id", sort=False)["score"].idxmax()
        pred = s.loc[idx, ["id", "class", "score"]].rename(columns={"class": "predicted", "score": "confidence"})
        true = s[s["label"] == 1][["id", "class", "score"]].rename(columns={"class": "true class", "score": "p(true)"})
        e = pred.merge(true, on="id")
        e = e[e["predicted"] != e["true class"]].sort_values(["confidence", "id"], ascending=[False, True], kind="stable")
        return e, "Multi-class: the predicted class is the highest score; errors sorted by that score."
    s["error"] = np.where((s["label"] == 0) & (s["score"] >= THRESHOLD), "false positive",
                          np.where((s["label"] == 1) & (s["score"] < THRESHOLD), "false negative", ""))
    e = s[s["error"] != ""].copy()
    e["confidence"] = np.where(e["error"] == "false positive", e["score"], 1 - e["score"])
    e = e.sort_values(["confidence", "id", "class"], ascending=[False, True, True], kind="stable")
    e = e[["id", "class", "error", "score", "label", "confidence"]].astype({"label": int})  # 0/1, not 0.000
    return e, (f"Multi-label at threshold {THRESHOLD}: a false positive scores ≥ {THRESHOLD} on a negative label, a "
               f"false negative < {THRESHOLD} on a positive one; confidence = score or 1 − score, most confident first.")


def _fact(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return fmt(v) if isinstance(v, float) else esc(v)


def classification_errors(run: RunData, *, pictures: int = 8) -> str:
    """The most confident errors: a table, and the first ones with their input image."""
    errors, how = _errors(run)
    if errors.empty:
        return note("No classification error at this threshold.")
    parts = [note(f"{how} {len(errors)} errors.")]
    first = errors.head(pictures)
    images, notes = input_images(run, list(dict.fromkeys(first["id"].tolist())))
    cards = []
    for _, r in first.iterrows():
        pics = "".join(img(png_bytes(p, min_side=_PANEL_MIN), alt=str(r["id"])) for p in images.get(str(r["id"]), []))
        facts = "".join(f"<tr><th>{esc(k)}</th><td>{_fact(v)}</td></tr>" for k, v in r.items() if k != "id")
        cards.append(f'<div class="card"><h4>{esc(r["id"])}</h4><div class="panels">{pics}</div>'
                     f"<table>{facts}</table></div>")
    parts.append(f'<div class="cards">{"".join(cards)}</div>')
    parts += [note(n) for n in notes[:5]]
    rows = [[v if not (isinstance(v, float) and math.isnan(v)) else None for v in r] for r in
            errors.head(TABLE_ROWS).itertuples(index=False)]
    parts.append("<h3>Most confident errors</h3>" + table(list(errors.columns), rows))
    return "".join(parts)
