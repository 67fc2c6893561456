"""VQA scoring under the strict medimg_bench rule: the extraction cascade, the never-random
rule, yes/no parsing ("no" inside "not"/"nodule"), a closed answer that is not yes/no, and
open-ended scores."""

from __future__ import annotations

import math

import pytest

from medimg_bench.metrics.text.vqa import (
    extract_choice,
    extract_yes_no,
    normalize_answer,
    rotate_options,
    score_vqa_answer,
    token_f1,
    token_recall,
)

OPTS = ["Pleural effusion", "Effusion", "Pneumothorax", "Normal"]


@pytest.mark.parametrize("response,letter,rule", [
    ("B", "B", "letter"), ("(C)", "C", "letter"), ("D.", "D", "letter"), ("c", "C", "letter"),
    ("Answer: A", "A", "answer_phrase"), ("The answer is (D).", "D", "answer_phrase"),
    ("The correct option is C", "C", "answer_phrase"),
    ("B. Effusion", "B", "leading"), ("(C) pneumothorax, clearly", "C", "leading"),
    ("I pick (B) since the angle is blunted", "B", "bracketed"),
    ("There is a pneumothorax", "C", "option_text"),
    ("the answer is a pleural effusion", "A", "option_text"),  # "a" is an article, not option A
])
def test_extraction_cascade(response, letter, rule):
    assert extract_choice(response, OPTS) == (letter, rule)


@pytest.mark.parametrize("response", [
    "", "   ", "I cannot tell", "Because AI", "E", "(E)", "Answer: E",  # no valid letter
    "effusion or pneumothorax",  # two options named, neither contains the other
])
def test_never_a_random_fallback(response):
    for _ in range(5):  # the same answer, every time: no randomness anywhere
        assert extract_choice(response, OPTS) == (None, "unparsed")
    s = score_vqa_answer(response, answer="C", answer_type="mcq", options=OPTS)
    assert s["correct"] == 0.0 and s["unparsed"] == 1.0


@pytest.mark.parametrize("response,expected", [
    ("Yes", "yes"), ("yes.", "yes"), ("No, there is no effusion.", "no"), ("Not present", "no"),
    ("There is a nodule present", "yes"), ("There is not a nodule", None),  # "no" inside "not"/"nodule"
    ("Effusion is not seen.", "no"), ("I don't know", None), ("", None),
])
def test_yes_no(response, expected):
    assert extract_yes_no(response) == expected


def test_closed_answer_that_is_not_yes_no_is_matched_as_text():
    # VQA-RAD has closed questions answered "one", "left"…: exact match after normalisation
    assert score_vqa_answer("One.", answer="1", answer_type="closed")["correct"] == 1.0
    assert score_vqa_answer("left side", answer="left", answer_type="closed")["correct"] == 0.0


def test_open_scores_and_normalisation():
    assert normalize_answer("The Left  Lung!") == "left lung"
    assert normalize_answer("two lesions") == "2 lesions"
    s = score_vqa_answer("the left lung", answer="Left lung", answer_type="open")
    assert s["correct"] == 1.0 and s["recall"] == 1.0 and s["f1"] == 1.0
    assert token_recall("right lung base", "left lung") == 0.5
    assert token_f1("lung", "left lung") == pytest.approx(2 * 1 * 0.5 / 1.5)
    empty = score_vqa_answer("", answer="liver", answer_type="open")
    assert empty["unparsed"] == 1.0 and empty["correct"] == 0.0
    withheld = score_vqa_answer("B", answer=None, answer_type="mcq", options=OPTS)
    assert math.isnan(withheld["correct"]) and withheld["parsed"] == "B"


def test_rotation_remaps_the_answer():
    opts, gt = rotate_options(["a", "b", "c", "d"], "C", 1)
    assert opts == ["b", "c", "d", "a"] and gt == "B"
    opts, gt = rotate_options(["a", "b", "c", "d"], "A", 1)
    assert gt == "D"


@pytest.mark.parametrize("response, letter", [
    ("option B is incorrect; the answer is C", "C"),   # issue #19: was read as B
    ("Option B is not right, option C is", "C"),
    ("Choice A is wrong. Answer: D", "D"),
    ("option B", "B"),
    ("The answer is A. No wait, the answer is B.", None),  # two answers: nothing decided
])
def test_negated_option_phrases(response, letter):
    got, rule = extract_choice(response, OPTS)
    assert got == letter and (rule == "answer_phrase" if letter else rule == "unparsed")


def test_unparsed_rate_is_better_lower_in_the_summary():
    from medimg_bench.engine.summary import higher_is_better
    from medimg_bench.metrics.text.vqa_metrics import VQAScores

    m = VQAScores()
    assert higher_is_better(m, "unparsed_rate") is False
    assert higher_is_better(m, "accuracy") is True and higher_is_better(m, "accuracy_closed") is True
