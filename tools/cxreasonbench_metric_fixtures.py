"""Reference figures of CXReasonBench's ``evaluation/metric.py`` (ttumyche/CXReasonBench commit
72357fe) on a generated corpus, for ``tests/metrics/text/test_cxreasonbench.py``.

    git --git-dir=/work/.mirror/ttumyche+CXReasonBench/repo show 72357fe:evaluation/metric.py > /tmp/metric.py
    python tools/cxreasonbench_metric_fixtures.py --metric /tmp/metric.py \
        [--out tests/metrics/text/data/cxreasonbench_metric_72357fe.json] [--seed 0]

Simulates conversations the way ``evaluate_reasoning.py`` / ``evaluate_guidance.py`` gate them
(random judge verdicts per stage, random final answers in or out of the measured range, several
tasks of both kinds, with and without custom criteria), writes them as the harness's saved
scoring and inference JSONs plus the ``qa/<task>/path*/`` folders ``calculate_metrics`` globs,
imports the given ``metric.py`` and runs its ``calculate_metrics``, ``gather_scores`` and
``print_scores``. The fixture holds the inputs (stage scores, measurement answers, final
responses) and the harness's outputs (numbers; its ``'N/A'`` as null) — no harness code.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import math
import random
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MEASURE = {"projection", "rotation", "aortic_knob_enlargement", "carina_angle", "cardiomegaly",
           "mediastinal_widening", "descending_aorta_tortuous", "descending_aorta_enlargement"}


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return None if value == "N/A" else value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _values(rng: random.Random, task: str) -> tuple[str, str]:
    """A measurement answer and a final response (value in range, out of range, a range, none)."""
    if task == "projection":
        answer = "(a) Right: [0.1, 0.3], (c) Left: [0.5, 0.7]"
        r, left = rng.choice([0.2, 0.4]), rng.choice([0.6, 0.8])
        return answer, rng.choice([f"FINAL ANSWER: (a) Yes. VALUE: Right - {r}, Left - {left}", "FINAL ANSWER: (a) Yes"])
    lo = round(rng.uniform(0.3, 0.6), 2)
    hi = round(lo + 0.1, 2)
    inside, outside = round(lo + 0.05, 3), round(hi + 0.2, 3)
    return f"(b) {lo} - {hi}", rng.choice([f"FINAL ANSWER: (a) Yes. VALUE: {inside}", f"VALUE: {outside}",
                                           f"between {lo}-{hi}, VALUE: {inside}", f"{inside} or {outside}",
                                           "FINAL ANSWER: (a) Yes"])


def _path1(rng: random.Random, custom: bool) -> dict[str, Any]:
    s: dict[str, Any] = {"stage-init": rng.choice([1, 1, 0, -1])}  # the init judge answers True/False/IDK
    if s["stage-init"] == -1:
        return s
    for k in range(rng.randint(1, 3)):
        s[f"stage-criteria_{k}"] = rng.choice([1, 1, 1, 0, -2])
        if s[f"stage-criteria_{k}"] != 1:
            return s
    if custom:
        s["stage-custom_criteria"] = rng.choice([1, 1, -1, 0])
        if s["stage-custom_criteria"] != 1:
            return s
    for k in range(rng.randint(1, 3)):
        s[f"stage-bodypart_{k}"] = rng.choice([1, 1, 1, 0, -2])
        if s[f"stage-bodypart_{k}"] != 1:
            return s
    s["stage-measurement"] = rng.choice([1, 1, 0])
    if s["stage-measurement"] == 1:
        s["stage-final"] = rng.choice([1, 1, 0])
        s["stage-measured_value"] = "0.5"
    return s


def _guidance(rng: random.Random) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for k in range(rng.randint(1, 3)):  # no early stop in the guidance body parts
        s[f"stage-guidance-bodypart_{k}"] = rng.choice([1, 1, 1, 0, -2])
    if all(v == 1 for v in s.values()):
        s["stage-guidance-measurement"] = rng.choice([1, 1, 0])
        if s["stage-guidance-measurement"] == 1:
            s["stage-guidance-final"] = rng.choice([1, 1, 0])
            s["stage-measured_value_guidance"] = "0.5"
    return s


def _corpus(rng: random.Random, kind: str) -> dict[str, Any]:
    tasks = rng.sample(sorted(MEASURE | {"inclusion", "inspiration", "trachea_deviation",
                                         "ascending_aorta_enlargement"}), rng.randint(2, 7))
    cases: dict[str, list[dict[str, Any]]] = {}
    custom = {t: rng.random() < 0.4 for t in tasks}
    for task in tasks:
        rows = []
        for n in range(rng.randint(1, 9)):
            answer, response = _values(rng, task)
            scoring = _path1(rng, custom[task]) if kind == "reasoning" else _guidance(rng)
            rows.append({"dicom": f"d{n}", "scoring": scoring, "measurement_answer": answer, "final_response": response})
        cases[task] = rows
    return {"kind": kind, "custom": custom, "cases": cases}


def _write(corpus: dict[str, Any], base: Path) -> SimpleNamespace:
    qa, scoring_dir, inference_dir = base / "qa", base / "scoring", base / "inference"
    guidance = corpus["kind"] == "guidance"
    for task, rows in corpus["cases"].items():
        folders = (["path2/stage1", "path2/stage2", "path2/stage3"] + [f"re-path1/{s}" for s in
                   ("init", "stage1", "stage2", "stage3", "stage4")]) if guidance else \
            ["path1/init", "path1/stage1", "path1/stage2", "path1/stage3", "path1/stage4"] + \
            (["path1/stage1.5"] if corpus["custom"][task] else [])
        for f in folders:
            (qa / task / f).mkdir(parents=True, exist_ok=True)
        sub = Path("idk_init") / task if guidance else Path(task)
        for d in (scoring_dir / sub, inference_dir / sub):
            d.mkdir(parents=True, exist_ok=True)
        for row in rows:
            (scoring_dir / sub / f"{row['dicom']}.json").write_text(json.dumps(row["scoring"]))
            pre = "stage-guidance-" if guidance else "stage-"
            inference = {f"{pre}measurement": {"answer": row["measurement_answer"]},
                         f"{pre}final": {"response": row["final_response"]}}
            (inference_dir / sub / f"{row['dicom']}.json").write_text(json.dumps(inference))
    return SimpleNamespace(saved_dir_scoring=str(scoring_dir), saved_dir_inference=str(inference_dir),
                           qa_base_dir=str(qa), model_id="scripted")


def _printed(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if ": " in line:
            key, value = line.split(": ", 1)
            out[key] = None if value == "N/A" else float(value)
    return out


def _run(metric: Any, corpus: dict[str, Any], base: Path) -> dict[str, Any]:
    args = _write(corpus, base)
    per_dx = metric.calculate_metrics(args, corpus["kind"])
    results = {dx: {k: _plain(v) for k, v in fig.items()} for dx, fig in per_dx.items()}
    table = metric.gather_scores(corpus["kind"], per_dx)
    groups = {g: {k: _plain(v) for k, v in per_dx[g].items()} for g in ("total", "perception", "measurement")
              if g in per_dx}
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        if corpus["kind"] == "reasoning":
            metric.print_scores(table, ['wilson_score_binary', 'stage_score', 'wilson_score_measurement_matching',
                                        'wilson_score_consistency'], None)
        else:
            metric.print_scores(table, ['wilson_score_g_binary', 'g_stage_score', 'wilson_score_g_measurement_matching'], 'g')
    return {"per_task": results, "groups": groups, "printed": _printed(buffer.getvalue())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--metric", required=True, help="evaluation/metric.py of commit 72357fe")
    parser.add_argument("--out", default=str(ROOT / "tests/metrics/text/data/cxreasonbench_metric_72357fe.json"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=10, help="corpora per kind")
    a = parser.parse_args(argv)
    spec = importlib.util.spec_from_file_location("cxr_metric", a.metric)
    metric = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(metric)  # type: ignore[union-attr]
    rng = random.Random(a.seed)
    out = []
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the harness divides by zero counts in its review figures
        for kind in ("reasoning", "guidance"):
            for _ in range(a.n):
                corpus = _corpus(rng, kind)
                with tempfile.TemporaryDirectory() as tmp:
                    out.append({**corpus, **_run(metric, corpus, Path(tmp))})
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"harness": "ttumyche/CXReasonBench 72357fe evaluation/metric.py",
                                       "seed": a.seed, "corpora": out}))
    print(f"wrote {len(out)} corpora to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
