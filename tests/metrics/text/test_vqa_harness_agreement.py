"""Differential tests: every VQA profile against its harness's own scoring code, answer by answer
and in the aggregate figures, on the generated corpus of tools/vqa_corpus.py (3,362 closed/open
and 3,550 multiple-choice (question, reference, response) triples). The harnesses' decisions
and figures were produced by tools/vqa_harness_fixtures.py, which runs their code at the
commits named there and in docs/vlm.md; the fixtures hold their numbers, not their code."""

from __future__ import annotations

import gzip
import json
import math
from functools import cache
from pathlib import Path

import pytest

from medimg_bench.metrics.text import vqa_profiles as vp

DATA = Path(__file__).parent / "data" / "vqa_harness"


@cache
def _rows(name: str) -> tuple[dict, ...]:
    with gzip.open(DATA / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


@cache
def _meta() -> dict:
    return json.loads((DATA / "meta.json").read_text())


def _kind(it: dict) -> str:
    return it["answer_type_original"].strip().lower()


def _close(a: float, b: float, tol: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def test_corpus_sizes():
    assert len(_rows("corpus_closed_open")) >= 3000 and len(_rows("corpus_mcq")) >= 3000
    m = _meta()["corpus"]
    assert (m["closed_open"], m["mcq"]) == (len(_rows("corpus_closed_open")), len(_rows("corpus_mcq")))


# -- LLaVA-Med -------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile, commit", [("llava_med", "b9a98a7"), ("llava_med_initial", "ad758b6")])
def test_llava_med_answer_by_answer(profile, commit):
    cand = _meta()["harness"][f"llava_med_{commit}"]["candidates"]
    bad = []
    for it, h in zip(_rows("corpus_closed_open"), _rows(f"llava_med_{commit}"), strict=True):
        s = vp.score_llava_med(it["response"], answer=it["answer"], answer_type=_kind(it), version=profile,
                               candidates=cand)
        if _kind(it) == "closed":
            ours = (0, None) if math.isnan(s["correct"]) else (1, s["correct"])
            if ours != (h["counted"], h["hit"]):
                bad.append((it["id"], ours, h))
        else:
            for name, theirs in h.items():
                if name != "id" and not _close(s["harness"][name], theirs):
                    bad.append((it["id"], name, s["harness"][name], theirs))
    assert not bad, f"{len(bad)} answers differ from LLaVA-Med @ {commit}: {bad[:5]}"


@pytest.mark.parametrize("profile, commit", [("llava_med", "b9a98a7"), ("llava_med_initial", "ad758b6")])
def test_llava_med_aggregates(profile, commit):
    meta = _meta()["harness"][f"llava_med_{commit}"]
    sums: dict[str, list[float]] = {}
    for it in _rows("corpus_closed_open"):
        s = vp.score_llava_med(it["response"], answer=it["answer"], answer_type=_kind(it), version=profile,
                               candidates=meta["candidates"])
        for name, v in s["harness"].items():
            if not math.isnan(v):
                sums.setdefault(name, []).append(v)
    for name, theirs in meta["figures_x100"].items():
        ours = 100 * sum(sums[name]) / len(sums[name])
        assert _close(ours, theirs), (name, ours, theirs)


def test_the_two_llava_med_versions_differ_only_by_dropping():
    old, new = _rows("llava_med_ad758b6"), _rows("llava_med_b9a98a7")
    dropped = [o for o, n in zip(old, new) if "counted" in o and o["counted"] == 0]
    assert len(dropped) > 100  # the corpus exercises the difference
    assert all(n["counted"] == 1 and n["hit"] == 0 for o, n in zip(old, new) if "counted" in o and not o["counted"])
    y_old = _meta()["harness"]["llava_med_ad758b6"]["figures_x100"]["yes/no accuracy"]
    y_new = _meta()["harness"]["llava_med_b9a98a7"]["figures_x100"]["yes/no accuracy"]
    assert y_old > y_new  # dropping misses raises the initial release's closed accuracy


def test_llava_med_science_qa_rule():
    mcq = {it["id"]: it for it in _rows("corpus_mcq")}
    n_random = 0
    for h in _rows("llava_med_sqa_ad758b6"):
        it = mcq[h["id"]]
        s = vp.score_llava_med(it["response"], answer=it["answer"], answer_type="mcq", options=it["options"])
        if h["random"]:  # the harness drew an option at random: never a decision of ours
            n_random += 1
            assert s["parsed"] is None and s["unparsed"] == 1.0 and s["correct"] == 0.0, h
        else:
            assert s["parsed"] == h["parsed_ans"] and s["correct"] == float(h["correct"]), h
    assert n_random > 1000


# -- MultiMedEval ----------------------------------------------------------------------------------
def test_multimedeval_answer_by_answer_and_aggregates():
    sums: dict[str, list[float]] = {}
    bad = []
    for it, h in zip(_rows("corpus_closed_open"), _rows("multimedeval_d9ac283"), strict=True):
        s = vp.score_multimedeval(it["response"], answer=it["answer"], answer_type=_kind(it))
        got = ((s["split"] == "closed"), s["correct"], s["recall"], s["harness"]["F1"], s["harness"]["bleu"])
        want = (h["closed"], h["correct"], h["recall"], h["F1"], h["bleu"])
        if got[:2] != want[:2] or not all(_close(a, b) for a, b in zip(got[2:], want[2:])):
            bad.append((it["id"], got, want))
        for name, v in s["harness"].items():
            sums.setdefault(name, []).append(v)
    assert not bad, f"{len(bad)} answers differ from MultiMedEval: {bad[:5]}"
    for name, theirs in _meta()["harness"]["multimedeval_d9ac283"]["figures"].items():
        assert _close(sum(sums[name]) / len(sums[name]), theirs), name


def test_multimedeval_split_is_by_reference_not_answer_type():
    rows = list(zip(_rows("corpus_closed_open"), _rows("multimedeval_d9ac283")))
    assert any(_kind(it) == "open" and h["closed"] for it, h in rows)      # yes/no typed OPEN
    assert any(_kind(it) == "closed" and not h["closed"] for it, h in rows)  # "one", "left" typed CLOSED


def test_multimedeval_qa_choice():
    mcq = {it["id"]: it for it in _rows("corpus_mcq")}
    for h in _rows("multimedeval_qa_d9ac283"):
        it = mcq[h["id"]]
        assert h["medqa"] == h["dynamic"]  # the two QA rules of the harness agree on the corpus
        assert vp.multimedeval_choice(it["response"], it["options"]) == h["medqa"], h


# -- lmms-eval -------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["vqa_rad", "slake"])
def test_lmms_eval_answer_by_answer_and_aggregates(variant):
    sums: dict[str, list[float]] = {}
    bad = []
    for it, h in zip(_rows("corpus_closed_open"), _rows("lmms_eval_9f7638b"), strict=True):
        s = vp.score_lmms_eval(it["response"], answer=it["answer"], answer_type=_kind(it), variant=variant)
        figures = vp.PROFILES["lmms_eval"].figures  # the task's metric_list (bleu2/3, rouge2 are not in it)
        theirs = {k: v for k, v in h[variant].items() if v is not None and k in figures}
        ours = {k: v for k, v in s["harness"].items() if k in h[variant]}
        if set(theirs) != set(ours) or not all(_close(ours[k], theirs[k]) for k in theirs):
            bad.append((it["id"], ours, theirs))
        for k, v in theirs.items():
            sums.setdefault(k, []).append(v)
        assert s["correct"] == theirs.get("close_accuracy", theirs.get("open_em"))
    assert not bad, f"{len(bad)} answers differ from lmms-eval {variant}: {bad[:5]}"
    for name, theirs in _meta()["harness"]["lmms_eval_9f7638b"]["figures"][variant].items():
        if name in sums:
            assert _close(sum(sums[name]) / len(sums[name]), theirs), name


def test_lmms_eval_judge_multi_choice():
    mcq = {it["id"]: it for it in _rows("corpus_mcq")}
    for h in _rows("lmms_eval_mcq_9f7638b"):
        it = mcq[h["id"]]
        s = vp.score_lmms_eval(it["response"], answer=it["answer"], answer_type="mcq", options=it["options"])
        assert s["correct"] == float(h["judge_multi_choice"]), (h, s)


# -- VLMEvalKit ------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile, commit", [("vlmevalkit", "e8e78f0"), ("vlmevalkit_18fc37a", "18fc37a")])
def test_vlmevalkit_answer_by_answer(profile, commit):
    mcq = {it["id"]: it for it in _rows("corpus_mcq")}
    bad = []
    hits = []
    for h in _rows(f"vlmevalkit_{commit}"):
        it = mcq[h["id"]]
        choices = {chr(65 + i): o for i, o in enumerate(it["options"])}
        if vp.vlmevalkit_can_infer(it["response"], dict(choices), version=profile) != h["can_infer"]:
            bad.append((h, it["response"]))
        s = vp.score_vlmevalkit(it["response"], answer=it["answer"], answer_type="mcq", options=it["options"],
                                version=profile)
        if "hit_exact_matching" in h:
            assert s["correct"] == h["hit_exact_matching"], h
            hits.append(h["hit_exact_matching"])
            if h["random_with_failing_judge"]:  # VLMEvalKit would draw a letter; we never do
                assert s["unparsed"] == 1.0 and s["correct"] == 0.0
    assert not bad, f"{len(bad)} answers differ from VLMEvalKit @ {commit}: {bad[:5]}"
    if hits:
        assert len(hits) == len(mcq)


def test_vlmevalkit_versions_differ_on_the_corpus():
    old, new = _rows("vlmevalkit_18fc37a"), _rows("vlmevalkit_e8e78f0")
    assert sum(o["can_infer"] != n["can_infer"] for o, n in zip(old, new)) > 50


def test_bleu_and_rouge_equal_the_libraries_the_harnesses_call():
    """NLTK's sentence_bleu (unsmoothed and method1) and the rouge package's F-scores, on every
    (response, reference) of the corpus, tokenised as lmms-eval does."""
    import warnings

    nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")
    rouge = pytest.importorskip("rouge")
    from medimg_bench.metrics.text.vqa_harness_nlg import nltk_sentence_bleu, pltrdy_rouge

    smooth = nltk_bleu.SmoothingFunction().method1
    for it in _rows("corpus_closed_open")[::3]:
        p, r = it["response"].lower(), it["answer"].lower()
        h, ref = p.replace(".", " .").split(), r.replace(".", " .").split()
        for w in ((1.0,), (0.25,) * 4, (0, 1, 0, 0)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert nltk_sentence_bleu([ref], h, w) == pytest.approx(nltk_bleu.sentence_bleu([ref], h, weights=w), abs=1e-12)
                assert nltk_sentence_bleu([ref], h, w, smoothing="method1") == pytest.approx(
                    nltk_bleu.sentence_bleu([ref], h, weights=w, smoothing_function=smooth), abs=1e-12)
        try:
            want = rouge.Rouge().get_scores(p, r)[0]
        except ValueError:
            with pytest.raises(ValueError):
                pltrdy_rouge(p, r)
            continue
        got = pltrdy_rouge(p, r)
        assert got["rouge1"] == pytest.approx(want["rouge-1"]["f"], abs=1e-12)
        assert got["rougel"] == pytest.approx(want["rouge-l"]["f"], abs=1e-12)
