"""CXReasonBench's multi-stage reasoning figures, as its evaluation code computes them
(ttumyche/CXReasonBench commit 72357fe, ``evaluation/metric.py``), and the stage judges.

A case is one conversation (``tasks/cxreasonbench.py`` runs it). Each judged stage gets the
harness's score: ``1`` (judge said True), ``0`` (False, or anything unrecognised), ``-1`` (IDK),
``-2`` (N/A) — ``return_scoring_result`` in ``evaluation/scoring.py``. Per case the stage scores
are collapsed as ``calculate_metrics`` does (metric.py lines 190-211: a stage asked once keeps its
score; a stage asked several times — ``criteria_k``, ``bodypart_k`` — is 1 when every sub-score is
1, else 0; a stage never reached is 0). Per diagnostic task the figures are Wilson scores
(:func:`wilson_score`, metric.py lines 28-58, ``z = 1.96``) under the harness's names
(``{num_correct, wilson_score, adjusted_wilson, lower_bound, upper_bound, bayesian,
naive_score}_{stage}``; path 1: lines 215-455, path 2's guidance: lines 457-532 with the ``_g_``
infix), then averaged over tasks into ``total`` / ``perception`` / ``measurement`` (``gather_scores``,
lines 594-662) and printed as ``Completion`` / ``Depth`` / ``Consistency`` / ``Alignment``
(``print_scores``, lines 664-710; the names follow the harness's index order).

Where we differ (said again in docs/vlm.md): the harness writes ``'N/A'`` where a denominator is
0; we write ``None``. The measured value of a final answer is read from the final response with
the harness's regular expressions (metric.py lines 143-188 read ``stage-final``'s response; the
judge's value extraction, ``return_measured_value_result``, never enters a number, so it is not
asked). Path 2's review stage (``re-path1``, a randomly drawn other case) is not built: its
``_r_`` figures are absent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics.text._columns import ReplyColumns
from medimg_bench.metrics.text.open_judge import RUBRICS, Rubric, parse_cxreasonbench
from medimg_bench.registry import register_metric

__all__ = ["HARNESS", "PERCEPTION_TASKS", "MEASUREMENT_TASKS", "ALL_TASKS", "MULTI_BODYPART_TASKS",
           "STAGE_RUBRICS", "stage_rubrics", "verdict_score", "wilson_score", "collapse_stages",
           "measurement_match", "path1_figures", "guidance_figures", "gather_figures", "printed_scores",
           "CASE_COLUMNS", "CASE_FIGURES", "CXReasonBenchScores", "harness_figures", "PRINTED",
           "printed_figures"]

HARNESS = "ttumyche/CXReasonBench 72357fe (evaluation/evaluate_reasoning.py, evaluate_guidance.py, metric.py)"
# metric.py df_measure_type (lines 19-26); 'total' is the printing order
PERCEPTION_TASKS = ("inclusion", "inspiration", "trachea_deviation", "ascending_aorta_enlargement")
MEASUREMENT_TASKS = ("projection", "rotation", "aortic_knob_enlargement", "carina_angle", "cardiomegaly",
                     "mediastinal_widening", "descending_aorta_tortuous", "descending_aorta_enlargement")
ALL_TASKS = ("rotation", "projection", "cardiomegaly", "mediastinal_widening", "carina_angle",
             "aortic_knob_enlargement", "descending_aorta_enlargement", "descending_aorta_tortuous",
             "trachea_deviation", "inclusion", "inspiration", "ascending_aorta_enlargement")
# utils.py dx_task_multi_bodyparts: judged with the "all options" body-part rubric
MULTI_BODYPART_TASKS = ("inspiration", "rotation", "projection", "cardiomegaly", "trachea_deviation",
                        "mediastinal_widening", "aortic_knob_enlargement", "ascending_aorta_enlargement",
                        "descending_aorta_enlargement")

_WITH_Q = "- Question: {question}- Answer 1: {answer} - Answer 2: {response}"
_NO_Q = "- Answer 1: {answer} - Answer 2: {response}"
_LABELS = ("true", "false", "idk", "n/a")
_TAIL = (" Answer 2 may explain itself and end with \"FINAL ANSWER: ...\"; if it does not, take the "
         "option it states as its answer (e.g. after \"The answer is\").")
# Our wording of each stage judge's instructions (prompt.py stage_by_sysmsg says what each decides);
# prompt_dir= swaps in the harness's own text.
_TEXTS = {
    "criteria": ("Compare two answers to a multiple-choice question. Answer 1 is the reference option; "
                 "Answer 2 is a model's reply." + _TAIL + " Reply N/A if Answer 2 chooses \"None of the "
                 "above\". Reply True if it chooses the same option as Answer 1 (same letter in any case, or "
                 "the same option without its letter or in slightly different words). Otherwise reply False. "
                 "Output N/A, True or False and nothing else."),
    "custom_criteria": ("Compare two answers to a multiple-choice question. Answer 1 is the reference option; "
                        "Answer 2 is a model's reply." + _TAIL + " Reply True if Answer 2 chooses the same "
                        "option as Answer 1 (same letter in any case, or the same option without its letter). "
                        "Otherwise reply IDK. Output True or IDK and nothing else."),
    "bodypart_all": ("Compare two answers to a question that may have several correct options. Answer 1 lists "
                     "the reference options (e.g. \"(a) 1st image, (c) 3rd image\"); Answer 2 is a model's reply."
                     + _TAIL + " Reply N/A if Answer 2 chooses \"None of the above\". Reply True if it chooses "
                     "exactly the options of Answer 1 (by letter or content). Reply Partial (X) if every option "
                     "it chooses is correct but it misses some, X being how many it got. Reply False if it "
                     "chooses a wrong option or misses options otherwise. Output N/A, True, Partial (X) or False."),
    "bodypart_one": ("Compare two answers to a multiple-choice question. Answer 1 is the reference option "
                     "(e.g. \"(a) 1st image\"); Answer 2 is a model's reply." + _TAIL + " Reply N/A if Answer 2 "
                     "chooses \"None of the above\". Reply True if it chooses exactly the option of Answer 1 "
                     "(by letter or content). Reply False if it chooses any wrong option. Output N/A, True or False."),
    "measurement": ("Compare two answers. Answer 1 is the reference; Answer 2 is a model's reply." + _TAIL
                    + " Reply True if Answer 2 chooses the same option as Answer 1 (same letter in any case, "
                    "or the same option without its letter). Otherwise reply False. Output True or False."),
    "measurement_projection": ("Compare two answers. Answer 1 lists reference options with values (e.g. "
                               "\"(a) Right: [0.1, 0.2], (c) Left: [0.5, 0.6]\"); Answer 2 is a model's reply."
                               + _TAIL + " Reply True if Answer 2 matches Answer 1's options (by letter, or the "
                               "same options without letters). Reply Partial if it has at least one correct "
                               "option but does not match fully. Otherwise reply False. Output True, Partial "
                               "or False."),
    "final": ("Decide whether a model's reply (Answer 2) selects the answer given in Answer 1 to the question."
              + _TAIL + " If Answer 1 has one option, Answer 2 must select that option (by letter or content). "
              "If Answer 1 has several options, Answer 2 must select exactly one of them. Selecting several "
              "options where one is allowed, or an option not in Answer 1, is False. Also reply True if the "
              "meaning of Answer 2 matches the question's intent and Answer 1. Output True or False."),
}
_FOLLOWS = "CXReasonBench return_scoring_result, stage judge {key} (ttumyche/CXReasonBench 72357fe, evaluation/scoring.py, prompt.py)"


def _rubric(key: str) -> Rubric:
    query = _WITH_Q if key == "final" else _NO_Q  # the harness passes the question as a list only there
    return Rubric(f"cxreasonbench_{key}", _FOLLOWS.format(key=key), _TEXTS[key], "system", _LABELS,
                  parse_cxreasonbench, max_new_tokens=500, query=query)


#: the judge rubric of each stage kind (prompt.py stage_by_sysmsg keys); init is the shared
#: ``cxreasonbench_init`` rubric of :mod:`~medimg_bench.metrics.text.open_judge`
STAGE_RUBRICS: Mapping[str, Rubric] = MappingProxyType(
    {"init": RUBRICS["cxreasonbench_init"], **{k: _rubric(k) for k in _TEXTS}})


def stage_rubrics(prompt_dir: str | Path | None = None) -> dict[str, Rubric]:
    """The stage rubrics; a file ``<prompt_dir>/<stage kind>.txt`` (e.g. ``final.txt``, the
    harness's ``stage_by_sysmsg['final']`` text) replaces that kind's instructions."""
    out = dict(STAGE_RUBRICS)
    if prompt_dir is None:
        return out
    folder = Path(prompt_dir)
    if not folder.is_dir():
        raise ValueError(f"cxreasonbench: judge prompt_dir {str(folder)!r} is not a folder")
    for key in out:
        path = folder / f"{key}.txt"
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if not text.strip():
                raise ValueError(f"cxreasonbench: the judge prompt file {str(path)!r} is empty")
            out[key] = replace(out[key], template=text, source=str(path))
    return out


def verdict_score(label: str) -> int:
    """The harness's stage score of a judge verdict: true 1, idk -1, n/a -2, anything else 0."""
    return {"true": 1, "idk": -1, "n/a": -2}.get(label, 0)


def wilson_score(num_correct: float, num_trial: float, *, z: float = 1.96) -> dict[str, Any]:
    """``wilson_score_n_naive_score`` (metric.py lines 28-58): the Wilson centre, its interval
    (``lower_bound``, ``upper_bound``; statsmodels' ``proportion_confint(method="wilson")`` at the
    alpha whose z is 1.96), ``adjusted_wilson`` (centre - z x half-width), ``bayesian``
    ((k+1)/(n+2)) and ``naive_score`` (k/n). Every value None when ``num_trial`` is 0 (or the
    count is outside ``[0, num_trial]``)."""
    names = ("num_correct", "wilson_score", "adjusted_wilson", "lower_bound", "upper_bound", "bayesian",
             "naive_score")
    if not num_trial or not 0 <= num_correct <= num_trial:
        # no trials: the harness's 'N/A'. A count outside [0, n] (consistency sums the initial
        # scores, where an N/A verdict counts -2) makes the harness's sqrt fail; we give None
        return dict.fromkeys(names)
    k, n = num_correct, num_trial
    p = k / n
    centre = (p + z ** 2 / (2 * n)) / (1 + z ** 2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z ** 2 / (4 * n ** 2))
    lower = (p + z ** 2 / (2 * n) - half) / (1 + z ** 2 / n)
    upper = (p + z ** 2 / (2 * n) + half) / (1 + z ** 2 / n)
    return {"num_correct": k, "wilson_score": centre, "adjusted_wilson": centre - z * (upper - lower) / 2,
            "lower_bound": lower, "upper_bound": upper, "bayesian": (k + 1) / (n + 2), "naive_score": p}


def collapse_stages(scores: Mapping[str, Any], header: Sequence[str]) -> dict[str, int]:
    """One case's stage scores as metric.py lines 190-211 collapse them: ``scores`` maps the
    harness's stage keys (``init``, ``criteria_0``, ``custom_criteria``, ``guidance-bodypart_1`` …;
    text values such as ``measured_value`` are skipped) to scores; ``header`` the stages reported."""
    out: dict[str, int] = {}
    numeric = {k: v for k, v in scores.items() if not isinstance(v, str)}
    for key in dict.fromkeys(re.sub(r"\d+", "", k) for k in numeric):
        name = key.rstrip("_")
        if key in numeric:
            out[name] = int(numeric[key])
        else:
            results = [v for k, v in numeric.items() if k.startswith(key)]
            out[name] = 1 if len(results) == sum(results) else 0
    return {stage: out.get(stage, 0) for stage in header}


_ANSWER_NUM = re.compile(r"[-+]?\d*\.\d+|\d+")
_MODEL_NUM = re.compile(r"[+]?\d*\.\d+|\d+")
_RANGE = re.compile(r"\d+\.?\d*\s*-\s*\d+\.?\d*")


def measurement_match(task: str, answer: str, response: str) -> bool:
    """Whether the value in a final ``response`` lies in the measurement stage's ``answer`` range
    (metric.py lines 154-188): ranges in the response are dropped, then exactly one distinct
    number (``projection``: exactly two, right then left) must lie within the answer's bounds."""
    bounds = _ANSWER_NUM.findall(str(answer))
    values = _MODEL_NUM.findall(_RANGE.sub("", str(response)).replace(" ", ""))
    if task == "projection":
        if len(values) != 2:
            return False
        right, left = float(values[0]), float(values[-1])
        r, lf = bounds[:2], bounds[2:]
        return float(r[0]) <= right <= float(r[-1]) and float(lf[0]) <= left <= float(lf[-1])
    if len(set(values)) != 1 or not bounds:
        return False
    return float(bounds[0]) <= float(values[0]) <= float(bounds[-1])


#: the per-case row the task hands the metric (numbers; NaN where a stage was not asked)
CASE_COLUMNS = ("task_index", "has_custom", "init", "criteria", "custom_criteria", "bodypart", "measurement",
                "final", "match", "guidance", "g_bodypart", "g_measurement", "g_final", "g_match")


def _put(out: dict[str, Any], stage: str, info: Mapping[str, Any], infix: str = "") -> None:
    for name, value in info.items():
        out[f"{name}_{infix}{stage}"] = value


def _na_block(out: dict[str, Any], names: Sequence[str], infix: str = "") -> None:
    for stage in names:
        _put(out, stage, wilson_score(0, 0), infix)


def _conquer(levels: Sequence[tuple[int, int]]) -> list[int]:
    """The harness's ``conquer_stage_lst``: ``count`` copies of each ``level``."""
    return [level for level, count in levels for _ in range(int(count))]


def _mean_std(values: Sequence[int]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std())


def path1_figures(cases: Mapping[str, Any], *, task: str, has_custom: bool) -> dict[str, Any]:
    """One diagnostic task's path-1 figures (metric.py lines 215-455) from its cases' collapsed
    stage scores: ``cases`` holds equal-length arrays ``init``, ``criteria``, ``custom_criteria``,
    ``bodypart``, ``measurement``, ``final`` and ``match`` (the final value in range). ``{}`` when
    every initial answer was IDK (the harness drops the task then)."""
    c = {k: np.asarray(v) for k, v in cases.items()}
    n = len(c["init"])
    idk_init = int((c["init"] == -1).sum())
    pass_init = n - idk_init
    if not pass_init:
        return {}
    n_crit, n_body, n_meas, n_final = (int((c[s] == 1).sum()) for s in ("criteria", "bodypart", "measurement", "final"))
    correct_final = c["final"] == 1
    consistency = int(c["init"][correct_final].sum())
    refined_final = correct_final & c["match"].astype(bool)
    n_match, n_final_ref = int(c["match"].astype(bool).sum()), int(refined_final.sum())
    out: dict[str, Any] = {"inference_type": "reasoning", "dx": task}
    if has_custom:
        idk_custom = int((c["custom_criteria"] == -1).sum())
        pass_custom = n_crit - idk_custom
        trials_body, trials_binary = pass_custom, pass_custom + (pass_init - n_crit)
        flags = {"init_pass": wilson_score(pass_init, n), "init_idk": wilson_score(idk_init, n),
                 "custom_pass": wilson_score(pass_custom, n_crit), "custom_idk": wilson_score(idk_custom, n_crit)}
        levels = [(4, 1), (3, 1), (2, 1), (1, 0), (0, 0)]  # header2 indices, final/measurement/bodypart - 1
        tail = [(1, pass_custom - n_body), (0, pass_init - n_crit)]
    else:
        trials_body, trials_binary = n_crit, pass_init
        flags = {"init_pass": wilson_score(pass_init, n), "init_idk": wilson_score(idk_init, n),
                 "custom_pass": wilson_score(0, 0), "custom_idk": wilson_score(0, 0)}
        levels = [(4, 1), (3, 1), (2, 1)]
        tail = [(1, n_crit - n_body), (0, pass_init - n_crit)]
    for stage, info in flags.items():
        out.update({f"flag_{k}_{stage}": v for k, v in info.items()})
    conquer = _conquer([(levels[0][0], n_final), (levels[1][0], n_meas - n_final),
                        (levels[2][0], n_body - n_meas), *tail])
    conquer_ref = _conquer([(levels[0][0], n_final_ref), (levels[1][0], n_match - n_final_ref),
                            (levels[2][0], n_body - n_match), *tail])
    for stage, info in (("criteria", wilson_score(n_crit, pass_init)), ("bodypart", wilson_score(n_body, trials_body)),
                        ("measurement", wilson_score(n_meas, n_body)), ("final", wilson_score(n_final, n_meas)),
                        ("binary", wilson_score(n_final, trials_binary)),
                        ("consistency", wilson_score(consistency, n_meas))):
        _put(out, stage, info)
    out["stage_score"], out["stage_score_std"] = _mean_std(conquer)
    refined = ("measurement_matching", "measurement_refined", "final_refined", "binary_refined")
    if task in MEASUREMENT_TASKS:
        consistency_ref = int(c["init"][refined_final].sum())
        for stage, info in (("measurement_matching", wilson_score(n_match, n_meas)),
                            ("measurement_refined", wilson_score(n_match, n_body)),
                            ("final_refined", wilson_score(n_final_ref, n_match)),
                            ("binary_refined", wilson_score(n_final_ref, trials_binary))):
            _put(out, stage, info)
        out["stage_score_refined"], out["stage_score_std_refined"] = _mean_std(conquer_ref)
        _put(out, "consistency_refined", wilson_score(consistency_ref, n_match))
    else:
        _na_block(out, refined)
        out["stage_score_refined"] = out["stage_score_std_refined"] = None
        _na_block(out, ("consistency_refined",))
    out["num_conquer_stage"] = len(conquer)
    return out


def guidance_figures(cases: Mapping[str, Any], *, task: str) -> dict[str, Any]:
    """One diagnostic task's path-2 guidance figures (metric.py lines 457-532, the ``_g_`` keys)
    over the cases that went to guidance: arrays ``g_bodypart``, ``g_measurement``, ``g_final``,
    ``g_match``. The review (``_r_``) figures are not built."""
    c = {k: np.asarray(v) for k, v in cases.items()}
    n = len(c["g_bodypart"])
    n_body, n_meas, n_final = (int((c[s] == 1).sum()) for s in ("g_bodypart", "g_measurement", "g_final"))
    out: dict[str, Any] = {"inference_type": "guidance", "dx": task, "num_idk_for_guidance": n}
    for stage, info in (("bodypart", wilson_score(n_body, n)), ("measurement", wilson_score(n_meas, n_body)),
                        ("final", wilson_score(n_final, n_meas)), ("binary", wilson_score(n_final, n))):
        _put(out, stage, info, "g_")
    conquer = _conquer([(3, n_final), (2, n_meas - n_final), (1, n_body - n_meas), (0, n - n_body)])
    out["g_stage_score"], out["g_stage_score_std"] = _mean_std(conquer)
    refined = ("measurement_matching", "measurement_refined", "final_refined", "binary_refined")
    if task in MEASUREMENT_TASKS:
        match = c["g_match"].astype(bool)
        n_match, n_final_ref = int(match.sum()), int(((c["g_final"] == 1) & match).sum())
        for stage, info in (("measurement_matching", wilson_score(n_match, n_meas)),
                            ("measurement_refined", wilson_score(n_match, n_body)),
                            ("final_refined", wilson_score(n_final_ref, n_match)),
                            ("binary_refined", wilson_score(n_final_ref, n))):
            _put(out, stage, info, "g_")
        conquer_ref = _conquer([(3, n_final_ref), (2, n_match - n_final_ref), (1, n_body - n_match), (0, n - n_body)])
        out["g_stage_score_refined"], out["g_stage_score_std_refined"] = _mean_std(conquer_ref)
    else:
        _na_block(out, refined, "g_")
        out["g_stage_score_refined"] = out["g_stage_score_std_refined"] = None
    out["num_conquer_stage_g"] = len(conquer)
    out["num_conquer_stage_g_refined"] = len(conquer) if task in MEASUREMENT_TASKS else None
    return out


def _number(value: Any) -> bool:
    return value is not None and not isinstance(value, (str, list, bool))


def gather_figures(per_task: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``gather_scores`` (metric.py lines 594-662): each numeric figure's mean over the tasks
    (``total``), the perception tasks and the measurement tasks (a group only when it has a
    task; path 1 counts the tasks with ``num_conquer_stage`` != 0). None where no task has it."""
    groups: dict[str, list[Mapping[str, Any]]] = {"total": [], "perception": [], "measurement": []}
    for task, figures in per_task.items():
        if figures.get("num_conquer_stage", 1) == 0:
            continue
        groups["total"].append(figures)
        groups["perception" if task in PERCEPTION_TASKS else "measurement"].append(figures)
    keys = list(next(iter(per_task.values()), {}))
    out: dict[str, dict[str, Any]] = {}
    for group, members in groups.items():
        if not members and group != "total":
            continue
        row: dict[str, Any] = {"dx": group}
        for key in keys:
            if key in ("dx", "inference_type"):
                row.setdefault("inference_type", members[0].get("inference_type") if members else None)
                continue
            values = [m[key] for m in members if _number(m.get(key))]
            row[key] = float(np.mean(values)) if values else None
        out[group] = row
    return out


def _printed(row: Mapping[str, Any], target: str, task: str, step: str | None) -> tuple[Any, Any]:
    """One task's printed score and refined score for ``target`` (print_scores, lines 671-702)."""
    measured = task in MEASUREMENT_TASKS and row.get(f"{target}_refined", "absent") != "absent"
    if "wilson" in target:
        k = row.get(target.replace("wilson_score", "num_correct"))
        if k is None:
            return None, None
        if k == 0:
            return 0.0, 0.0
        lower, upper = row[target.replace("wilson_score", "lower_bound")], row[target.replace("wilson_score", "upper_bound")]
        adjusted = row[target] * (1 - (upper - lower) / 2)
        score = round(float(adjusted) * 100, 2)
        if not measured:
            return score, score
        naive = row.get(f"naive_score_{step}_measurement_matching" if step else "naive_score_measurement_matching")
        return score, (None if naive is None else float(np.round(adjusted * naive * 100, 2)))
    value = row.get(target)
    score = None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    if not measured:
        return score, score
    ref = row.get(f"{target}_refined")
    return score, (None if ref is None else float(np.round(ref, 2)))


_PRINT_NAMES = ("Completion", "Depth", "Consistency", "Alignment")


def printed_scores(per_task: Mapping[str, Mapping[str, Any]], *, step: str | None = None) -> dict[str, Any]:
    """What ``print_scores`` prints (metric.py lines 664-710): for path 1 (``step`` None) the
    targets ``wilson_score_binary``, ``stage_score``, ``wilson_score_measurement_matching``,
    ``wilson_score_consistency`` named Completion, Depth, Consistency, Alignment (the harness's
    index order); for guidance (``step='g'``) the first three with the ``g`` infix. Each
    ``<name>_score`` (and ``_refined`` for Completion, Depth, Alignment) is the mean over the
    tasks that have it of the per-task value x100 (Wilson targets: centre x (1 - half-width)),
    rounded to 2 decimals; None when no task has it. ``per_task`` adds the per-task values."""
    if step is None:
        targets = ["wilson_score_binary", "stage_score", "wilson_score_measurement_matching", "wilson_score_consistency"]
    else:
        targets = [f"wilson_score_{step}_binary", f"{step}_stage_score", f"wilson_score_{step}_measurement_matching"]
    collected: dict[str, list[Any]] = {}
    table: dict[str, dict[str, Any]] = {}
    for task in ALL_TASKS:
        row = per_task.get(task)
        for i, target in enumerate(targets):
            score, refined = _printed(row, target, task, step) if row else (None, None)
            name = _PRINT_NAMES[i]
            collected.setdefault(f"{name}_score", []).append(score)
            if name != "Consistency":
                collected.setdefault(f"{name}_refined", []).append(refined)
            if row:
                table.setdefault(task, {})[f"{name}_score"] = score
                if name != "Consistency":
                    table[task][f"{name}_refined"] = refined
    out: dict[str, Any] = {}
    for key, values in collected.items():
        kept = [v for v in values if v is not None]
        out[key] = float(np.round(np.mean(kept), 2)) if kept else None
    out["per_task"] = table
    return out


def _per_task(table: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(path1, guidance)`` per-task figures of a :data:`CASE_COLUMNS` table."""
    col = {c: table[:, j] for j, c in enumerate(CASE_COLUMNS)}
    path1, guide = {}, {}
    for k in sorted({int(v) for v in col["task_index"]}, key=lambda i: ALL_TASKS[i]):  # sorted(glob)
        task, m = ALL_TASKS[k], col["task_index"] == k
        cases = {s: col[s][m] for s in ("init", "criteria", "custom_criteria", "bodypart", "measurement",
                                        "final", "match")}
        figures = path1_figures(cases, task=task, has_custom=bool(col["has_custom"][m].any()))
        if figures:
            path1[task] = figures
        g = m & (col["guidance"] == 1)
        if g.any():
            guide[task] = guidance_figures({s: col[s][g] for s in ("g_bodypart", "g_measurement", "g_final",
                                                                   "g_match")}, task=task)
    return path1, guide


def harness_figures(table: np.ndarray) -> dict[str, Any]:
    """The harness's figures of a :data:`CASE_COLUMNS` table (one row per case): ``path1`` and
    ``guidance``, each with ``per_task``, ``groups`` (total / perception / measurement) and
    ``printed`` (print_scores)."""
    path1, guide = _per_task(table)
    return {"harness": HARNESS,
            "path1": {"per_task": path1, "groups": gather_figures(path1) if path1 else {},
                      "printed": printed_scores(path1)},
            "guidance": {"per_task": guide, "groups": gather_figures(guide) if guide else {},
                         "printed": printed_scores(guide, step="g")},
            "not_built": "path 2's review stage (re-path1): no _r_ figures"}


#: the printed scores (print_scores) of each path, as ``summary.json["cxreasonbench"][path]["printed"]``
PRINTED = (("path1", ("Completion_score", "Depth_score", "Consistency_score", "Alignment_score")),
           ("guidance", ("Completion_score", "Depth_score", "Consistency_score")))


def printed_figures(table: np.ndarray) -> np.ndarray:
    """The :data:`PRINTED` scores of a :data:`CASE_COLUMNS` table as one vector (NaN for None),
    without the groups: what ``compare`` resamples."""
    path1, guide = _per_task(table)
    printed = {"path1": printed_scores(path1), "guidance": printed_scores(guide, step="g")}
    return np.asarray([np.nan if printed[p][n] is None else printed[p][n] for p, names in PRINTED for n in names],
                      dtype=np.float64)


#: the per-case columns the summary gets (mean, bootstrap CI); init_idk has no direction (an IDK
#: is not an error here: it sends the case to guidance)
CASE_FIGURES = ("init_correct", "init_idk", "final_correct", "guidance_final_correct")


@register_metric("cxreasonbench_reasoning", tags=("vqa", "text", "reasoning"))
class CXReasonBenchScores(ReplyColumns):
    """``update(cases, tasks)``: ``cases`` one dict per conversation with the collapsed stage
    scores of :data:`CASE_COLUMNS` (``task_index`` excepted), ``tasks`` their diagnostic task
    names. Per-case columns (bootstrap CIs of their means in the summary): ``init_correct``,
    ``init_idk``, ``final_correct`` (path 1's final decision judged True) and
    ``guidance_final_correct`` (NaN for cases not sent to guidance); ``summary.json
    ["cxreasonbench"]`` gets the harness's figures (module docstring)."""

    name = "cxreasonbench_reasoning"
    higher_is_better = True
    directions = MappingProxyType({"init_idk": None})
    columns = CASE_FIGURES

    def __init__(self, *, class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=None)
        self.add_state("rows", [], dist_reduce_fx="cat")

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, Mapping) or isinstance(targets, str) or len(preds) != len(targets):
            raise ValueError(f"{self.name}: expected equal-length lists of case dicts and diagnostic task names")
        rows = []
        for case, task in zip(preds, targets):
            if task not in ALL_TASKS:
                raise ValueError(f"{self.name}: unknown diagnostic task {task!r}; the harness's tasks: {list(ALL_TASKS)}")
            try:
                row = [float(ALL_TASKS.index(task))] + [float(case[c]) for c in CASE_COLUMNS[1:]]
            except KeyError as exc:
                raise ValueError(f"{self.name}: a case lacks {exc}; expected {list(CASE_COLUMNS[1:])}") from exc
            if any(math.isinf(v) for v in row):
                raise ValueError(f"{self.name}: infinite stage score in {case}")
            rows.append(row)
        self._add_ids(ids, len(rows))
        self.rows.append(torch.tensor(rows, dtype=torch.float64).reshape(-1, len(CASE_COLUMNS)))

    def _table(self) -> np.ndarray:
        return torch.cat(self.rows).numpy() if self.rows else np.zeros((0, len(CASE_COLUMNS)))

    def figures(self) -> dict[str, Any]:
        """The harness's figures (:func:`harness_figures`) of the cases seen."""
        return harness_figures(self._table())

    def summary_notes(self) -> dict[str, Any]:
        """``summary.json["cxreasonbench"]``: :meth:`figures`."""
        return {"cxreasonbench": self.figures()}

    def values(self) -> tuple[list[str], torch.Tensor]:
        t = torch.as_tensor(self._table())
        c = {name: t[:, j] for j, name in enumerate(CASE_COLUMNS)}
        nan = torch.full_like(c["init"], float("nan"))
        table = torch.stack([(c["init"] == 1).double(), (c["init"] == -1).double(), (c["final"] == 1).double(),
                             torch.where(c["guidance"] == 1, (c["g_final"] == 1).double(), nan)], 1)
        return list(self.ids), table
