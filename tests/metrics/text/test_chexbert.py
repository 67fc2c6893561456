"""CheXbert plumbing with a tiny random BERT and heads saved in CheXbert's checkpoint format;
missing weights are errors naming the option."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from medimg_bench.metrics.text.chexbert import CHEXBERT_ORDER, chexbert_label_reports
from medimg_bench.metrics.text.chexpert_labeler import CHEXPERT_OBSERVATIONS
from tests.metrics.text._tiny_bert import write_tiny_chexbert


@pytest.fixture(scope="module")
def tiny_chexbert(tmp_path_factory):
    words = "no pleural effusion small left cardiomegaly mild edema lungs are clear".split()
    return write_tiny_chexbert(tmp_path_factory.mktemp("chexbert"), words, seed=0)


def test_labels_follow_the_heads_argmax(tiny_chexbert):
    from transformers import AutoTokenizer

    path, bert, heads = tiny_chexbert
    texts = ["no pleural effusion", "mild edema small left cardiomegaly", ""]
    df = chexbert_label_reports(texts, checkpoint=path / "chexbert.pth", bert_path=path, batch_size=2)
    assert list(df.columns) == list(CHEXPERT_OBSERVATIONS) and len(df) == 3
    tok = AutoTokenizer.from_pretrained(str(path))
    bert.eval()
    mapping = {0: np.nan, 1: 1.0, 2: 0.0, 3: -1.0}
    for i, t in enumerate(texts):
        enc = tok([t], return_tensors="pt")
        with torch.no_grad():
            cls = bert(**enc).last_hidden_state[:, 0, :]
        for j, obs in enumerate(CHEXBERT_ORDER):
            c = int(heads[j](cls).argmax(1))
            want = (1.0 if c == 1 else np.nan) if obs == "No Finding" else mapping[c]
            got = df[obs].iloc[i]
            assert (np.isnan(want) and np.isnan(got)) or got == want, (t, obs)


def test_missing_weights_name_the_option(tmp_path):
    with pytest.raises(ValueError, match="chexbert_checkpoint"):
        chexbert_label_reports(["x"], checkpoint=None, bert_path=tmp_path)
    with pytest.raises(FileNotFoundError, match="option `chexbert_bert_path`"):
        (tmp_path / "c.pth").write_bytes(b"")
        chexbert_label_reports(["x"], checkpoint=tmp_path / "c.pth", bert_path=tmp_path / "nope")
