"""The llava_med profile on cases derived from reading microsoft/LLaVA-Med llava/eval/run_eval.py
(commit ad758b6) and its eval_metrics helpers; each case says which line of the harness decides it."""

from __future__ import annotations

import math

import pytest

from medimg_bench.metrics.text.vqa import score_vqa_answer
from medimg_bench.metrics.text.vqa_profiles import llava_med_normalize, score_llava_med


def test_normalisation_as_vilt():
    assert llava_med_normalize("The two lesions.") == "2 lesions"  # manual_map, articles, period
    assert llava_med_normalize("left-sided (mild)") == "left sided mild"  # punct → space
    assert llava_med_normalize("none") == "0"


@pytest.mark.parametrize("pred,gt,expected", [
    ("Yes, it is.", "yes", 1.0),           # 'yes' in pred and gt in pred → hit
    ("No.", "yes", math.nan),              # 'no' in pred, gt not in pred → nothing appended: dropped
    ("There is not a fracture", "no", 1.0),  # "no" inside "not" counts as the answer "no"
    ("I cannot tell", "yes", math.nan),    # "no" inside "cannot": dropped, not a miss
    ("Maybe", "yes", 0.0),                 # neither substring → miss
    ("nodule in the left lobe", "no", 1.0),  # "no" inside "nodule"
])
@pytest.mark.parametrize("version", ["llava_med", "llava_med_initial"])
def test_closed_substring_rule(pred, gt, expected, version):
    got = score_llava_med(pred, answer=gt, answer_type="closed", version=version)["correct"]
    if version == "llava_med" and math.isnan(expected):
        expected = 0.0  # v1.0.0 (b9a98a7, "fix closed accuracy calculation (#35)") counts it as a miss
    assert (math.isnan(expected) and math.isnan(got)) or got == expected


def test_closed_answer_that_is_not_yes_no():
    # VQA-RAD's closed "one": the harness only asks whether 'yes'/'no' occur and gt occurs
    assert score_llava_med("There is one lesion", answer="one", answer_type="closed")["correct"] == 0.0
    # "no only 1": "no" occurs, and the reference "1" is a substring → a hit for the harness
    assert score_llava_med("No, only one", answer="one", answer_type="closed")["correct"] == 1.0
    # strict profile: text match after normalisation, never a substring
    assert score_vqa_answer("No, only one", answer="one", answer_type="closed")["correct"] == 0.0


def test_open_recall_is_the_reported_number():
    s = score_llava_med("the left lower lobe", answer="left lung", answer_type="open")
    assert s["correct"] == pytest.approx(0.5) and s["recall"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert score_llava_med("", answer="liver", answer_type="open")["correct"] == 0.0


def test_multiple_choice_under_llava_med_is_its_science_qa_rule():
    # multiple choice: tests/metrics/text/test_vqa_mcq_profiles.py
    assert score_llava_med("B", answer="B", answer_type="mcq", options=["x", "y"])["unparsed"] == 1.0


# -- vlmevalkit: cases derived from vlmeval/utils/matching_util.py (commit 18fc37a) -------------
from medimg_bench.metrics.text.vqa_profiles import score_vlmevalkit, vlmevalkit_can_infer  # noqa: E402

CH = {"A": "Pleural effusion", "B": "Pneumothorax", "C": "Normal", "D": "Cardiomegaly"}


@pytest.mark.parametrize("answer,expected", [
    ("B", "B"), ("(C)", "C"), ("The answer is D.", "D"),
    ("A pneumothorax is visible", "A"),   # the article "A" is a token: option A (a quirk VLMEvalKit warns about)
    ("Answer: B and C", None),            # two letters among the tokens, no option text → False
    ("I see a pneumothorax", "B"),        # no letter token; exactly one option text → "B"
    ("Because the heart", None),          # a letter inside a word is not a token
    ("Cannot determine the answer", "Z"),  # refusal phrase
])
def test_can_infer(answer, expected):
    assert vlmevalkit_can_infer(answer, CH) == expected


def test_no_random_fallback_where_vlmevalkit_would_draw_one():
    for _ in range(5):
        s = score_vlmevalkit("I am not sure", answer="B", answer_type="mcq", options=list(CH.values()))
        assert s["unparsed"] == 1.0 and s["correct"] == 0.0
    with pytest.raises(ValueError, match="multiple-choice"):
        score_vlmevalkit("yes", answer="yes", answer_type="closed", options=None)


# -- multimedeval: cases derived from task_families.py VQA.evaluate (commit 12ab84b) -------------
from medimg_bench.metrics.text.vqa_profiles import score_multimedeval  # noqa: E402


@pytest.mark.parametrize("pred,gt,correct", [
    ("Yes", "yes", 1.0),
    ("There is not a fracture", "no", 1.0),   # "not" is added to the reference {"no"}: recall 1/2 >= 0.4
    ("No", "no", 1.0),
    ("nodule", "no", 0.0),                    # token sets: "nodule" is not "no"
    ("yes no", "no", 1.0),                    # both present: recall of {"no","not"} is 0.5
    ("one", "one", 1.0),                      # not yes/no: open rule, recall 1 >= 0.75
    ("left upper lobe", "left lobe", 1.0),    # recall 2/2
    ("left", "left lower lobe", 0.0),         # recall 1/3 < 0.75
])
def test_multimedeval_thresholds(pred, gt, correct):
    kind = "closed" if gt in ("yes", "no") else "open"
    assert score_multimedeval(pred, answer=gt, answer_type=kind)["correct"] == correct


def test_multimedeval_recall_is_set_based():
    s = score_multimedeval("lung lung lung", answer="left lung", answer_type="open")
    assert s["recall"] == 0.5


# -- lmms_eval: cases derived from medevalkit eval_utils.py (commit 9f7638b) ----------------------
from medimg_bench.metrics.text.vqa_profiles import lmms_eval_parse_response, score_lmms_eval  # noqa: E402


def test_lmms_eval_parse_response():
    assert lmms_eval_parse_response("Reasoning... The final answer is \\boxed{Yes}") == "Yes"
    assert lmms_eval_parse_response("<answer>left lung</answer>") == "left lung"
    assert lmms_eval_parse_response("Let me see. Answer: no") == "no"


@pytest.mark.parametrize("pred,gt,correct,unparsed", [
    ("Yes.", "yes", 1.0, 0.0),
    ("No, there is none", "no", 1.0, 0.0),          # "none" contains "no" too: still only "no" present
    ("There is not a fracture", "no", 1.0, 0.0),    # "no" inside "not": the substring counts
    ("yes and no", "yes", 0.0, 1.0),                # both substrings: XOR fails → wrong
    ("I cannot know", "yes", 0.0, 0.0),             # "no" inside "cannot"/"know": judged "no" → wrong
    ("Maybe", "no", 0.0, 1.0),                      # neither
])
def test_lmms_eval_judge_yesno(pred, gt, correct, unparsed):
    s = score_lmms_eval(pred, answer=gt, answer_type="closed")
    assert s["correct"] == correct and s["unparsed"] == unparsed


def test_lmms_eval_closed_by_reference_not_answer_type():
    # VQA-RAD's closed "one" is judged by exact match (judge_open), not as yes/no
    assert score_lmms_eval("one", answer="one", answer_type="closed")["correct"] == 1.0
    assert score_lmms_eval("1", answer="one", answer_type="closed")["correct"] == 0.0  # no number mapping
    s = score_lmms_eval("left lung.", answer="left lung", answer_type="open")
    assert s["correct"] == 0.0 and s["recall"] == 1.0  # the period makes exact match fail
