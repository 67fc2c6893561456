"""The optional LLM judge of task vqa: it settles closed/multiple-choice answers the strict rule
left unparsed, a reply that is not an option stays unparsed, its calls are cached (a re-run asks
it nothing), with a scripted judge and with openai_vlm against the loopback chat server."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

import medimg_bench as mb
from medimg_bench.metrics.text.judge import judge_prompt, parse_judge_reply
from medimg_bench.tasks.vqa import VQATask
from tests.tasks._judges import DownJudge, Fixed, ScriptedJudge
from tests.tasks.test_vqa import Scripted, _vqa_rad

OPTS = ["pleural effusion", "pneumothorax", "cardiomegaly"]


def _mcq_batch(answer="B"):
    return {"id": ["q"], "question": ["Which finding?"], "options": [OPTS], "answer": [answer],
            "answer_type": ["mcq"], "image": [np.zeros((4, 4), np.uint8)], "meta": [{}]}


@pytest.mark.parametrize("reply, n, expected", [
    ("B", 3, "B"), (" (C). ", 3, "C"), ("'A'", 3, "A"), ("**B**", 3, "B"),
    ("Z", 3, None), ("D", 3, None), ("b", 3, None), ("B or C", 3, None),
    ("The answer is B", 3, None), ("", 3, None), (None, 3, None),
])
def test_judge_reply_is_read_strictly(reply, n, expected):
    assert parse_judge_reply(reply, n) == expected


def test_prompt_lists_question_options_and_answer():
    p = judge_prompt("Which finding?", OPTS, "the second one")
    assert p.endswith("Question: Which finding?\nOptions: A. pleural effusion B. pneumothorax C. cardiomegaly\n"
                      "Answer: the second one\nReply:")
    assert "one of A, B, C, or Z" in p


def test_judge_fixes_an_unparsed_answer_and_garbage_stays_unparsed():
    batch = _mcq_batch()
    for reply, correct, unparsed, by in (("B", 1.0, 0.0, "judge"), ("no idea, sorry", 0.0, 1.0, None),
                                         ("Z", 0.0, 1.0, None), ("E", 0.0, 1.0, None)):
        judge = ScriptedJudge(lambda _p, _n, r=reply: r)
        task = VQATask(judge=judge)
        out = task.predict(Fixed("I would go with the second one"), batch)
        scored, _ = task.metric_inputs(batch, out)
        assert judge.calls == 1
        assert (scored[0]["correct"], scored[0]["unparsed"], scored[0]["parsed_by"]) == (correct, unparsed, by)
        row = task.sample_records(batch, out, None)[0]
        assert row["judge_response"] == reply and row["parsed_by"] == by


def test_judge_is_not_asked_when_the_cascade_parses():
    judge = ScriptedJudge(lambda _p, _n: "A")
    task = VQATask(judge=judge)
    batch = _mcq_batch()
    out = task.predict(Fixed("B. pneumothorax"), batch)
    scored, _ = task.metric_inputs(batch, out)
    assert judge.calls == 0 and scored[0]["parsed_by"] == "cascade" and scored[0]["correct"] == 1.0


def test_judge_under_circular_eval_and_vlmevalkit():
    def reply(prompt, _nth):  # the judge finds "pneumothorax" among the options shown to it (rotated)
        listed = prompt.rsplit("Options: ", 1)[1].split("\n")[0]
        return next((c for c in "ABC" if f"{c}. pneumothorax" in listed), "Z")

    for profile in ("medimg_bench", "vlmevalkit"):
        judge = ScriptedJudge(reply)
        task = VQATask(scoring=profile, judge=judge, circular=True)
        batch = _mcq_batch()
        scored, _ = task.metric_inputs(batch, task.predict(Fixed("I would go with the second one"), batch))
        assert judge.calls == 3  # one per rotation
        assert scored[0]["correct"] == 1.0 and scored[0]["circular_correct"] == 1.0


def test_a_failed_judge_request_fails_the_sample_and_harness_profiles_refuse_a_judge():
    task = VQATask(judge=DownJudge())
    batch = _mcq_batch()
    with pytest.raises(RuntimeError, match="judge"):
        task.metric_inputs(batch, task.predict(Fixed("the second one"), batch))
    with pytest.raises(ValueError, match="no judge"):
        VQATask(scoring="llava_med", judge=ScriptedJudge(lambda _p, _n: "A"))
    assert VQATask(scoring={"name": "medimg_bench", "judge": {"model": None}}).judge is None


def test_closed_question_judged_and_cached_rerun_makes_zero_judge_calls(tmp_path):
    ds = mb.create_dataset("vqa_rad", root=_vqa_rad(tmp_path / "rad"))
    answers = {"1": "Yes, there is.", "2": "The left lung", "3": "There is not a nodule", "4": "1"}
    judge = ScriptedJudge(lambda _p, _n: "B")  # B = "no" for a closed question
    judge.attach_cache(cache_path=tmp_path / "responses.sqlite")
    res = mb.evaluate(Scripted(answers), ds, task=VQATask(judge=judge), batch_size=4, progress=False,
                      n_resamples=20)
    assert judge.calls == 1  # only q3 ("not" is no yes/no word) was unparsed
    m = res.summary["metrics"]
    assert m["accuracy"]["mean"]["value"] == pytest.approx(1.0)
    assert m["unparsed_rate"]["mean"]["value"] == pytest.approx(0.0)
    rows = res.samples.drop_duplicates("id").set_index("id")
    assert rows.loc["3", "parsed_by"] == "judge" and rows.loc["3", "judge_response"] == "B"
    assert rows.loc["1", "parsed_by"] == "cascade"

    again = ScriptedJudge(lambda _p, _n: "B")  # same identity, fresh counter, same cache file
    again.attach_cache(cache_path=tmp_path / "responses.sqlite")
    res2 = mb.evaluate(Scripted(answers), ds, task=VQATask(judge=again), batch_size=4, progress=False,
                       n_resamples=20)
    assert again.calls == 0
    assert res2.summary["metrics"]["accuracy"]["mean"]["value"] == pytest.approx(1.0)


def test_openai_judge_over_the_loopback_server(tmp_path, chat_server):
    """The loopback server echoes the prompt: garbage to the judge reader → unparsed, never a
    guess; the judge's calls are cached, so the re-run posts nothing."""
    ds = mb.create_dataset("vqa_rad", root=_vqa_rad(tmp_path / "rad"))
    answers = {"1": "Yes, there is.", "2": "The left lung", "3": "There is not a nodule", "4": "1"}
    scoring = {"name": "medimg_bench", "judge": {"model": "openai_vlm", "options": {
        "base_url": chat_server, "model": "loopback", "api_key_env": "none",
        "cache_path": str(tmp_path / "responses.sqlite"), "max_retries": 1, "seed": None}}}
    base = chat_server.rsplit("/v1", 1)[0] + "/v1"
    httpx.post(base + "/reset")
    res = mb.evaluate(Scripted(answers), ds, task=VQATask(scoring=scoring), batch_size=4, progress=False,
                      n_resamples=20)
    assert httpx.get(base + "/stats").json()["posts"] == 1
    rows = res.samples.drop_duplicates("id").set_index("id")
    assert rows.loc["3", "judge_response"].startswith("echo: You are grading")
    assert rows.loc["3", "unparsed"] == 1.0 and rows.loc["3", "correct"] == 0.0
    assert res.summary["metrics"]["unparsed_rate"]["mean"]["value"] == pytest.approx(0.25)

    res2 = mb.evaluate(Scripted(answers), ds, task=VQATask(scoring=scoring), batch_size=4, progress=False,
                       n_resamples=20)
    # zero new judge requests: one one-token probe asks the server whether it is still the same
    assert httpx.get(base + "/stats").json()["posts"] == 2
    assert res2.samples.drop_duplicates("id").set_index("id").loc["3", "judge_response"] == rows.loc["3", "judge_response"]
