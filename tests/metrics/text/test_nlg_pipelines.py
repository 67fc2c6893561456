"""Scoring pipelines by name against the reference code's stored outputs (generated corpus of
2,000 report pairs, tools/make_report_text_fixtures.py) and against the real files in
../shared/data (skipped when absent): ``r2gen`` = R2Gen's evaluation path (and CvT2DistilGPT2's
copy), ``rexrank`` = CXR-Report-Metric's per-report BLEU-2, ``coco`` = pycocoevalcap's
PTBTokenizer + scorers (live)."""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.metrics.text.nlg import java_available, report_text_scores
from medimg_bench.metrics.text.pipelines import (
    R2GenVocabulary,
    r2gen_texts,
    rexrank_bleu2,
    score_reports,
)
from medimg_bench.metrics.text.tokenizers import ptb_jar_path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from report_corpus import report_corpus  # noqa: E402

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
CVT = SHARED / "iu_xray_cvt2distilgpt2"
MOERAD = SHARED / "iu_xray_moerad_rexrank"
needs_java = pytest.mark.skipif(not java_available(), reason="METEOR needs Java")
needs_jar = pytest.mark.skipif(ptb_jar_path() is None, reason="needs Java and pycocoevalcap's PTB jar")


@pytest.fixture(scope="module")
def fx() -> dict:
    with gzip.open(HERE / "data" / "report_pipelines.json.gz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def data() -> dict:
    return report_corpus(2000, 2000, seed=0)


@pytest.mark.parametrize("dataset", ["iu_xray", "mimic_cxr"])
def test_r2gen_vocabulary_and_references_equal_r2gens_code(fx, data, dataset):
    part = fx["r2gen"][dataset]
    vocab = R2GenVocabulary(data["train"], threshold=part["threshold"], dataset=dataset)
    assert sorted(vocab.token2idx) == part["vocabulary"]
    refs = [vocab.reference(r, part["max_seq_length"]) for r in data["references"]]
    assert refs == part["decoded_references"]
    assert [vocab.decode(vocab.encode(g)[1:]) for g in data["generated"]] == part["decoded_generated"]


@pytest.mark.parametrize("dataset", ["iu_xray", "mimic_cxr"])
def test_r2gen_scores_equal_r2gens_compute_scores(fx, data, dataset):
    part = fx["r2gen"][dataset]
    # hypotheses as an R2Gen model writes them (decoded vocabulary words): the full-stop spacing
    # is a no-op on them
    gens, refs = r2gen_texts(part["decoded_generated"], data["references"], train_reports=data["train"],
                             dataset=dataset)
    assert gens == part["decoded_generated"] and refs == part["decoded_references"]
    corpus, _ = score_reports(part["decoded_generated"], data["references"], scoring="r2gen",
                              train_reports=data["train"], dataset=dataset, meteor=java_available())
    for name, value in part["compute_scores"].items():  # BLEU_1..4, METEOR, ROUGE_L
        if name == "METEOR" and "METEOR" not in corpus:
            continue
        assert corpus[name] == pytest.approx(value, abs=1e-12), name


def test_cvt2distilgpt2_variant_equals_its_coco_metrics(fx, data):
    part = fx["cvt2distilgpt2"]
    _, refs = r2gen_texts(data["generated"], data["references"], train_reports=data["train"],
                          variant="cvt2distilgpt2")
    assert [r.replace(" .", ".") for r in refs] == [lab.replace(" .", ".") for lab in part["labels"]]
    generated = [g.replace("\n", " ") for g in data["generated"]]  # as the fixture script fed them
    corpus, per = score_reports(generated, data["references"], scoring="r2gen", variant="cvt2distilgpt2",
                                train_reports=data["train"], meteor=java_available())
    names = {"chen_bleu_1": "BLEU_1", "chen_bleu_2": "BLEU_2", "chen_bleu_3": "BLEU_3", "chen_bleu_4": "BLEU_4",
             "chen_meteor": "METEOR", "chen_rouge": "ROUGE_L", "chen_cider": "CIDEr"}
    for theirs, ours in names.items():
        if ours not in corpus:
            continue
        assert corpus[ours] == pytest.approx(part["scores"][theirs], abs=1e-12), ours
        np.testing.assert_allclose(per[ours], part["per_report"][theirs], rtol=0, atol=1e-9, err_msg=ours)


def test_rexrank_bleu2_equals_cxr_report_metric(fx, data):
    got = rexrank_bleu2(data["generated"], data["references"])
    # fast_bleu sums in C++ in another order: equal to ~1e-16
    np.testing.assert_allclose(got, fx["rexrank"]["bleu_score"], rtol=0, atol=1e-12)
    corpus, per = score_reports(data["generated"], data["references"], scoring="rexrank")
    assert corpus["bleu_score"] == pytest.approx(float(np.mean(fx["rexrank"]["bleu_score"])), abs=1e-12)


def test_rexrank_bleu2_edge_cases():
    # no unigram match, an empty hypothesis, a one-word hypothesis (no bigram: smoothed), commas kept on words
    got = rexrank_bleu2(["x y", "", "heart", "heart, normal."], ["heart normal", "heart", "heart normal", "heart normal ."])
    assert got[0] == 0.0 and got[1] == 0.0
    assert got[2] == pytest.approx(np.exp(1 - 2) * np.sqrt(1.0 * 0.1), abs=1e-15)
    assert 0 < got[3] < 1


def test_unknown_scoring_and_missing_training_split_named():
    with pytest.raises(ValueError, match="unknown scoring 'bertscore'"):
        score_reports(["a"], ["a"], scoring="bertscore")
    with pytest.raises(ValueError, match="train_reports"):
        score_reports(["a"], ["a"], scoring="r2gen")
    with pytest.raises(ValueError, match="variant"):
        score_reports(["a"], ["a"], scoring="r2gen", train_reports=["a"], variant="cmn")


@needs_jar
def test_report_text_scores_ptb_equals_pycocoevalcap_pipeline_on_raw_text(data):
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    gen, refs = data["generated"][:600], data["references"][:600]
    tok = PTBTokenizer()
    gts = tok.tokenize({i: [{"caption": r}] for i, r in enumerate(refs)})
    res = tok.tokenize({i: [{"caption": g}] for i, g in enumerate(gen)})
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    ours = report_text_scores(gen, refs, meteor=False)
    for k in range(4):
        assert ours[f"bleu{k + 1}"] == pytest.approx(bleu[k], abs=1e-12)
    assert ours["rouge_l"] == pytest.approx(Rouge().compute_score(gts, res)[0], abs=1e-12)
    assert ours["cider_d"] == pytest.approx(Cider().compute_score(gts, res)[0], abs=1e-12)


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.skipif(not CVT.is_dir(), reason="../shared/data/iu_xray_cvt2distilgpt2 is absent")
def test_cvt2distilgpt2_real_files_reproduce_the_readme():
    ann = json.loads((CVT / "annotation.json").read_text())
    refs = {e["id"]: e["report"] for e in ann["test"]}
    rows = _read_csv(next(CVT.glob("test_reports_*.csv")))
    gen, ref = [r["report"] for r in rows], [refs[r["dicom_id"]] for r in rows]
    corpus, _ = score_reports(gen, ref, scoring="r2gen", variant="cvt2distilgpt2",
                              train_reports=[e["report"] for e in ann["train"]], meteor=java_available())
    readme = {"BLEU_1": 0.4734129309654236, "BLEU_2": 0.30362269282341003, "BLEU_3": 0.22399061918258667,
              "BLEU_4": 0.17524345219135284, "METEOR": 0.19990624487400055}
    for name, value in readme.items():  # printed after float32 logging
        if name in corpus:
            assert float(np.float32(corpus[name])) == value, name
    assert corpus["ROUGE_L"] == pytest.approx(0.3761140813853112, abs=1e-15)
    assert corpus["CIDEr"] == pytest.approx(0.6941080384291234, abs=1e-15)


@pytest.mark.skipif(not MOERAD.is_dir(), reason="../shared/data/iu_xray_moerad_rexrank is absent")
def test_moerad_real_files_per_report_bleu_equals_their_scores():
    preds, gts = _read_csv(MOERAD / "preds.csv"), _read_csv(MOERAD / "gts.csv")
    scores = _read_csv(MOERAD / "report_scores.csv")
    got = rexrank_bleu2([r["report"] for r in preds], [r["report"] for r in gts])
    np.testing.assert_allclose(got, [float(r["bleu_score"]) for r in scores], rtol=0, atol=1e-12)
    assert round(float(got.mean()), 4) == 0.2704
