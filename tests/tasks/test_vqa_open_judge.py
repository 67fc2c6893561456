"""Open answers graded by an LLM judge under a rubric (scoring.judge.rubric): verdicts, repeats
and their agreement in summary.json, a second judge, the judge pinned in manifest.json, every
judgment cached; with a scripted judge in process and openai_vlm against the loopback server
scripted to answer as a judge."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

import medimg_bench as mb
from medimg_bench.datasets.vqa.base import VQADataset
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.tasks.vqa import VQATask
from tests.tasks._judges import DownJudge, Fixed, ScriptedJudge

REFS = ["left lung", "right kidney", "frontal lobe", "pleural effusion", "no fracture", "liver"]
ANSWERS = ["the left lung", "left kidney", "frontal lobe", "effusion in the pleura", "a fracture", "liver"]


def _open_dataset(root, n=6):
    root.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((12, 10), 90, np.uint8)).save(root / "img.png")
    frame = pd.DataFrame({
        "id": [f"q{i}" for i in range(n)], "patient_id": [f"p{i // 2}" for i in range(n)],
        "image_path": ["img.png"] * n, "question": [f"Where is finding {i}?" for i in range(n)],
        "options": [None] * n, "answer": REFS[:n], "answer_type": ["open"] * n,
    })
    return VQADataset(frame, root=root, name="open_fixture")


class Answers(GenerativeAdapter):
    backend = "answers"

    def __init__(self):
        super().__init__(name="answers")

    def identity(self):
        return {"answers": ANSWERS}

    def _generate(self, requests):
        return [GenerationResponse(text=ANSWERS[int(r.sample_id[1:])], prompt=r.user) for r in requests]


def _verdict(user, nth):
    # correct where the model's answer contains the reference; "left kidney" flips on repeats
    ref = user.split("Reference answer: ")[1].split("\n")[0]
    resp = user.split("Model's answer: ")[1].split("\n")[0]
    if resp == "left kidney":
        return ["INCORRECT", "CORRECT", "INCORRECT"][nth % 3]
    if resp == "effusion in the pleura":
        return "Looks right to me"  # unparsed
    return "CORRECT" if ref in resp else "INCORRECT"


def test_open_answers_graded_with_repeats_and_agreement(tmp_path):
    ds = _open_dataset(tmp_path / "d")
    judge = ScriptedJudge(_verdict, temperature=0.7)
    judge.attach_cache(cache_path=tmp_path / "responses.sqlite")
    with pytest.raises(ValueError, match="needs a judge"):
        VQATask(scoring={"name": "medimg_bench", "judge": {"model": None, "rubric": "correctness"}})
    assert VQATask(judge=judge).grader is None  # an adapter alone is the letter-extraction judge
    task = VQATask(judge={"model": judge, "rubric": "correctness", "repeats": 3})
    res = mb.evaluate(Answers(), ds, task=task, batch_size=4, progress=False, n_resamples=50)
    assert judge.calls == 18  # 6 answers x 3 repeats, at temperature 0
    assert all(r.settings.temperature == 0.0 and r.settings.max_new_tokens == 16 for r in judge.requests)
    assert {json.dumps(r.key_extra) for r in judge.requests} == {"null", '{"judge_repeat": 1}', '{"judge_repeat": 2}'}
    rows = res.samples.drop_duplicates("id").set_index("id")
    verdicts = {i: json.loads(rows.loc[i, "judge_verdicts"]) for i in rows.index}
    assert verdicts["q0"] == ["correct"] * 3 and verdicts["q1"] == ["incorrect", "correct", "incorrect"]
    assert verdicts["q3"] == ["unparsed"] * 3 and verdicts["q4"] == ["incorrect"] * 3
    ag = res.summary["judge_agreement"]
    labels = np.array([[["correct", "incorrect", "unparsed"].index(v) for v in verdicts[f"q{i}"]] for i in range(6)])
    table, _ = aggregate_raters(labels, n_cat=3)
    assert ag["repeats"] == 3 and ag["n_answers"] == 6
    assert ag["between_repeats"]["percent_agreement"] == pytest.approx(5 / 6, abs=1e-6)
    assert ag["between_repeats"]["fleiss_kappa"] == pytest.approx(fleiss_kappa(table), abs=1e-6)
    scores = [np.mean([v == "correct" for v in verdicts[f"q{i}"]]) for i in range(6)]
    assert ag["judge_accuracy"] == pytest.approx(np.mean(scores), abs=1e-6)
    m = res.summary["metrics"]
    assert m["judge_accuracy"]["mean"]["value"] == pytest.approx(np.mean(scores), abs=1e-6)
    assert "ci_low" in m["judge_accuracy"]["mean"]

    again = ScriptedJudge(_verdict)  # same identity, same cache: nothing is asked again
    again.attach_cache(cache_path=tmp_path / "responses.sqlite")
    task2 = VQATask(judge={"model": again, "rubric": "correctness", "repeats": 3})
    res2 = mb.evaluate(Answers(), ds, task=task2, batch_size=4, progress=False, n_resamples=50)
    assert again.calls == 0
    assert res2.summary["judge_agreement"]["between_repeats"] == ag["between_repeats"]


def test_judge_failure_fails_the_question_and_closed_questions_are_not_graded(tmp_path):
    down = DownJudge()
    task = VQATask(judge={"model": down, "rubric": "correctness"})
    batch = {"id": ["a", "b"], "question": ["Where?", "Is it?"], "options": [None, None],
             "answer": ["left lung", "yes"], "answer_type": ["open", "closed"],
             "image": [np.zeros((4, 4), np.uint8)] * 2, "meta": [{}, {}]}
    out = task.predict(Fixed("yes"), batch)  # the closed answer parses: no letter judge either
    assert down.calls == 1  # only the open question is sent to the judge
    with pytest.raises(RuntimeError, match="open-answer judge's request failed"):
        task.metric_inputs(batch, out)


@pytest.fixture()
def judge_server(tmp_path):
    """The loopback chat server scripted as a MedEvalKit-style judge: <judge>0</judge> when the
    prompt holds a correct answer, 1 otherwise; "left kidney" alternates (a nondeterministic
    served judge); a second judge model name answers the same except for "liver"."""
    from tests.models.vlm._helpers import start_chat_server

    rules = [
        {"contains": "User's answer: left kidney", "replies": ["<think>no</think><judge>1</judge>",
                                                              "<think>close</think><judge>0</judge>"]},
        {"contains": "User's answer: the left lung", "replies": ["<think>same</think>\n<judge>0</judge>"]},
        {"contains": "User's answer: frontal lobe", "replies": ["<judge>0</judge>"]},
        {"contains": "User's answer: liver", "replies": ["<judge>0</judge>"]},
        {"contains": "User's answer:", "replies": ["<judge>1</judge>"]},
    ]
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    proc, port = start_chat_server("--replies", str(path))
    yield f"http://127.0.0.1:{port}/v1"
    proc.kill()
    proc.wait()


def test_openai_judge_on_the_loopback_server_end_to_end(tmp_path, judge_server):
    ds = _open_dataset(tmp_path / "d")
    opts = {"base_url": judge_server, "api_key_env": "none", "cache_path": str(tmp_path / "responses.sqlite"),
            "max_retries": 0}
    scoring = {"name": "medimg_bench", "judge": {
        "model": "openai_vlm", "options": {**opts, "model": "judge-a"}, "rubric": "medevalkit", "repeats": 2,
        "second": {"model": "openai_vlm", "options": {**opts, "model": "judge-b"}}}}
    base = judge_server
    httpx.post(base + "/reset")
    task = VQATask(scoring=scoring)
    res = mb.evaluate(Answers(), ds, task=task, batch_size=3, progress=False, n_resamples=50)
    assert httpx.get(base + "/stats").json()["posts"] == 6 * 2 + 6  # 2 repeats + the second judge
    rows = res.samples.drop_duplicates("id").set_index("id")
    # the server flipped; the two repeats are sent concurrently, so which one it answered first is
    # the order they arrived in (the machine's scheduling), not the repeat's number
    assert sorted(json.loads(rows.loc["q1", "judge_verdicts"])) == ["correct", "incorrect"]
    assert json.loads(rows.loc["q0", "judge_verdicts"]) == ["correct", "correct"]
    ag = res.summary["judge_agreement"]
    assert ag["between_repeats"]["percent_agreement"] == pytest.approx(5 / 6, abs=1e-6)
    first = [0 if json.loads(rows.loc[f"q{i}", "judge_verdicts"])[0] == "correct" else 1 for i in range(6)]
    second = [0 if rows.loc[f"q{i}", "judge2_verdict"] == "correct" else 1 for i in range(6)]
    assert ag["second_judge"]["percent_agreement"] == pytest.approx(np.mean(np.equal(first, second)), abs=1e-6)
    if len(set(first) | set(second)) > 1:
        assert ag["second_judge"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(first, second), abs=1e-6)

    run_dir = res.save(tmp_path / "run")
    summary = json.loads((run_dir / "summary.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "judge_agreement" in summary and summary["judge_agreement"]["repeats"] == 2
    pinned = manifest["judge"]
    assert pinned["rubric"] == "medevalkit" and pinned["settings"]["temperature"] == 0.0
    assert pinned["judge"]["model"] == "judge-a" and pinned["second_judge"]["model"] == "judge-b"
    assert len(pinned["prompt_sha256"]) == 64 and pinned["repeats"] == 2

    res2 = mb.evaluate(Answers(), ds, task=VQATask(scoring=scoring), batch_size=3, progress=False,
                       n_resamples=50)
    # every judgment came from the cache: the only posts are each judge's one-token probe that
    # the server still reports the same identity (openai_vlm verify_server)
    assert httpx.get(base + "/stats").json()["posts"] == 18 + 2
    assert res2.summary["judge_agreement"]["between_repeats"] == ag["between_repeats"]


def test_the_cli_puts_judge_agreement_in_summary(tmp_path, judge_server, monkeypatch):
    """The contract: scoring.judge.repeats=k through the command line puts judge_agreement in
    summary.json (synthetic_vqa's open questions, tiny_vlm answering, the loopback judge)."""
    from medimg_bench.cli import main

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    rc = main(["run", "task=vqa", "dataset=synthetic_vqa", "model=tiny_vlm", f"output_dir={out}",
               "scoring=medimg_bench", "scoring.judge.model=openai_vlm",
               f"scoring.judge.options.base_url={judge_server}", "scoring.judge.options.model=judge-a",
               "scoring.judge.options.api_key_env=none", "scoring.judge.rubric=medevalkit",
               "scoring.judge.repeats=3", "bootstrap.n_resamples=20"])
    assert rc == 0
    run = next(p.parent for p in out.rglob("summary.json"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["judge_agreement"]["repeats"] == 3
    assert summary["judge_agreement"]["n_answers"] > 0
    assert json.loads((run / "manifest.json").read_text())["judge"]["rubric"] == "medevalkit"
