"""Tokenizers by name: ``ptb`` equals pycocoevalcap's PTBTokenizer token for token (stored jar
output on 20,268 sentences; live against the jar where Java is installed; the real IU X-ray
reports when ../shared/data is present), ``r2gen`` equals R2Gen's cleaning (stored output of its
code), ``simple`` and ``none``."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from medimg_bench.metrics.text.tokenizers import (
    ptb_jar_path,
    ptb_tokenize,
    r2gen_clean,
    tokenize_texts,
)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from ptb_corpus import corpus  # noqa: E402
from report_corpus import report_corpus  # noqa: E402

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
needs_jar = pytest.mark.skipif(ptb_jar_path() is None, reason="needs Java and pycocoevalcap's PTB jar")


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()


def _fixture(name: str) -> dict:
    with gzip.open(HERE / "data" / name, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def test_ptb_python_equals_stored_jar_output_on_20k_sentences():
    fx = _fixture("ptb_pycocoevalcap.json.gz")
    sents = fx["inputs"]  # stored with the jar's output (the generator draws on growing fixtures)
    assert len(sents) >= 20000 and _digest(sents) == fx["inputs_sha256"]
    got = ptb_tokenize(sents, backend="python")
    bad = [(s, a, b) for s, a, b in zip(sents, got, fx["tokens"]) if a != b]
    assert not bad, f"{len(bad)} sentences differ, e.g. {bad[:3]}"


@needs_jar
def test_ptb_both_backends_equal_pycocoevalcap_live_on_another_20k():
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    sents = corpus(20000, seed=1)
    ref = PTBTokenizer().tokenize({i: [{"caption": s}] for i, s in enumerate(sents)})
    ref = [ref[i][0] for i in range(len(sents))]
    py = ptb_tokenize(sents, backend="python")
    assert [i for i, (a, b) in enumerate(zip(py, ref)) if a != b] == []
    assert ptb_tokenize(sents, backend="jar") == ref


@needs_jar
@pytest.mark.skipif(not (SHARED / "iu_xray_cvt2distilgpt2").is_dir(), reason="../shared/data is absent")
def test_ptb_equals_pycocoevalcap_on_real_iu_xray_reports():
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    ann = json.loads((SHARED / "iu_xray_cvt2distilgpt2" / "annotation.json").read_text())
    texts = [e["report"] for split in ann.values() for e in split]
    for name in ("preds.csv", "gts.csv"):
        with open(SHARED / "iu_xray_moerad_rexrank" / name, newline="") as fh:
            texts += [r["report"] for r in csv.DictReader(fh)]
    ref = PTBTokenizer().tokenize({i: [{"caption": s}] for i, s in enumerate(texts)})
    assert ptb_tokenize(texts, backend="python") == [ref[i][0] for i in range(len(texts))]


@pytest.mark.parametrize("text, expected", [
    ("The 1.5 cm nodule.", "the 1.5 cm nodule"),
    ("Left-sided effusion, 3-4 mm.", "left-sided effusion 3-4 mm"),
    ("It cannot be excluded.", "it can not be excluded"),
    ("Can't, won't, it's", "ca n't wo n't it 's"),
    ("T2/FLAIR (stable) [new] {x}", "t2/flair -lrb- stable -rrb- -lsb- new -rsb- -lcb- x -rcb-"),
    ('"Quoted" 10% e.g. Dr. Smith', "quoted 10 % e.g. dr. smith"),
    ("1. Heart normal. 2) Lungs clear.", "1 heart normal 2 -rrb- lungs clear"),
    ("Seen at 10:30 a.m. on 12/03/2020.", "seen at 10:30 a.m. on 12/03/2020"),
    ("Œdème … café — ok", "œdème café ok"),
])
def test_ptb_known_answers_both_backends(text, expected):
    assert ptb_tokenize([text], backend="python") == [expected]
    if ptb_jar_path() is not None:
        assert ptb_tokenize([text], backend="jar") == [expected]


def test_ptb_texts_keep_their_order_and_line_breaks_inside_a_text_are_spaces():
    texts = ["first line\nsame report", "", "second\rreport", "x"]
    out = ptb_tokenize(texts, backend="python")
    assert out == ["first line same report", "", "second report", "x"]
    if ptb_jar_path() is not None:
        assert ptb_tokenize(texts, backend="jar") == out


def test_ptb_bad_input_and_backend_named():
    with pytest.raises(TypeError, match="text 1"):
        ptb_tokenize(["a", None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="backend"):
        ptb_tokenize(["a"], backend="perl")
    assert ptb_tokenize([]) == []


def test_jar_backend_without_java_is_an_error(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Java"):
        ptb_tokenize(["a"], backend="jar")


def test_r2gen_clean_equals_r2gens_code_on_the_generated_corpus():
    fx = _fixture("report_pipelines.json.gz")
    data = report_corpus(2000, 2000, seed=0)
    assert _digest(data["train"] + data["generated"] + data["references"]) == fx["inputs_sha256"]
    for dataset in ("iu_xray", "mimic_cxr"):
        part = fx["r2gen"][dataset]
        assert [r2gen_clean(r, dataset=dataset) for r in data["references"]] == part["clean_references"]
        assert [r2gen_clean(g, dataset=dataset) for g in data["generated"]] == part["clean_generated"]


def test_r2gen_clean_details():
    # numbered lists go, '..' becomes '.', the ':-[' character range removes '<', '=', '>' and '@'
    assert r2gen_clean("1. Heart normal.. 2. Lungs: clear <5 mm> @x") == "heart normal . lungs clear 5 mm x ."
    assert r2gen_clean("") == " ."
    with pytest.raises(ValueError, match="dataset"):
        r2gen_clean("a", dataset="chexpert")


def test_tokenize_texts_by_name():
    assert tokenize_texts(["The  Lungs, clear."], "none") == ["The Lungs, clear."]
    assert tokenize_texts(["The  Lungs, clear."], "simple") == ["the lungs clear"]
    assert tokenize_texts(["The Lungs, clear."], "r2gen") == ["the lungs clear ."]
    with pytest.raises(ValueError, match="unknown tokenizer 'bpe'"):
        tokenize_texts(["a"], "bpe")
