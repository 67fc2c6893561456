"""3DReasonKnee's structured answers: the templates of all 69 released questions, our parse rules
against the authors' own parse statements (fixtures from tools/reasonknee_reference.py, commit
bcc32ba), item-by-item grading, parse failures recorded (never a silent grade 0), the 3D box IoU
and the stateful ``moaks`` metric."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from medimg_bench.metrics.grounding import box_iou_3d
from medimg_bench.metrics.text.moaks import (
    answer_template,
    box_to_xyzxyz,
    grade_items,
    parse_answer,
    score_answer,
)
from medimg_bench.registry import create_metric

DATA = Path(__file__).parent / "data"
TEMPLATES = json.loads((DATA / "reasonknee_templates.json").read_text())
PARSES = json.loads((DATA / "reasonknee_parse_reference.json").read_text())

BML = {"MOAKS_scores": {"patella medial BML": {"Size of BML (including cyst)": 2,
                                               "Number of BML within subregion": 1,
                                               "% of lesion that is BML (excluding cyst)": 3}}}


@pytest.mark.parametrize("kind", ["guided", "zeroshot"])
def test_templates_of_the_released_questions(kind):
    templates = {q: answer_template(t) for q, t in TEMPLATES["templates"][kind].items()}
    assert len(templates) == 69
    # questions 58 and 59 lost the start of their template in the release: none is read
    assert sorted(q for q, t in templates.items() if t is None) == ["58", "59"]
    ranges = [r for t in templates.values() if t for r in t.values()]
    assert ranges.count((0, 8)) == 6 and set(ranges) == {(0, 1), (0, 3), (0, 8)}
    assert templates["1"] == {"patella medial bml/size of bml (including cyst)": (0, 3),
                              "patella medial bml/number of bml within subregion": (0, 3),
                              "patella medial bml/% of lesion that is bml (excluding cyst)": (0, 3)}
    # the wrapper varies (MOAKS_grade in 45) and is not part of an item's name
    assert templates["45"] == {"medial meniscus medial extrusion": (0, 3)}
    assert templates["54"] == {"presence": (0, 1), "tear location": (0, 3)}
    assert templates["48"] == {"medial meniscus anterior morphology/morphology": (0, 8)}


@pytest.mark.parametrize("case", PARSES["cases"], ids=lambda c: repr(c["reply"][:30]))
def test_parse_rules_agree_with_the_authors_code(case):
    for rule in ("qwen2vl", "o1"):
        ref, ours = case[rule], parse_answer(case["reply"], rule=rule)
        if ref["failed"]:
            assert not ours.ok and ours.error
        elif isinstance(ref["value"], dict):
            assert ours.ok and ours.obj == ref["value"]
        else:  # their json.loads also returns lists / numbers / null; an answer must be an object
            assert not ours.ok and "not an object" in ours.error


def test_the_corpus_covers_failures_and_objects():
    outcomes = [c["qwen2vl"]["failed"] for c in PARSES["cases"]]
    assert 30 < sum(outcomes) < len(outcomes) - 30
    assert PARSES["commit"].startswith("bcc32ba")


def test_lenient_and_sft_rules():
    text = "The patella looks normal.\n" + json.dumps(BML) + "\nDone."
    assert not parse_answer(text, rule="qwen2vl").ok
    assert parse_answer(text, rule="lenient").obj == BML
    sft = "Reasoning: ... Final diagnosis: ```json\n" + json.dumps(BML) + "\n```"
    assert parse_answer(sft, rule="sft").obj == BML and not parse_answer(sft, rule="qwen2vl").ok
    assert parse_answer("no JSON at all", rule="lenient").error.startswith("no JSON object")
    with pytest.raises(ValueError, match="unknown parse rule"):
        parse_answer("{}", rule="gpt")


def test_items_are_named_below_the_wrapper_and_compared_loosely():
    items, boxes = grade_items({"MOAKS_grade": {"Medial_Meniscus  medial-extrusion": 2}, "bbox": [1, 2, 3, 4, 5, 6]})
    assert items == {"medial meniscus medial extrusion": 2} and boxes == {"bbox": [1.0, 2, 3, 4, 5, 6]}


def test_several_top_level_objects_keep_their_items_apart():
    """Issue #35 item 6: a reference with one object per region lost all but the first region's
    items (the top-level key was always dropped, so both regions' "size" became one item)."""
    ref = {"patella medial BML": {"size": 1, "number": 2}, "patella lateral BML": {"size": 3, "number": 0}}
    items, _ = grade_items(ref)
    assert items == {"patella medial bml/size": 1, "patella medial bml/number": 2,
                     "patella lateral bml/size": 3, "patella lateral bml/number": 0}
    right = json.dumps(ref)
    wrapped = json.dumps({"MOAKS_scores": ref})  # the same regions under a wrapper: the same items
    swapped = json.dumps({"patella medial BML": {"size": 3, "number": 0},
                          "patella lateral BML": {"size": 1, "number": 2}})
    for reply, n_correct in ((right, 4), (wrapped, 4), (swapped, 0)):
        out = score_answer(reply, ref)
        assert out["n_items"] == 4 and out["n_correct"] == n_correct, reply


def test_score_counts_each_grade_and_records_parse_failures():
    reply = "```json\n" + json.dumps({"MOAKS_scores": {"patella medial BML": {
        "Size of BML (including cyst)": 2, "Number of BML within subregion": 2}}}) + "\n```"
    template = answer_template(TEMPLATES["templates"]["guided"]["1"])
    s = score_answer(reply, BML, template=template)
    # size right, number wrong, the % item missing (wrong): 1 of 3
    assert (s["n_items"], s["n_correct"], s["exact_match"]) == (3, 1, 0.0)
    assert s["grade_accuracy"] == pytest.approx(1 / 3)
    assert s["complete"] == 0.0 and s["out_of_range"] == 1 and s["parse_failed"] == 0.0
    bad = score_answer("Size 2, number 1", BML, template=template)
    assert bad["parse_failed"] == 1.0 and "invalid JSON" in bad["parse_error"]
    assert bad["grade_accuracy"] == 0.0 and bad["n_items"] == 3  # counted, and visible as a failure
    # strings, booleans and floats with a fraction are not grades
    s = score_answer(json.dumps({"x": {"a": "2", "b": True, "c": 1.5, "d": 3.0}}), {"x": {"a": 2, "b": 1, "c": 1, "d": 3}})
    assert s["correct"] == {"a": 0.0, "b": 0.0, "c": 0.0, "d": 1.0}
    no_ref = score_answer(json.dumps(BML), None, template=template)
    assert no_ref["complete"] == 1.0 and "grade_accuracy" not in no_ref
    out_of_range = score_answer(json.dumps({"MOAKS_scores": {"patella superior osteophyte": {"grade": 4}}}), None,
                                template=answer_template(TEMPLATES["templates"]["guided"]["30"]))
    assert out_of_range["complete"] == 0.0
    with pytest.raises(ValueError, match="no integer grade"):
        score_answer("{}", {"note": "text only"})


def test_box_iou_in_the_question_58_order():
    ref = [10, 30, 100, 200, 50, 150]  # start_slice, end_slice, x_min, x_max, y_min, y_max
    pred = [20, 30, 100, 200, 50, 150]
    assert box_to_xyzxyz(ref) == [10, 100, 50, 30, 200, 150]
    s = score_answer(json.dumps({"bbox": pred, "x": {"presence": 1}}), {"bbox": ref, "x": {"presence": 1}})
    assert s["box_iou"] == pytest.approx(0.5) and s["grade_accuracy"] == 1.0
    expected = float(box_iou_3d([box_to_xyzxyz(pred)], [box_to_xyzxyz(ref)], inclusive=True)[0])
    assert score_answer(json.dumps({"bbox": pred}), {"bbox": ref}, inclusive=True)["box_iou"] == pytest.approx(expected)
    assert score_answer(json.dumps({"x": {"presence": 1}}), {"bbox": ref, "x": {"presence": 1}})["box_iou"] == 0.0
    assert score_answer(json.dumps({"bbox": [30, 10, 0, 1, 0, 1]}), {"bbox": ref})["box_iou"] == 0.0
    with pytest.raises(ValueError, match="maximum below its minimum"):
        score_answer("{}", {"bbox": [30, 10, 0, 1, 0, 1]})


def test_stateful_metric_columns_and_micro_accuracy():
    m = create_metric("moaks")
    template = answer_template(TEMPLATES["templates"]["guided"]["1"])
    replies = [json.dumps(BML), "not json", json.dumps({"MOAKS_scores": {"patella medial BML": {
        "Size of BML (including cyst)": 2}}})]
    scored = [score_answer(r, BML, template=template) for r in replies]
    scored.append(score_answer(json.dumps({"bbox": [0, 10, 0, 10, 0, 10], "a": {"presence": 1}}),
                               {"bbox": [0, 10, 0, 10, 0, 20], "a": {"presence": 0}}))
    m.update(scored, [s["n_items"] for s in scored], ids=["a", "b", "c", "d"])
    values = m.metric_values()
    acc = values["grade_accuracy"][1].flatten()
    assert torch.allclose(acc, torch.tensor([1.0, 0.0, 1 / 3, 0.0], dtype=torch.float64))
    assert values["parse_failed"][1].flatten().tolist() == [0.0, 1.0, 0.0, 0.0]
    iou = values["box_iou"][1].flatten()
    assert math.isnan(iou[0]) and iou[3] == pytest.approx(0.5)
    assert values["acc@0.5"][1].flatten()[3] == 1.0 and values["acc@0.25"][1].flatten()[3] == 1.0
    notes = m.summary_notes()["moaks"]
    assert notes["grade_accuracy_micro"] == pytest.approx((3 + 0 + 1 + 0) / 10)
    assert notes["n_parse_failures"] == 1 and notes["n_questions_with_reference"] == 4
    assert m.higher_is_better_of("parse_failed") is False
    with pytest.raises(ValueError, match="score_answer"):
        m.update([{"grade_accuracy": 1.0}], [1])
