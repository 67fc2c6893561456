"""Multiple choice under the harness profiles llava_med, multimedeval and lmms_eval: cases derived
by hand from the harnesses' source (files and commits in docs/vlm.md)."""

from __future__ import annotations

import math

import pytest

from medimg_bench.metrics.text.vqa_profiles import (
    llava_med_choice,
    lmms_eval_choice,
    multimedeval_choice,
    score_llava_med,
    score_lmms_eval,
    score_multimedeval,
)

OPTS = ["pleural effusion", "pneumothorax", "cardiomegaly", "normal"]


# -- llava_med: llava/eval/eval_science_qa.py (microsoft/LLaVA-Med commit ad758b6) ----------------
@pytest.mark.parametrize("text, expected", [
    ("The answer is B.", "B"),
    ("Reasoning first. The answer is C, I think", "C"),        # "." in the pattern is any character
    ("The answer is B", None),                                 # nothing after the letter: no match
    ("B", None),                                               # a bare letter is not read
    ("the answer is B.", None),                                # case-sensitive
    ("The answer is E.", None),                                # not one of the 4 options (harness: random)
    ("The answer is A. No wait, The answer is B.", None),      # two matches (harness: random)
])
def test_llava_med_science_qa_rule(text, expected):
    assert llava_med_choice(text, len(OPTS)) == expected
    s = score_llava_med(text, answer="B", answer_type="mcq", options=OPTS)
    assert s["parsed"] == expected
    assert s["unparsed"] == float(expected is None)
    assert s["correct"] == float(expected == "B")  # never a random hit


def test_llava_med_withheld_answer():
    s = score_llava_med("The answer is A.", answer=None, answer_type="mcq", options=OPTS)
    assert s["parsed"] == "A" and math.isnan(s["correct"])


# -- multimedeval: multimedeval/dynamic_datasets.py get_predicted_answer + qa.py (commit d9ac283) ---
def _bleu1_torchmetrics(pred, ref):
    from torchmetrics.text import BLEUScore

    return float(BLEUScore(n_gram=1)([pred], [[ref]]))


@pytest.mark.parametrize("pred, ref", [
    ("b pneumothorax", "b pneumothorax"), ("pneumothorax", "b pneumothorax"),
    ("left pneumothorax seen", "b pneumothorax"), ("nothing", "c cardiomegaly"),
    ("effusion effusion effusion", "pleural effusion"),
])
def test_multimedeval_bleu1_equals_torchmetrics(pred, ref):
    from medimg_bench.metrics.text.vqa_profiles import _mme_bleu1

    assert _mme_bleu1(pred, ref) == pytest.approx(_bleu1_torchmetrics(pred, ref))


@pytest.mark.parametrize("text, expected", [
    ("B. Pneumothorax", "B"),
    ("pneumothorax", "B"),                    # the text alone: BLEU-1 0.61 against "b pneumothorax"
    ("There is a pleural effusion.", "A"),
    ("A", None),                              # "a" is an article: cleaned to nothing → invalid
    ("B", "B"),                               # the letter token "b" matches option B's "b"
    ("I cannot tell", None),                  # every score 0 → "Invalid answer"
    ("", None),
    ("pneumothorax or cardiomegaly", "B"),    # a tie on BLEU-1: the first best
])
def test_multimedeval_choice(text, expected):
    assert multimedeval_choice(text, OPTS) == expected
    s = score_multimedeval(text, answer="B", answer_type="mcq", options=OPTS)
    assert s["unparsed"] == float(expected is None) and s["correct"] == float(expected == "B")


def test_multimedeval_choice_by_hand():
    # cleaned "pneumothorax" (c=1) vs "b pneumothorax" (r=2): p=1, BP=exp(1-2)
    from medimg_bench.metrics.text.vqa_profiles import _mme_bleu1

    assert _mme_bleu1("pneumothorax", "b pneumothorax") == pytest.approx(math.exp(-1))


# -- lmms_eval: lmms_eval/tasks/medevalkit/eval_utils.py judge_multi_choice (commit 5a58626) --------
@pytest.mark.parametrize("text, letter, rule", [
    ("B", "B", "lmms_eval_letter"),
    ("b. pneumothorax", "B", "lmms_eval_letter"),               # text before the first "."
    ("The answer is C.", "C", "lmms_eval_letter"),              # parse_response: after "answer is"
    ("Answer: pneumothorax", "B", "lmms_eval_option_text"),
    ("Reasoning here.\n\nD", "D", "lmms_eval_letter"),           # bare letter as last paragraph
    ("\\boxed{A}", "A", "lmms_eval_letter"),
    ("probably a small pneumothorax", "B", "lmms_eval_similarity"),
    ("x" * 301, None, "lmms_eval_too_long"),
    ("zzz", "A", "lmms_eval_similarity_none"),                  # nothing similar: option A, as the harness
])
def test_lmms_eval_judge_multi_choice(text, letter, rule):
    assert lmms_eval_choice(text, OPTS) == (letter, rule)


def test_lmms_eval_scores_and_unparsed():
    s = score_lmms_eval("Answer: pneumothorax", answer="B", answer_type="mcq", options=OPTS)
    assert s["correct"] == 1.0 and s["unparsed"] == 0.0
    s = score_lmms_eval("zzz", answer="A", answer_type="mcq", options=OPTS)
    assert s["correct"] == 1.0 and s["unparsed"] == 1.0   # the harness's own decision stands
    s = score_lmms_eval("x" * 400, answer="A", answer_type="mcq", options=OPTS)
    assert s["correct"] == 0.0 and s["unparsed"] == 1.0


def test_mcq_through_the_task_under_each_profile():
    import numpy as np

    from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
    from medimg_bench.tasks.vqa import VQATask

    class Fixed(GenerativeAdapter):
        backend = "fixed"

        def identity(self):
            return {}

        def _generate(self, requests):
            return [GenerationResponse(text="The answer is B. pneumothorax") for _ in requests]

    batch = {"id": ["q"], "question": ["Which finding?"], "options": [OPTS], "answer": ["B"],
             "answer_type": ["mcq"], "image": [np.zeros((4, 4), np.uint8)], "meta": [{}]}
    for profile in ("llava_med", "multimedeval", "lmms_eval", "medimg_bench"):
        task = VQATask(scoring=profile)
        scored, _ = task.metric_inputs(batch, task.predict(Fixed(), batch))
        assert scored[0]["correct"] == 1.0, profile
