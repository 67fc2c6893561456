"""ratescore against the ratescore 0.6.0 package's own compute_score (fixtures from
tools/ratescore_reference.py: its scoring run on 300 generated entity sets, long and short
affinity matrices)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from medimg_bench.metrics.text.ratescore import (
    AFFINITY,
    RaTEScoreMetric,
    _directional,
    _matrix,
    decode_rate_spans,
    load_biolord_encoder,
    ratescore_pair,
)
from medimg_bench.registry import create_metric, list_metrics

DATA = json.loads((Path(__file__).parent / "data/ratescore_reference.json").read_text())


def _emb(rows: list) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32).reshape(len(rows), -1) if rows else torch.empty(0, 8)


def test_matrices_are_the_packages() -> None:
    assert AFFINITY == DATA["matrices"]


#: float32's unit roundoff: the entity embeddings, their normalisation and similarities are float32
F32_EPS = 2.0 ** -24


def _float32_tolerance(ref: torch.Tensor, hyp: torch.Tensor, ref_types: list, hyp_types: list, matrix: str) -> float:
    """How far a correct float32 computation may land from the package's on another CPU.

    A cosine similarity of two normalised d-dimensional float32 vectors is a sum of d products
    whose order the CPU's vector width decides (torch's AVX2, AVX-512 and portable kernels gave
    -0.10933237620913797, -0.10933233393227275, ...): each is off by up to about (d + 2) * eps
    (d products, two normalisations), and so are the weighted means p and r built from them.
    The score 2pr / (p + r) moves by 2 (p^2 + r^2) / (p + r)^2 times that: a harmonic mean of two
    near-zero means (p + r close to 0) magnifies it, which a fixed 1e-12 (float64's precision on
    float32 work) or even a relative 1e-6 does not allow for."""
    w = _matrix(matrix)
    p = _directional(ref, hyp, ref_types, hyp_types, w)
    r = _directional(hyp, ref, hyp_types, ref_types, w)
    delta = (ref.shape[1] + 2) * F32_EPS
    return 2 * (p * p + r * r) * delta / (p + r) ** 2 + 1e-12


@pytest.mark.fixture_compare
@pytest.mark.parametrize("matrix", ["long", "short"])
def test_scores_equal_the_package(matrix: str) -> None:
    for i, c in enumerate(DATA["cases"]):
        ref, hyp = _emb(c["ref_emb"]), _emb(c["hyp_emb"])
        got = ratescore_pair(ref, hyp, c["ref_types"], c["hyp_types"], affinity=matrix)
        if len(ref) == 0 or len(hyp) == 0:  # no similarity computed: the package's 0.5 exactly
            assert got == c[f"score_{matrix}"] == 0.5, i
            continue
        tol = _float32_tolerance(ref, hyp, c["ref_types"], c["hyp_types"], matrix)
        assert abs(got - c[f"score_{matrix}"]) <= tol, (i, got, c[f"score_{matrix}"], tol)


def test_stateful_with_scripted_ner_and_encoder() -> None:
    assert "ratescore" in list_metrics()
    vocab = {"effusion": [1.0, 0.0], "pleural effusion": [0.9, 0.1], "lung": [0.0, 1.0], "no effusion": [1.0, 0.05]}

    def ner(texts):
        return [[(w, "ANATOMY" if w == "lung" else ("NON-ABNORMALITY" if w.startswith("no ") else "ABNORMALITY"))
                 for w in t.split(",") if w] for t in texts]

    def encode(words):
        return torch.tensor([vocab[w] for w in words])

    m = create_metric("ratescore", ner=ner, encode=encode)
    m.update(["pleural effusion,lung", "", "no effusion"], ["effusion,lung", "lung", "effusion"])
    vals = m.values()[1][:, 0].tolist()
    assert vals[1] == 0.5  # a side without entities
    assert 0.9 < vals[0] < 1.0
    # the negated type costs the neg weight: same direction, score × neg_weight
    assert vals[2] == pytest.approx(AFFINITY["long"]["neg_weight"] * float(torch.nn.functional.cosine_similarity(
        torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.05]), dim=0)), rel=1e-5)


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="encoder_model"):
        load_biolord_encoder(tmp_path / "absent")
    with pytest.raises(RuntimeError, match="ner="):
        RaTEScoreMetric().update(["a"], ["b"])
    with pytest.raises(ValueError, match="affinity"):
        RaTEScoreMetric(affinity="medium")
    with pytest.raises(ValueError, match="unknown entity type"):
        ratescore_pair(torch.ones(1, 2), torch.ones(1, 2), ["TUMOUR"], ["ANATOMY"])


def test_ner_span_decoding_equals_post_process() -> None:
    for i, c in enumerate(DATA["spans"]):
        got = [[" ".join(c["tokens"][a:b + 1]), t] for a, b, t in decode_rate_spans(c["tokens"], c["labels"])]
        assert got == c["entities"], i


def _tiny_models(tmp_path: Path) -> tuple[Path, Path]:
    from transformers import BertConfig, BertForTokenClassification, BertModel, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "no", "pleural", "effusion", "lung", "clear", ".", "left"]
    labels = ["O", *(f"{p}-{t}" for p in "BI" for t in ("ABNORMALITY", "NON-ABNORMALITY", "DISEASE",
                                                          "NON-DISEASE", "ANATOMY"))]
    cfg = dict(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    ner_dir, enc_dir = tmp_path / "ner", tmp_path / "enc"
    for d in (ner_dir, enc_dir):
        d.mkdir()
        (d / "vocab.txt").write_text("\n".join(vocab))
        BertTokenizer(str(d / "vocab.txt")).save_pretrained(str(d))
    BertForTokenClassification(BertConfig(**cfg, num_labels=len(labels), id2label=dict(enumerate(labels)),
                                          label2id={v: k for k, v in enumerate(labels)})).save_pretrained(str(ner_dir))
    BertModel(BertConfig(**cfg)).save_pretrained(str(enc_dir))
    return ner_dir, enc_dir


def test_local_models_end_to_end(tmp_path: Path) -> None:
    from medimg_bench.metrics.text.ratescore import RATESCORE_TYPES, load_rate_ner

    ner_dir, enc_dir = _tiny_models(tmp_path)
    ner = load_rate_ner(ner_dir)
    ents = ner(["left pleural effusion. lung clear.", "no effusion"])
    assert len(ents) == 2 and all(t in RATESCORE_TYPES for e in ents for _, t in e)
    m = RaTEScoreMetric(ner_model=str(ner_dir), encoder_model=str(enc_dir))
    m.update(["left pleural effusion. lung clear.", "no effusion"], ["left pleural effusion. lung clear.", "clear"])
    vals = m.values()[1][:, 0]
    assert vals.shape == (2,) and torch.isfinite(vals).all()
    assert ents[0]  # the seeded tiny model finds entities in the first report
    # a report against itself: every entity finds itself (cosine 1, same type)
    assert vals[0].item() == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(FileNotFoundError, match="ner_model"):
        load_rate_ner(tmp_path / "absent")
