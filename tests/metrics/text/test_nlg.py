"""Report text metrics equal pycocoevalcap on the same tokenised inputs (≤ 1e-6), corpus-level
and per report; METEOR runs pycocoevalcap's jar (skipped without Java)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from medimg_bench.metrics import report_text_scores
from medimg_bench.metrics.text.nlg import (
    _lcs_length,
    bleu_scores,
    cider_d_scores,
    java_available,
    rouge_l_scores,
    tokenize,
)

pytest.importorskip("pycocoevalcap")
from pycocoevalcap.bleu.bleu import Bleu  # noqa: E402
from pycocoevalcap.cider.cider import Cider  # noqa: E402
from pycocoevalcap.rouge.rouge import Rouge  # noqa: E402

VOCAB = ("no acute cardiopulmonary process the lungs are clear heart size is normal small left "
         "pleural effusion mild pulmonary edema there is right lower lobe opacity pneumothorax "
         "stable support devices endotracheal tube tip cm above carina").split()


def _corpus(seed: int, n: int = 40, multi_ref: bool = False):
    rng = random.Random(seed)

    def sent(lo: int, hi: int) -> str:
        return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))

    gen = [sent(1, 25) for _ in range(n)]
    refs = [[sent(3, 30) for _ in range(rng.randint(1, 3) if multi_ref else 1)] for _ in range(n)]
    # overlapping pairs so the scores are not all near zero
    for i in range(0, n, 3):
        words = refs[i][0].split()
        gen[i] = " ".join(words[: max(1, len(words) - rng.randint(0, 4))])
    return gen, refs


def _coco(scorer, gen, refs):
    gts = {i: list(r) for i, r in enumerate(refs)}
    res = {i: [g] for i, g in enumerate(gen)}
    if isinstance(scorer, Bleu):
        return scorer.compute_score(gts, res, verbose=0)
    return scorer.compute_score(gts, res)


@pytest.mark.parametrize("seed,multi", [(0, False), (1, True), (2, True), (3, False)])
def test_equal_to_pycocoevalcap(seed, multi):
    gen, refs = _corpus(seed, multi_ref=multi)
    corpus, per = bleu_scores(gen, refs)
    ref_corpus, ref_per = _coco(Bleu(4), gen, refs)
    np.testing.assert_allclose(corpus, ref_corpus, atol=1e-9)
    np.testing.assert_allclose(per, np.asarray(ref_per).T, atol=1e-9)
    value, per = rouge_l_scores(gen, refs)
    ref_value, ref_per = _coco(Rouge(), gen, refs)
    assert value == pytest.approx(ref_value, abs=1e-9)
    np.testing.assert_allclose(per, ref_per, atol=1e-9)
    value, per = cider_d_scores(gen, refs)
    ref_value, ref_per = _coco(Cider(), gen, refs)
    assert value == pytest.approx(ref_value, abs=1e-9)
    np.testing.assert_allclose(per, ref_per, atol=1e-9)


def test_lcs_bit_parallel_equals_dynamic_programming():
    from pycocoevalcap.rouge.rouge import my_lcs

    rng = random.Random(5)
    for _ in range(200):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 30))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 30))]
        assert _lcs_length(a, b) == my_lcs(a, b)


def test_empty_generated_report_scores_zero_overlap_without_crash():
    scores = report_text_scores(["", "   "], ["the lungs are clear", "no effusion"], meteor=False)
    assert scores["bleu1"] < 1e-6 and scores["rouge_l"] == 0.0 and scores["cider_d"] == 0.0


def test_bad_input_named():
    with pytest.raises(ValueError, match="2 generated reports but 1 references"):
        report_text_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="reference 0 is empty"):
        bleu_scores(["a"], [[]])
    with pytest.raises(TypeError, match="generated report 0 is bytes"):
        bleu_scores([b"a"], ["a"])


def test_tokenize_lowercases_and_drops_punctuation():
    assert tokenize("No acute process. Heart size: NORMAL, (stable)!") == "no acute process heart size normal stable"


def test_report_text_scores_contract_names():
    gen, refs = _corpus(7)
    out = report_text_scores(gen, [r[0] for r in refs], tokenized=True, meteor=False)
    assert set(out) == {"bleu1", "bleu2", "bleu3", "bleu4", "rouge_l", "cider_d"}
    ref_bleu, _ = _coco(Bleu(4), gen, [[r[0]] for r in refs])
    assert out["bleu4"] == pytest.approx(ref_bleu[3], abs=1e-6)


@pytest.mark.skipif(not java_available(), reason="METEOR needs Java (no 'java' on the PATH)")
def test_meteor_through_the_reference_jar():
    from pycocoevalcap.meteor.meteor import Meteor

    gen, refs = _corpus(11, n=12)
    out = report_text_scores(gen, [r[0] for r in refs], tokenized=True, meteor=True)
    scorer = Meteor()
    ref, _ = scorer.compute_score({i: [r[0]] for i, r in enumerate(refs)}, {i: [g] for i, g in enumerate(gen)})
    assert out["meteor"] == pytest.approx(ref, abs=1e-6)
