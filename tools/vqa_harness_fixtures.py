"""Run each VQA harness's own scoring code on the generated corpus (tools/vqa_corpus.py) and store
its per-answer decisions and aggregate figures as test fixtures (their numbers, never their code)
under tests/metrics/text/data/vqa_harness/.

Harnesses and commits (fetch the repositories, then `git archive COMMIT | tar -x -C DIR`):

    microsoft/LLaVA-Med          ad758b6 (initial release) and b9a98a7 (tag v1.0.0):
                                 llava/eval/run_eval.py `evaluate`, llava/eval/eval_science_qa.py
    corentin-ryr/MultiMedEval    d9ac283: task_families.VQA.evaluate, vqa.VQARad,
                                 qa.MedQA.get_predicted_answer, dynamic_datasets.get_predicted_answer
    EvolvingLMMs-Lab/lmms-eval   9f7638b (refs/pull/1355, medevalkit tasks): vqa_rad / slake /
                                 pmc_vqa utils.*_process_results, eval_utils.judge_multi_choice
    open-compass/VLMEvalKit      e8e78f0 and 18fc37a: utils/matching_util.can_infer;
                                 dataset/utils/multiple_choice.eval_vanilla (e8e78f0)

    python tools/vqa_harness_fixtures.py --src /tmp/vqa_harness   # folders named OWNER+NAME@COMMIT

Needs nltk, rouge, tabulate, torchmetrics (pip). Only imports that the scoring code does not use
are stubbed (HF datasets / hub downloads, report-generation metrics, VLMEvalKit's file helpers);
tabulate's table formatting is bypassed so the figures keep full precision (run_eval.evaluate
returns the rows it would print). Output: one gzip JSON-lines file of decisions per harness plus
meta.json (commits, package versions, corpus sizes, aggregate figures).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import io
import json
import random
import runpy
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vqa_corpus import build_corpus  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "tests/metrics/text/data/vqa_harness"


def _stub(name: str, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    if "__path__" not in attrs:
        mod.__path__ = []
    sys.modules[name] = mod
    return mod


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _purge(prefixes: tuple[str, ...]) -> None:
    for k in [k for k in sys.modules if k.split(".")[0] in prefixes]:
        del sys.modules[k]


# -- LLaVA-Med -------------------------------------------------------------------------------------
def llava_med_candidates(co: list[dict]) -> list:
    """The candidate list the corpus uses for run_eval's "open accuracy" (its train_open_answers
    file): every reference of the corpus, the distractors, and one int (the harness str()s ints)."""
    from vqa_corpus import DISTRACTORS

    return sorted({it["answer"] for it in co} | set(DISTRACTORS)) + [2]


def run_llava_med(root: Path, co: list[dict], mcq: list[dict]) -> tuple[list[dict], dict]:
    evaldir = root / "llava/eval"
    _purge(("run_eval", "eval_metrics"))
    sys.path.insert(0, str(evaldir))
    try:
        mod = _load("run_eval", evaldir / "run_eval.py")
        mod.tabulate = lambda rows, headers=None: {k: v for k, v in rows}  # full-precision figures
        cand = {"0": llava_med_candidates(co)}

        def gt(it, i):
            return {"id": i, "conversations": [{"value": it["question"]}, {"value": it["answer"]}],
                    "answer_type": it["answer_type_original"]}

        def pred(it, i):
            return {"question_id": i, "text": it["response"]}

        dummy = {"question": "q", "answer": "x", "answer_type_original": "OPEN", "response": "x"}
        rows = []
        for i, it in enumerate(co):
            buf = io.StringIO()
            if it["answer_type_original"] == "CLOSED":
                with contextlib.redirect_stdout(buf):
                    fig = mod.evaluate([gt(it, i), gt(dummy, -1)], [pred(it, i), pred(dummy, -1)], cand)
                counted = int(buf.getvalue().split("num_open ")[1].split()[0])  # (the closed count)
                rows.append({"id": it["id"], "counted": counted,
                             "hit": fig["yes/no accuracy"] / 100 if counted else None})
            else:
                with contextlib.redirect_stdout(buf):
                    fig = mod.evaluate([gt(it, i)], [pred(it, i)], cand)
                rows.append({"id": it["id"], **{k: v / 100 for k, v in fig.items() if k != "yes/no accuracy"}})
        with contextlib.redirect_stdout(io.StringIO()):
            agg = mod.evaluate([gt(it, i) for i, it in enumerate(co)], [pred(it, i) for i, it in enumerate(co)], cand)
    finally:
        sys.path.remove(str(evaldir))
    return rows, {"figures_x100": agg, "candidates": cand["0"]}


def run_llava_sqa(root: Path, mcq: list[dict]) -> list[dict]:
    """eval_science_qa.py run as a script on the multiple-choice corpus (its random draws seeded).
    The script knows the letters A-E only (``--options`` default) and fails on a reference past E,
    so those questions are left out of its run."""
    mcq = [it for it in mcq if it["answer"] in "ABCDE"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        problems = {it["id"]: {"choices": it["options"], "answer": ord(it["answer"]) - 65} for it in mcq}
        (tmp / "problems.json").write_text(json.dumps(problems))
        (tmp / "pid_splits.json").write_text(json.dumps({"test": list(problems)}))
        with open(tmp / "res.jsonl", "w") as f:
            for it in mcq:
                f.write(json.dumps({"question_id": it["id"], "text": it["response"], "prompt": "<image>q"}) + "\n")
        argv = sys.argv
        sys.argv = ["eval_science_qa.py", "--base-dir", str(tmp), "--result-file", str(tmp / "res.jsonl"),
                    "--output-file", str(tmp / "out.json"), "--output-result", str(tmp / "result.json")]
        random.seed(0)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                runpy.run_path(str(root / "llava/eval/eval_science_qa.py"), run_name="__main__")
        finally:
            sys.argv = argv
        out = json.loads((tmp / "out.json").read_text())
    rows = {}
    for verdict in ("correct", "incorrect"):
        for a in out[verdict]:
            rows[a["question_id"]] = {"id": a["question_id"], "parsed_ans": a["parsed_ans"],
                                      "correct": verdict == "correct"}
    for it in mcq:  # the harness drew a random option where the letter is not one of options[:n]
        r = rows[it["id"]]
        r["random"] = r["parsed_ans"] not in ["A", "B", "C", "D", "E"][: len(it["options"])]
        if r["random"]:
            r["correct"] = None  # a draw: its outcome is chance, not a decision
    return [rows[it["id"]] for it in mcq]


# -- MultiMedEval ---------------------------------------------------------------------------------
def run_multimedeval(root: Path, co: list[dict], mcq: list[dict]) -> tuple[list[dict], list[dict], dict]:
    _purge(("multimedeval",))
    _stub("multimedeval", __path__=[str(root / "multimedeval")])
    _stub("multimedeval.report_comparison_utils", compute_bertscore=None, compute_composite=None,
          compute_meteor=None)
    if "datasets" not in sys.modules:
        _stub("datasets", Dataset=object, load_dataset=None)
    _stub("gdown")
    import multimedeval.qa as qa
    import multimedeval.vqa as vqa
    from multimedeval.dynamic_datasets import get_predicted_answer as dyn_pred
    from multimedeval.utils import BatcherOutput
    from torchmetrics.text import BLEUScore

    def bench(items):
        b = object.__new__(vqa.VQARad)
        b.bleu, b.dataset = BLEUScore(n_gram=1), [{"question": it["question"], "answer": it["answer"]} for it in items]
        return b

    def preds(items):
        return [{"answer": BatcherOutput(text=it["response"]), "idx": i} for i, it in enumerate(items)]

    # which questions VQA.evaluate counts as closed, read from its own figures: next to a closed
    # probe answered right, closedQuestionsAccuracy is (d + 1) / 2 for a closed question with
    # decision d and 1 for an open one; next to a probe answered wrong, d / 2 and 0. The sum is
    # d + 0.5 for a closed question and 1 for an open one.
    right = {"question": "q", "answer": "yes", "response": "yes"}
    wrong = {"question": "q", "answer": "yes", "response": "zz"}
    rows = []
    for it in co:
        m = bench([it]).evaluate(preds([it])).metrics
        s = sum(bench([it, p]).evaluate(preds([it, p])).metrics["closedQuestionsAccuracy"] for p in (right, wrong))
        closed = s != 1.0
        rows.append({"id": it["id"], "closed": closed,
                     "correct": s - 0.5 if closed else m["openQuestionsAccuracy"],
                     "recall": m["recall"], "F1": m["F1"], "bleu": m["bleu"]})
    agg = bench(co).evaluate(preds(co)).metrics
    medqa = object.__new__(qa.MedQA)
    medqa.bleu_scorer = BLEUScore(n_gram=1)
    dyn = types.SimpleNamespace(bleu_scorer=BLEUScore(n_gram=1))
    mrows = []
    for it in mcq:
        letters = [chr(65 + i) for i in range(len(it["options"]))]
        key = medqa.get_predicted_answer(it["response"], {"options": [{"key": k, "value": v} for k, v in zip(letters, it["options"])]})
        listed = [f"{k}. {v}" for k, v in zip(letters, it["options"])]
        d = dyn_pred(dyn, it["response"], {"options": listed})
        mrows.append({"id": it["id"], "medqa": None if key == "Invalid answer" else key.upper(),
                      "dynamic": None if d == "Invalid answer" else letters[[o.lower() for o in listed].index(d)]})
    return rows, mrows, {"figures": agg}


# -- lmms-eval ------------------------------------------------------------------------------------
def run_lmms_eval(root: Path, co: list[dict], mcq: list[dict]) -> tuple[list[dict], list[dict], dict]:
    _purge(("lmms_eval",))
    base = root / "lmms_eval/tasks/medevalkit"
    for name in ("lmms_eval", "lmms_eval.tasks", "lmms_eval.tasks.medevalkit"):
        _stub(name)
    if "huggingface_hub" not in sys.modules:
        _stub("huggingface_hub", hf_hub_download=None, snapshot_download=None)
    eu = _load("lmms_eval.tasks.medevalkit.eval_utils", base / "eval_utils.py")
    rad = _load("lmms_eval.tasks.medevalkit.vqa_rad.utils", base / "vqa_rad/utils.py")
    slake = _load("lmms_eval.tasks.medevalkit.slake.utils", base / "slake/utils.py")
    pmc = _load("lmms_eval.tasks.medevalkit.pmc_vqa.utils", base / "pmc_vqa/utils.py")
    rows, per = [], {"vqa_rad": [], "slake": []}
    for it in co:
        a = rad.vqa_rad_process_results({"question": it["question"], "answer": it["answer"]}, [it["response"]])
        s = slake.slake_process_results({"question": it["question"], "answer": it["answer"],
                                         "answer_type": it["answer_type_original"]}, [it["response"]])
        per["vqa_rad"].append(a)
        per["slake"].append(s)
        rows.append({"id": it["id"], "vqa_rad": a, "slake": s})
    agg = {v: {k: eu.agg_mean([r[k] for r in per[v]]) for k in per[v][0]} for v in per}
    mrows = []
    for it in mcq:
        row = {"id": it["id"], "judge_multi_choice": eu.judge_multi_choice(it["options"], it["answer"], it["response"])}
        if len(it["options"]) == 4:  # the PMC-VQA task itself: "A:..." choices, the answer's text
            doc = {f"Choice {k}": f"{k}:{v}" for k, v in zip("ABCD", it["options"])}
            doc["Answer"] = it["options"][ord(it["answer"]) - 65]
            row["pmc_vqa_task"] = bool(pmc.pmc_vqa_process_results(doc, [it["response"]])["accuracy"])
        mrows.append(row)
    return rows, mrows, {"figures": agg}


# -- VLMEvalKit -----------------------------------------------------------------------------------
def _vlmeval_matching(root: Path, commit: str):
    _purge(("vlmeval",))
    import logging

    get_logger = logging.getLogger
    _stub("vlmeval")
    _stub("vlmeval.smp", get_logger=get_logger, cn_string=lambda s: False, d2df=None, dump=None,
          get_pred_file_format=None, istype=None, load=None, timestr=None)
    _stub("vlmeval.smp.log", get_logger=get_logger)
    _stub("vlmeval.smp.vlm", build_option_str=lambda d: " ".join(f"{k}. {v}" for k, v in d.items()))
    _stub("vlmeval.utils")
    mu = _load("vlmeval.utils.matching_util", root / "vlmeval/utils/matching_util.py")
    sys.modules["vlmeval.utils"].__dict__.update(can_infer=mu.can_infer, can_infer_lego=mu.can_infer_lego,
                                                 track_progress_rich=None)
    return mu


def run_vlmevalkit(root: Path, commit: str, mcq: list[dict]) -> list[dict]:
    import pandas as pd

    mu = _vlmeval_matching(root, commit)
    mc = None
    if (root / "vlmeval/dataset/utils/multiple_choice.py").exists() and commit == "e8e78f0":
        _stub("vlmeval.dataset")
        _stub("vlmeval.dataset.utils")
        mc = _load("vlmeval.dataset.utils.multiple_choice", root / "vlmeval/dataset/utils/multiple_choice.py")

    class FailingJudge:  # every judge reply fails, so VLMEvalKit falls back to a random letter
        def generate(self, prompt, **kw):
            return "Failed to obtain answer via API"

    rows = []
    random.seed(0)
    for it in mcq:
        choices = {chr(65 + i): o for i, o in enumerate(it["options"])}
        inferred = mu.can_infer(it["response"], dict(choices))
        row = {"id": it["id"], "can_infer": inferred if inferred else None}
        if mc is not None:
            item = pd.Series({"question": it["question"], "prediction": it["response"], "answer": it["answer"],
                              "GT": it["answer"], **choices})
            row["hit_exact_matching"] = mc.eval_vanilla(None, item)["hit"]
            judged = mc.extract_answer_from_item(FailingJudge(), item)
            row["random_with_failing_judge"] = "randomly generate" in judged["log"]
        rows.append(row)
    return rows


def _write(name: str, rows: list[dict]) -> None:
    with gzip.open(OUT / f"{name}.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, required=True, help="folder holding OWNER+NAME@COMMIT trees")
    ap.add_argument("--only", nargs="*", default=None, help="harness families to (re)run: llava_med multimedeval lmms_eval vlmevalkit")
    a = ap.parse_args()
    import importlib.metadata as md

    def want(name):
        return a.only is None or name in a.only

    OUT.mkdir(parents=True, exist_ok=True)
    co, mcq = build_corpus(0)
    _write("corpus_closed_open", co)
    _write("corpus_mcq", mcq)
    meta = {"corpus": {"closed_open": len(co), "mcq": len(mcq), "seed": 0, "generator": "tools/vqa_corpus.py"},
            "packages": {p: md.version(p) for p in ("nltk", "rouge", "torchmetrics", "tabulate", "pandas")},
            "harness": {}}
    if (OUT / "meta.json").exists():
        meta["harness"] = json.loads((OUT / "meta.json").read_text())["harness"]
    for commit in ("ad758b6", "b9a98a7") if want("llava_med") else ():
        rows, agg = run_llava_med(a.src / f"microsoft+LLaVA-Med@{commit}", co, mcq)
        _write(f"llava_med_{commit}", rows)
        meta["harness"][f"llava_med_{commit}"] = {"repo": "microsoft/LLaVA-Med", "commit": commit, **agg}
    if want("llava_med"):
        _write("llava_med_sqa_ad758b6", run_llava_sqa(a.src / "microsoft+LLaVA-Med@ad758b6", mcq))
    if want("multimedeval"):
        rows, mrows, agg = run_multimedeval(a.src / "corentin-ryr+MultiMedEval@d9ac283", co, mcq)
        _write("multimedeval_d9ac283", rows)
        _write("multimedeval_qa_d9ac283", mrows)
        meta["harness"]["multimedeval_d9ac283"] = {"repo": "corentin-ryr/MultiMedEval", "commit": "d9ac283", **agg}
    if want("lmms_eval"):
        rows, mrows, agg = run_lmms_eval(a.src / "EvolvingLMMs-Lab+lmms-eval@9f7638b", co, mcq)
        _write("lmms_eval_9f7638b", rows)
        _write("lmms_eval_mcq_9f7638b", mrows)
        meta["harness"]["lmms_eval_9f7638b"] = {"repo": "EvolvingLMMs-Lab/lmms-eval", "commit": "9f7638b", **agg}
    for commit in ("e8e78f0", "18fc37a") if want("vlmevalkit") else ():
        _write(f"vlmevalkit_{commit}", run_vlmevalkit(a.src / f"open-compass+VLMEvalKit@{commit}", commit, mcq))
        meta["harness"][f"vlmevalkit_{commit}"] = {"repo": "open-compass/VLMEvalKit", "commit": commit}
    (OUT / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({k: v.get("figures_x100", v.get("figures")) for k, v in meta["harness"].items()}, indent=1)[:3000])


if __name__ == "__main__":
    main()
