"""task=cxreasonbench_reasoning: CXReasonBench's stages as one conversation per case, each stage
asked only when ttumyche/CXReasonBench 72357fe's harness would ask it (evaluate_reasoning.py,
evaluate_guidance.py), with a scripted model and a scripted judge in process; every turn in the
sample table; the harness's figures in summary.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

import medimg_bench as mb
from medimg_bench.engine.results import EvaluationFailed
from medimg_bench.metrics.text.cxreasonbench import wilson_score
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.registry import create_dataset
from medimg_bench.tasks.cxreasonbench import CXReasonBenchReasoningTask
from tests.datasets.vqa.cxreasonbench_fixture import write_release

# the model's reply per (case, stage); anything else: "FINAL ANSWER: (a) Yes". The judge below
# reads the reply: IDK -> "IDK", WRONG -> "False", NONE -> "N/A", else "True".
SCRIPT = {
    ("cardiomegaly/d1", "final"): "FINAL ANSWER: (a) Yes. VALUE: 0.55",
    ("cardiomegaly/d2", "init"): "FINAL ANSWER: (c) IDK",
    ("cardiomegaly/d2", "guidance-final"): "FINAL ANSWER: (b) WRONG. VALUE: 0.7",
    ("cardiomegaly/d3", "criteria_1"): "FINAL ANSWER: (b) WRONG",
    ("inclusion/d1", "init"): "FINAL ANSWER: (b) WRONG",
    ("inclusion/d1", "custom_criteria"): "IDK",
    ("inclusion/d1", "guidance-bodypart_0"): "WRONG",
    ("inclusion/d4", "bodypart_1"): "NONE of the above",
}
TURNS = {
    "cardiomegaly/d1": ["init", "criteria_0", "criteria_1", "bodypart_0", "bodypart_1", "measurement", "final"],
    "cardiomegaly/d2": ["init", "guidance-bodypart_0", "guidance-bodypart_1", "guidance-measurement", "guidance-final"],
    "cardiomegaly/d3": ["init", "criteria_0", "criteria_1"],
    "inclusion/d1": ["init", "criteria_0", "criteria_1", "custom_criteria", "guidance-bodypart_0", "guidance-bodypart_1"],
    "inclusion/d4": ["init", "criteria_0", "criteria_1", "custom_criteria", "bodypart_0", "bodypart_1"],
}


class ScriptedModel(GenerativeAdapter):
    backend = "scripted_cxr"

    def __init__(self):
        super().__init__(name="scripted")
        self.requests = []

    def identity(self):
        return {"script": sorted(map(list, SCRIPT))}

    def _generate(self, requests):
        self.requests += requests
        out = []
        for r in requests:
            sid, stage = r.sample_id.split("#")
            out.append(GenerationResponse(text=SCRIPT.get((sid, stage), "FINAL ANSWER: (a) Yes"), prompt=r.rendered_prompt()))
        return out


class ScriptedJudge(GenerativeAdapter):
    backend = "scripted_cxr_judge"

    def __init__(self, fail_on=None):
        super().__init__(name="judge")
        self.requests, self.fail_on = [], fail_on

    def identity(self):
        return {"judge": "scripted"}

    def _generate(self, requests):
        self.requests += requests
        out = []
        for r in requests:
            if self.fail_on and self.fail_on in r.sample_id:
                out.append(GenerationResponse(error="judge down"))
                continue
            reply = r.user.split("Answer 2: ")[1]
            verdict = "IDK" if "IDK" in reply else "False" if "WRONG" in reply else "N/A" if "NONE" in reply else "True"
            out.append(GenerationResponse(text=verdict, prompt=r.user))
        return out


def _run(tmp_path, judge=None, **options):
    root, mimic = write_release(tmp_path)
    ds = create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True)
    model, judge = ScriptedModel(), judge or ScriptedJudge()
    task = CXReasonBenchReasoningTask(judge=judge, **options)
    res = mb.evaluate(model, ds, task=task, batch_size=3, progress=False, n_resamples=20)
    return res, model, judge


def test_conversations_follow_the_harness_gating(tmp_path):
    res, model, judge = _run(tmp_path)
    rows = res.samples.drop_duplicates("id").set_index("id")
    for sid, stages in TURNS.items():
        turns = json.loads(rows.loc[sid, "turns"])
        assert [t["stage"] for t in turns] == stages, sid
        assert rows.loc[sid, "n_turns"] == len(stages) and rows.loc[sid, "last_stage"] == stages[-1]
    # gating stopped cardiomegaly/d3 after the wrong criterion and inclusion/d4 at the N/A body part
    d4 = json.loads(rows.loc["inclusion/d4", "turns"])
    assert [t["score"] for t in d4] == [1, 1, 1, 1, 1, -2]
    assert d4[-1]["judge_rubric"] == "bodypart_one" and d4[-1]["judge_reply"] == "N/A"
    assert json.loads(rows.loc["cardiomegaly/d1", "turns"])[3]["judge_rubric"] == "bodypart_all"
    assert [t["score"] for t in json.loads(rows.loc["inclusion/d1", "turns"])] == [0, 1, 1, -1, 0, 1]
    # one conversation: each turn carries every earlier turn, the images where the harness shows them
    asked = {}
    for r in model.requests:
        sid, stage = r.sample_id.split("#")
        asked.setdefault(sid, []).append(r)
    assert len(model.requests) == sum(map(len, TURNS.values()))
    d1 = asked["cardiomegaly/d1"]
    assert [len(r.history or []) for r in d1] == list(range(7))
    assert [len(r.images) for r in d1] == [1, 0, 0, 2, 1, 0, 0]
    assert d1[4].history[3].images[0].shape == (1, 6, 8) and d1[4].history[3].images[0].dtype == "uint8"
    assert d1[6].history[-1].reply == "FINAL ANSWER: (a) Yes"
    assert all(r.system == d1[0].system for r in model.requests)
    g = asked["cardiomegaly/d2"]
    assert [len(r.images) for r in g] == [1, 1, 0, 1, 0] and g[1].history[0].reply == "FINAL ANSWER: (c) IDK"
    # judge: harness query layout, question only for the initial and final stages, temperature 0
    first = judge.requests[0]
    assert first.user.startswith("- Question: Is there cardiomegaly?") and "- Answer 1: (a) Yes - Answer 2: " in first.user
    crit = next(r for r in judge.requests if r.sample_id.endswith("#criteria_0#grade"))
    assert crit.user.startswith("- Answer 1: (a) ratio - Answer 2:")
    assert {r.settings.temperature for r in judge.requests} == {0.0}


def test_harness_figures_in_summary(tmp_path):
    res, _, _ = _run(tmp_path)
    fig = res.summary["cxreasonbench"]
    card = fig["path1"]["per_task"]["cardiomegaly"]
    # 3 cases: d2 IDK at init; d3 stops at criteria; d1 reaches a correct final with its value in range
    assert card["flag_num_correct_init_pass"] == 2 and card["flag_num_correct_init_idk"] == 1
    for stage, (k, n) in {"criteria": (1, 2), "bodypart": (1, 1), "measurement": (1, 1), "final": (1, 1),
                          "binary": (1, 2), "consistency": (1, 1), "measurement_matching": (1, 1),
                          "final_refined": (1, 1), "binary_refined": (1, 2)}.items():
        expected = wilson_score(k, n)
        for name in ("num_correct", "wilson_score", "lower_bound", "upper_bound", "adjusted_wilson"):
            assert card[f"{name}_{stage}"] == pytest.approx(expected[name], abs=1e-12), (stage, name)
    assert card["stage_score"] == 2.0 and card["stage_score_std"] == 2.0  # conquered [4, 0]
    inc = fig["path1"]["per_task"]["inclusion"]
    # custom criteria: d1 IDK, d4 passed; d4 stops at body parts
    assert inc["flag_num_correct_custom_idk"] == 1 and inc["flag_num_correct_custom_pass"] == 1
    assert inc["num_correct_bodypart"] == 0 and inc["lower_bound_measurement"] is None
    assert inc["wilson_score_measurement_matching"] is None and inc["stage_score"] == 1.0
    g = fig["guidance"]["per_task"]
    assert g["cardiomegaly"]["num_idk_for_guidance"] == 1 and g["cardiomegaly"]["num_correct_g_measurement"] == 1
    assert g["cardiomegaly"]["num_correct_g_final"] == 0 and g["cardiomegaly"]["g_stage_score"] == 2.0
    assert g["inclusion"]["num_correct_g_bodypart"] == 0 and g["inclusion"]["g_stage_score"] == 0.0
    printed = fig["path1"]["printed"]
    w = wilson_score(1, 2)
    completion = round(w["wilson_score"] * (1 - (w["upper_bound"] - w["lower_bound"]) / 2) * 100, 2)
    assert printed["per_task"]["cardiomegaly"]["Completion_score"] == completion
    assert printed["per_task"]["inclusion"]["Completion_score"] == 0.0
    assert printed["Completion_score"] == float(np.mean([completion, 0.0]).round(2))  # print_scores: np round
    assert printed["Depth_score"] == 1.5 and fig["path1"]["groups"]["total"]["stage_score"] == 1.5
    m = res.summary["metrics"]
    assert m["final_correct"]["mean"]["value"] == pytest.approx(1 / 5)
    assert m["guidance_final_correct"]["mean"]["value"] == 0.0


def test_a_failed_judge_request_fails_its_case_only(tmp_path):
    res, _, _ = _run(tmp_path, judge=ScriptedJudge(fail_on="inclusion/d4#bodypart_0"))
    assert res.summary["failed_ids"] == ["inclusion/d4"]
    failed = res.samples.set_index("id").loc["inclusion/d4"]
    assert "bodypart_0" in str(failed["error"]) and "judge down" in str(failed["error"])


def test_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match="every stage is judged"):
        CXReasonBenchReasoningTask()
    root, mimic = write_release(tmp_path)
    plain = create_dataset("cxreasonbench", root=root, mimic_root=mimic)
    with pytest.raises(EvaluationFailed, match="stages=true"):  # every sample fails, naming the option
        mb.evaluate(ScriptedModel(), plain, task=CXReasonBenchReasoningTask(judge=ScriptedJudge()),
                    batch_size=5, progress=False, n_resamples=10)


def test_openai_adapter_on_the_loopback_server(tmp_path, chat_server):
    """The conversation over HTTP: every turn a chat-completions request with the earlier turns;
    the echo server answers ``echo: <last user text> | images=<n>``, which the judge accepts."""
    import httpx

    root, mimic = write_release(tmp_path)
    ds = create_dataset("cxreasonbench", root=root, mimic_root=mimic, stages=True)
    model = mb.create_model("openai_vlm", base_url=chat_server, model="m", api_key_env="none", max_retries=0,
                            cache_path=str(tmp_path / "responses.sqlite"))
    httpx.post(chat_server.rsplit("/v1", 1)[0] + "/reset")
    judge = ScriptedJudge()
    res = mb.evaluate(model, ds, task=CXReasonBenchReasoningTask(judge=judge), batch_size=5, progress=False,
                      n_resamples=10)
    assert res.summary["n_failed"] == 0
    rows = res.samples.drop_duplicates("id").set_index("id")
    full = {"cardiomegaly": 7, "inclusion": 8}  # every stage of path 1: nothing gates
    assert {sid: int(rows.loc[sid, "n_turns"]) for sid in rows.index} == {
        sid: full[sid.split("/")[0]] for sid in rows.index}
    turns = json.loads(rows.loc["cardiomegaly/d1", "turns"])
    assert [t["response"].rsplit("images=", 1)[1] for t in turns] == ["1", "0", "0", "2", "1", "0", "0"]
    assert httpx.get(chat_server + "/stats").json()["posts"] == 3 * 7 + 2 * 8
