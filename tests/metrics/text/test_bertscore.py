"""BERTScore plumbing with a tiny random BERT built offline, equal to the bert-score package
(idf off, no rescaling) on the same model and layer; missing weights name the option."""

from __future__ import annotations

import numpy as np
import pytest

from medimg_bench.metrics.text.bertscore import bertscore
from tests.metrics.text._tiny_bert import write_tiny_bert


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


GEN = ["the lungs are clear", "small left pleural effusion", "heart size normal mild edema", ""]
REF = ["lungs are clear no acute process", "small pleural effusion", "mild edema", "no acute process"]


def _reference(tiny_bert, layer):
    """bert-score's own greedy matching (``bert_score.utils.greedy_cos_idf``, idf off: special
    tokens weigh 0) on hidden states of the same model. The package's encoding helpers do not
    run under transformers 5, so the embeddings are made here the way it makes them."""
    import torch
    from bert_score.utils import greedy_cos_idf
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bert))
    model = AutoModel.from_pretrained(str(tiny_bert)).eval()

    def enc(texts):
        e = tok([t.strip() for t in texts], padding=True, return_tensors="pt")
        with torch.no_grad():
            h = model(**e, output_hidden_states=True).hidden_states[layer]
        idf = e["attention_mask"].float().clone()
        idf[(e["input_ids"] == tok.cls_token_id) | (e["input_ids"] == tok.sep_token_id)] = 0
        return h, e["attention_mask"], idf

    out = []
    for g, r in zip(GEN, REF):
        hh, hm, hi = enc([g])
        rh, rm, ri = enc([r])
        p, rr, f = greedy_cos_idf(rh, rm, ri, hh, hm, hi)
        out.append((float(p), float(rr), float(torch.nan_to_num(f))))
    return np.array(out)


def test_equal_to_bert_score_greedy_matching(tiny_bert):
    pytest.importorskip("bert_score")
    ours = bertscore(GEN, REF, model_path=tiny_bert, num_layers=2, batch_size=3)
    ref = _reference(tiny_bert, 2)
    np.testing.assert_allclose(ours["precision"], ref[:, 0], atol=1e-5)
    np.testing.assert_allclose(ours["recall"], ref[:, 1], atol=1e-5)
    np.testing.assert_allclose(ours["f1"], ref[:, 2], atol=1e-5)
    assert ours["f1"][3] == 0.0  # empty candidate
    one = bertscore(GEN, REF, model_path=tiny_bert, num_layers=1)
    assert not np.allclose(one["f1"][:3], ours["f1"][:3])  # the layer matters


def test_missing_weights_name_the_option(tmp_path):
    with pytest.raises(ValueError, match="model_path"):
        bertscore(["a"], ["a"], model_path=None)
    with pytest.raises(FileNotFoundError, match="option `model_path`"):
        bertscore(["a"], ["a"], model_path=tmp_path / "nothing")
