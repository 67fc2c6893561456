"""VQAScorer: one question's answers scored (rule, judge letter, rubric, CircularEval), the
scoring the ``vqa`` task calls; values derived by hand from the strict rule."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from medimg_bench.metrics.text.vqa_scorer import VQAScorer, judge_shown_options, rotated_question


def test_rule_and_rotation_of_a_multiple_choice_question():
    s = VQAScorer("medimg_bench")
    # options x, y, z with answer B ("y"); rotation 1 shows y, z, x: the answer is A
    assert rotated_question(["x", "y", "z"], "B", 1) == (["y", "z", "x"], "A")
    assert rotated_question(["x", "y", "z"], None, 1) == (["y", "z", "x"], None)
    assert rotated_question(None, "yes", 0) == (None, "yes")
    right = s.rotation("A", answer="B", kind="mcq", options=["x", "y", "z"], shift=1)
    assert right["correct"] == 1.0 and right["parsed_by"] == "cascade"
    wrong = s.rotation("B", answer="B", kind="mcq", options=["x", "y", "z"], shift=1)
    assert wrong["correct"] == 0.0


def test_circular_needs_every_rotation_right():
    s = VQAScorer("medimg_bench")
    opts = ["x", "y", "z"]
    all_right = s.question([(0, "B"), (1, "A"), (2, "C")], answer="B", kind="mcq", options=opts)
    assert all_right["correct"] == 1.0 and all_right["circular_correct"] == 1.0
    one_wrong = s.question([(0, "B"), (1, "A"), (2, "A")], answer="B", kind="mcq", options=opts)
    assert one_wrong["correct"] == 1.0 and one_wrong["circular_correct"] == 0.0
    single = s.question([(0, "B")], answer="B", kind="mcq", options=opts)
    assert "circular_correct" not in single


def test_judge_letter_settles_only_unparsed_answers():
    s = VQAScorer("medimg_bench")
    opts = ["effusion", "mass"]
    unparsed = s.rule("I cannot tell", answer="A", kind="mcq", options=opts)
    assert unparsed["unparsed"] == 1.0
    assert judge_shown_options("mcq", unparsed, opts) == opts
    judged = s.rotation("I cannot tell", answer="A", kind="mcq", options=opts, judge_reply="A")
    assert (judged["parsed"], judged["correct"], judged["rule"], judged["parsed_by"]) == ("A", 1.0, "judge", "judge")
    assert judged["judge_response"] == "A"
    # a reply that is no option leaves the answer unparsed
    junk = s.rotation("I cannot tell", answer="A", kind="mcq", options=opts, judge_reply="maybe")
    assert junk["unparsed"] == 1.0 and junk["parsed_by"] is None
    # a parsed answer is not handed to the judge, whatever it replied
    parsed = s.rotation("B", answer="A", kind="mcq", options=opts, judge_reply="A")
    assert parsed["correct"] == 0.0 and "judge_response" not in parsed
    # a closed yes/no question: the judge picks among yes / no
    closed = s.rotation("hard to say", answer="no", kind="closed", options=None, judge_reply="B")
    assert closed["parsed"] == "no" and closed["correct"] == 1.0
    assert judge_shown_options("open", {"unparsed": 1.0}, None) is None


def test_first_pass_is_reused_not_recomputed():
    s = VQAScorer("medimg_bench")
    first, shown = s.first_pass("I cannot tell", answer="A", kind="mcq", options=["p", "q"])
    assert shown == ["p", "q"]
    got = s.question([(0, "I cannot tell")], answer="A", kind="mcq", options=["p", "q"],
                     judge_replies={0: "A"}, first={0: first})
    assert got["correct"] == 1.0 and first["unparsed"] == 1.0  # the kept first pass is not changed


def test_rubric_verdicts_become_category_indices():
    rubric = SimpleNamespace(categories=["wrong", "partial", "right"], score=lambda lab: {"wrong": 0.0,
                                                                                         "partial": 0.5,
                                                                                         "right": 1.0}[lab])
    s = VQAScorer("medimg_bench")
    graded = {"labels": ["right", "partial"], "score": 0.75, "second_label": "wrong"}
    got = s.question([(0, "left lung")], answer="left lung", kind="open", options=None, graded=graded, rubric=rubric)
    assert got["judge_labels"] == [2, 1] and got["judge_score"] == 0.75
    assert got["judge2_label"] == 0 and got["judge2_score"] == 0.0


def test_unknown_profile_is_refused():
    with pytest.raises(ValueError, match="unknown scoring profile"):
        VQAScorer("no_such_profile")
