"""The vqa task end to end: scripted generative adapters through mb.evaluate (strict scoring,
unparsed answers counted, failed requests failed, CircularEval), and the CLI contract on a
VQA-RAD layout with the tiny offline VLM."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import medimg_bench as mb
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

ITEMS = [
    {"qid": 1, "image_name": "a.jpg", "image_organ": "CHEST", "answer": "Yes", "answer_type": "CLOSED",
     "question_type": "PRES", "question": "Is there an effusion?", "phrase_type": "test_freeform"},
    {"qid": 2, "image_name": "a.jpg", "image_organ": "CHEST", "answer": "left lung", "answer_type": "OPEN",
     "question_type": "POS", "question": "Where is the opacity?", "phrase_type": "test_freeform"},
    {"qid": 3, "image_name": "b.jpg", "image_organ": "HEAD", "answer": "no", "answer_type": "CLOSED",
     "question_type": "ABN", "question": "Is this abnormal?", "phrase_type": "test_para"},
    {"qid": 4, "image_name": "b.jpg", "image_organ": "HEAD", "answer": "one", "answer_type": "CLOSED",
     "question_type": "COUNT", "question": "How many lesions?", "phrase_type": "test_freeform"},
]


def _vqa_rad(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(ITEMS))
    (root / "VQA_RAD Image Folder").mkdir()
    for k, name in enumerate(("a.jpg", "b.jpg")):
        Image.fromarray(np.full((20, 16), 60 * (k + 1), np.uint8)).save(root / "VQA_RAD Image Folder" / name)
    return root


class Scripted(GenerativeAdapter):
    backend = "scripted"

    def __init__(self, answers, fail=()):
        super().__init__(name="scripted")
        self.answers, self.fail, self.requests = answers, set(fail), []

    def identity(self):
        return {"answers": sorted(self.answers.items())}

    def _generate(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            assert r.images and r.images[0].dtype == np.uint8  # original resolution, 0-255
            if r.sample_id in self.fail:
                out.append(GenerationResponse(error="HTTP 503 from http://127.0.0.1:9/v1 after 3 retries"))
            else:
                out.append(GenerationResponse(text=self.answers[r.sample_id], prompt=r.user))
        return out


def test_strict_scores_unparsed_and_failures(tmp_path):
    ds = mb.create_dataset("vqa_rad", root=_vqa_rad(tmp_path / "rad"))
    answers = {"1": "Yes, there is.", "2": "The left lung", "3": "There is not a nodule", "4": "1"}
    res = mb.evaluate(Scripted(answers), ds, task="vqa", batch_size=3, progress=False, n_resamples=50)
    m = res.summary["metrics"]
    # q1 yes → right; q2 exact after normalisation → right; q3 unparsed → wrong; q4 "1" = "one" → right
    assert m["accuracy"]["mean"]["value"] == pytest.approx(0.75)
    assert m["unparsed_rate"]["mean"]["value"] == pytest.approx(0.25)
    assert m["accuracy_closed"]["mean"]["value"] == pytest.approx(2 / 3)
    assert m["accuracy_open"]["mean"]["value"] == pytest.approx(1.0)
    rows = res.samples.drop_duplicates("id").set_index("id")
    assert rows.loc["3", "unparsed"] == 1.0 and rows.loc["3", "response"] == "There is not a nodule"
    assert "question_type" in rows.columns or "prompt" in rows.columns

    failing = Scripted(answers, fail={"2"})
    res = mb.evaluate(failing, ds, task="vqa", batch_size=4, progress=False, n_resamples=20)
    assert res.summary["n_failed"] == 1


def test_circular_eval_needs_every_rotation_right():
    from medimg_bench.tasks.vqa import VQATask

    task = VQATask(circular=True)
    batch = {"id": ["q"], "question": ["Which finding?"], "options": [["effusion", "pneumothorax", "normal"]],
             "answer": ["B"], "answer_type": ["mcq"], "image": [np.zeros((4, 4), np.uint8)], "meta": [{}]}

    class ByOptions(GenerativeAdapter):
        backend = "by_options"

        def __init__(self, always_b=False):
            super().__init__()
            self.always_b = always_b

        def identity(self):
            return {}

        def _generate(self, requests):
            out = []
            for r in requests:
                lines = [ln for ln in r.user.splitlines() if ln[:2] in ("A.", "B.", "C.")]
                letter = "B" if self.always_b else next(ln[0] for ln in lines if "pneumothorax" in ln)
                out.append(GenerationResponse(text=letter))
            return out

    for model, single, circular in ((ByOptions(), 1.0, 1.0), (ByOptions(always_b=True), 1.0, 0.0)):
        out = task.predict(model, batch)
        assert len(out["responses"][0]) == 3  # one request per rotation
        scored, kinds = task.metric_inputs(batch, out)
        assert scored[0]["correct"] == single and scored[0]["circular_correct"] == circular


def test_unknown_placeholder_and_unbuilt_profile_fail_before_any_call():
    from medimg_bench.tasks.vqa import VQATask

    with pytest.raises(ValueError, match="unknown placeholder.*answer"):
        VQATask(prompts={"open": "{question} {answer}"})
    with pytest.raises(ValueError, match="not built"):
        VQATask(scoring={"name": "some_harness"})


def test_cli_contract_on_vqa_rad_with_the_tiny_vlm(tmp_path, monkeypatch):
    from medimg_bench.cli import main

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    root = _vqa_rad(tmp_path / "rad")
    out = tmp_path / "runs"
    rc = main(["run", "task=vqa", "dataset=vqa_rad", f"dataset.root={root}", "model=tiny_vlm",
               "scoring=medimg_bench", "bootstrap.n_resamples=20", "progress=false", f"output_dir={out}",
               "task.options.max_new_tokens=4"])
    assert rc == 0
    run = next(p.parent for p in out.rglob("summary.json"))
    summary = json.loads((run / "summary.json").read_text())
    assert "accuracy" in summary["metrics"] and "unparsed_rate" in summary["metrics"]
    samples = pd.read_parquet(run / "samples.parquet")
    assert set(samples["id"]) == {"1", "2", "3", "4"} and "response" in samples


@pytest.mark.parametrize("profile, closed, n_closed", [
    ("llava_med", 1 / 3, 3),          # v1.0.0 (b9a98a7): q1 "No." vs yes is a miss
    ("llava_med_initial", 1 / 2, 2),  # ad758b6: q1 is dropped from the closed accuracy
])
def test_llava_med_profiles_through_the_task(tmp_path, profile, closed, n_closed):
    ds = mb.create_dataset("vqa_rad", root=_vqa_rad(tmp_path / "rad"))
    answers = {"1": "No.", "2": "The left lung", "3": "There is not a nodule", "4": "1"}
    from medimg_bench.tasks.vqa import VQATask

    task = VQATask(scoring={"name": profile, "candidates": ["left lung", "liver", "2"]})
    res = mb.evaluate(Scripted(answers), ds, task=task, batch_size=4, progress=False, n_resamples=20)
    m = res.summary["metrics"]
    # q3 "not" → "no" hit; q4 "1" vs "one": no yes/no substring → miss
    assert m["accuracy_closed"]["mean"]["value"] == pytest.approx(closed)
    assert m["accuracy_open"]["mean"]["value"] == pytest.approx(1.0)  # recall of "left lung"
    h = res.summary["harness"]
    assert h["profile"] == profile and ("b9a98a7" if profile == "llava_med" else "ad758b6") in h["implementation"]
    assert h["figures"]["yes/no accuracy"] == pytest.approx(closed, abs=1e-6) and h["n"]["yes/no accuracy"] == n_closed
    assert h["figures"]["open accuracy"] == 1.0 and h["figures"]["recall"] == 1.0 and h["n"]["recall"] == 1
    assert h["figures"]["exact match score"] == 1.0  # "the left lung": the article is dropped
    # without candidates "open accuracy" is not computed and a note says why
    res = mb.evaluate(Scripted(answers), ds, task=VQATask(scoring=profile), batch_size=4, progress=False,
                      n_resamples=0)
    assert res.summary["harness"]["figures"]["open accuracy"] is None and "candidates" in res.summary["harness"]["note"]


def test_scoring_config_prompts_are_used_and_task_prompts_win():
    import yaml

    from medimg_bench.tasks.vqa import DEFAULT_PROMPTS, VQATask

    cfg = yaml.safe_load((Path(__file__).parents[2] / "medimg_bench/configs/scoring/vlmevalkit.yaml").read_text())
    task = VQATask(scoring=cfg)
    prompt = task._prompt("Which organ?", "mcq", ["liver", "lung"])
    assert prompt == ("<image>\nQuestion: Which organ?\nOptions:\nA. liver\nB. lung\n"
                      "Please select the correct answer from the options above.")
    assert task.prompts["closed"] == DEFAULT_PROMPTS["closed"]
    assert VQATask(scoring=cfg, prompts={"mcq": "{question}|{options}"})._prompt("Q", "mcq", ["x"]) == "Q|A. x"
    with pytest.raises(ValueError, match="unknown placeholder"):
        VQATask(scoring={**cfg, "prompts": {"mcq": "{question} {hint}"}})


def test_per_category_breakdown_through_the_cli_on_synthetic_vqa(tmp_path, monkeypatch):
    """Per-question-type accuracy and unparsed_rate come from ``subgroups=[question_type]``."""
    from medimg_bench.cli import main
    from medimg_bench.engine import subgroups as sg

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    seen = []
    real = sg.subgroup_summary
    monkeypatch.setattr(sg, "subgroup_summary", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    out = tmp_path / "runs"
    rc = main(["run", "task=vqa", "dataset=synthetic_vqa", "model=tiny_vlm", "scoring=medimg_bench",
               "bootstrap.n_resamples=20", "progress=false", f"output_dir={out}",
               "task.options.max_new_tokens=4", "subgroups=[question_type]", "batch_size=16", "seed=5"])
    assert rc == 0
    # the per-category CIs use the run's bootstrap settings
    assert seen and all(kw["n_resamples"] == 20 and kw["seed"] == 5 and kw["confidence"] == 0.95 for kw in seen)
    run = next(p.parent for p in out.rglob("summary.json"))
    summary = json.loads((run / "summary.json").read_text())
    samples = pd.read_parquet(run / "samples.parquet")
    groups = summary["subgroups"]["question_type"]
    for metric in ("accuracy", "unparsed_rate"):
        per_group = groups[metric]["per_group"]
        assert set(per_group) == set(samples["question_type"])
        for name, entry in per_group.items():
            sel = samples[samples["question_type"] == name]
            column = sel["correct"] if metric == "accuracy" else sel["unparsed"]
            assert entry["n"] == len(sel)
            assert entry["value"] == pytest.approx(column.astype(float).mean())
            if sel["patient_id"].nunique() >= 2 and column.astype(float).nunique() > 1:
                assert entry["ci_low"] <= entry["value"] <= entry["ci_high"]  # image-clustered CI


def test_each_profile_splits_as_its_harness(tmp_path):
    """q4 ("one", answer_type CLOSED) is closed for LLaVA-Med and ours (answer_type) but open for
    MultiMedEval and lmms-eval's VQA-RAD task (the reference is not yes/no); summary.json carries
    each harness's figures under its own names."""
    from medimg_bench.tasks.vqa import VQATask

    ds = mb.create_dataset("vqa_rad", root=_vqa_rad(tmp_path / "rad"))
    answers = {"1": "Yes", "2": "left lung", "3": "No.", "4": "one"}
    n_closed = {}
    for profile in ("medimg_bench", "llava_med", "multimedeval", "lmms_eval"):
        res = mb.evaluate(Scripted(answers), ds, task=VQATask(scoring=profile), batch_size=4, progress=False,
                          n_resamples=0)
        n_closed[profile] = next(iter(res.summary["metrics"]["accuracy_closed"]["per_class"].values()))["n"]
        if profile == "multimedeval":
            f = res.summary["harness"]["figures"]
            assert f["closedQuestionsAccuracy"] == 1.0 and res.summary["harness"]["n"]["closedQuestionsAccuracy"] == 2
            assert f["openQuestionsAccuracy"] == 1.0 and res.summary["harness"]["n"]["openQuestionsRecall"] == 2
        if profile == "lmms_eval":
            assert set(res.summary["harness"]["figures"]) >= {"close_accuracy", "open_em", "bleu1", "rougel"}
            assert res.summary["harness"]["n"]["open_em"] == 2
    assert n_closed == {"medimg_bench": 3, "llava_med": 3, "multimedeval": 2, "lmms_eval": 2}
    assert "harness" not in mb.evaluate(Scripted(answers), ds, task=VQATask(), batch_size=4, progress=False,
                                        n_resamples=0).summary


def test_profile_options_are_checked(tmp_path):
    from medimg_bench.tasks.vqa import VQATask

    (tmp_path / "c.json").write_text(json.dumps({"0": ["left lung", 2]}))
    assert VQATask(scoring={"name": "llava_med", "candidates": str(tmp_path / "c.json")}).profile_options == {
        "candidates": ["left lung", 2]}
    with pytest.raises(ValueError, match="cannot read the candidate answer list"):
        VQATask(scoring={"name": "llava_med", "candidates": str(tmp_path / "missing.json")})
    with pytest.raises(ValueError, match="unknown variant"):
        VQATask(scoring={"name": "lmms_eval", "variant": "mimic"})._scorer.rule("x", answer="yes", kind="closed", options=None)
