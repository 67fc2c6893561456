"""The open-answer judge's rubrics (reply readers, templates, prompt files) and its agreement
statistics: Fleiss' kappa against statsmodels, Cohen's kappa against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

from medimg_bench.metrics.text.open_judge import (
    RUBRICS,
    cohen_kappa,
    fleiss_kappa,
    judge_agreement,
    load_rubric,
    medevalkit_extract,
)


@pytest.mark.parametrize("reply, label", [
    ("CORRECT", "correct"), ("incorrect.", "incorrect"), ("**Correct**", "correct"),
    ("The answer matches.\nVerdict: INCORRECT", "incorrect"), ("correct-ish", "unparsed"),
    ("", "unparsed"), (None, "unparsed"), ("Partially correct", "unparsed"),
])
def test_correctness_reader(reply, label):
    assert RUBRICS["correctness"].parse(reply) == label


@pytest.mark.parametrize("reply, label", [
    ("<think>same organ</think>\n<judge>0</judge>", "correct"),
    ("<judge>1</judge>", "incorrect"),
    ("0", "correct"),  # no tags: MedEvalKit reads the whole reply
    ("<judge> 0 </judge>", "correct"),  # stripped
    ("<judge>0</judge><judge>0</judge>", "unparsed"),  # joined "0 0" is not "0": incorrect there
    ("<judge>0", "unparsed"),  # unclosed tag: the whole reply, not "0"
    ("I think it is correct", "unparsed"),
])
def test_medevalkit_reader_follows_extract(reply, label):
    assert RUBRICS["medevalkit"].parse(reply) == label
    assert RUBRICS["medevalkit"].score(label) == (1.0 if label == "correct" else 0.0)


def test_medevalkit_extract_as_the_harness():
    assert medevalkit_extract("a <judge>1</judge> b <judge>2</judge>") == "1 2"
    assert medevalkit_extract("") == "" and medevalkit_extract(None) == ""
    assert medevalkit_extract("<judge></judge>") == "<judge></judge>"  # empty contents: the text


@pytest.mark.parametrize("reply, label", [
    ("True", "true"), ("'True'", "true"), ("IDK", "idk"), ("N/A", "n/a"), ("False", "false"),
    ("not true", "true"),  # the harness checks the substring "true" first
    ("idk, maybe true", "true"), ("nothing", "false"),
])
def test_cxreasonbench_reader_in_its_order(reply, label):
    assert RUBRICS["cxreasonbench_init"].parse(reply) == label


def test_messages_and_prompt_files(tmp_path):
    system, user = RUBRICS["medevalkit"].messages("Where?", "left lung", " the left lung ")
    assert system is None and "Standard answer: left lung" in user and "User's answer: the left lung" in user
    system, user = RUBRICS["cxreasonbench_init"].messages("Q (a) yes (b) no", "(a) yes", "FINAL ANSWER: (a)")
    assert system.startswith("You compare two answers")
    assert user == "- Question: Q (a) yes (b) no- Answer 1: (a) yes - Answer 2: FINAL ANSWER: (a)"

    f = tmp_path / "harness_prompt.txt"
    f.write_text("Q={question} A={answer} R={response} format {{0/1}}", encoding="utf-8")
    rubric = load_rubric("medevalkit", prompt_file=f)
    assert rubric.messages("q", "a", "r") == (None, "Q=q A=a R=r format {0/1}")
    assert rubric.identity()["source"] == str(f)
    assert rubric.identity()["prompt_sha256"] != RUBRICS["medevalkit"].identity()["prompt_sha256"]
    f.write_text("{question} {reference}", encoding="utf-8")
    with pytest.raises(ValueError, match="unknown placeholder"):
        load_rubric("medevalkit", prompt_file=f)
    with pytest.raises(ValueError, match="cannot read"):
        load_rubric("medevalkit", prompt_file=tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="unknown judge rubric"):
        load_rubric("gpt4_review")


def test_kappas_equal_statsmodels_and_sklearn():
    rng = np.random.default_rng(0)
    for _trial in range(60):
        n, k, c = int(rng.integers(5, 60)), int(rng.integers(2, 6)), int(rng.integers(2, 5))
        truth = rng.integers(0, c, n)
        noise = rng.random((n, k)) < rng.uniform(0.05, 0.6)
        labels = np.where(noise, rng.integers(0, c, (n, k)), truth[:, None])
        table, _ = aggregate_raters(labels, n_cat=c)
        ref = sm_fleiss(table, method="fleiss")
        ours = fleiss_kappa(labels, c)
        if np.isnan(ref):
            assert np.isnan(ours)
        else:
            assert ours == pytest.approx(ref, abs=1e-12)
        a, b = labels[:, 0], labels[:, 1]
        if len(set(a) | set(b)) > 1:
            assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_agreement_block_by_hand():
    # 4 answers x 3 repeats (0 = correct, 1 = incorrect); second judge agrees on 3 of 4
    labels = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 0]])
    out = judge_agreement(labels, ["correct", "incorrect", "unparsed"], second=np.array([0, 1, 1, 1]))
    rep = out["between_repeats"]
    assert rep["percent_agreement"] == 0.75 and rep["n_disagreeing"] == 1
    assert rep["mean_pairwise_agreement"] == pytest.approx((1 + 1 / 3 + 1 + 1) / 4, abs=1e-6)
    table, _ = aggregate_raters(labels, n_cat=3)
    assert rep["fleiss_kappa"] == pytest.approx(sm_fleiss(table), abs=1e-6)
    lo, hi = rep["fleiss_kappa_ci"]
    assert lo <= rep["fleiss_kappa"] <= hi
    sec = out["second_judge"]
    assert sec["percent_agreement"] == 0.5  # second vs repeat 0: [0,0,1,0] vs [0,1,1,1]
    assert sec["cohen_kappa"] == pytest.approx(cohen_kappa_score([0, 0, 1, 0], [0, 1, 1, 1]), abs=1e-6)
    assert out["verdicts"] == {"correct": 8, "incorrect": 4, "unparsed": 0}

    single = judge_agreement(labels[:, :1], ["correct", "incorrect", "unparsed"])
    assert single["between_repeats"] is None and single["second_judge"] is None and "repeats=k" in single["note"]
