"""Text-metric models by hub id through the loopback Hub (tests/models/hub_server.py): BERTScore
``model_path=<id>`` and CheXbert ``chexbert_bert_path=<id>`` +
``chexbert_checkpoint=hf://<id>[@rev]/chexbert.pth`` give the numbers the same model gives from a
local folder, online and then with ``HF_HUB_OFFLINE=1``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models.hub_server import HubServer, run_client

pytest.importorskip("huggingface_hub")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

WORDS = "no pleural effusion small left cardiomegaly mild edema lungs are clear acute process".split()


def _tiny_bert(path: Path) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizer

    path.mkdir(parents=True)
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizer(str(path / "vocab.txt"), model_max_length=64).save_pretrained(str(path))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    bert = BertModel(cfg)
    bert.save_pretrained(str(path))
    state = {f"module.bert.{k}": v for k, v in bert.state_dict().items()}
    for i in range(14):
        head = torch.nn.Linear(16, 4 if i < 13 else 2)
        state[f"module.linear_heads.{i}.weight"] = head.weight.detach()
        state[f"module.linear_heads.{i}.bias"] = head.bias.detach()
    torch.save({"model_state_dict": state}, path / "chexbert.pth")
    return path


CLIENT = """
import os
from medimg_bench.metrics.text.bertscore import bertscore
from medimg_bench.metrics.text.chexbert import chexbert_label_reports

gen = ["the lungs are clear", "small left pleural effusion", "mild edema"]
ref = ["lungs are clear no acute process", "small pleural effusion", "cardiomegaly"]
local = os.environ["LOCAL"]

def both():
    hub = bertscore(gen, ref, model_path="org/tiny-bert")["f1"].tolist()
    loc = bertscore(gen, ref, model_path=local)["f1"].tolist()
    lab_hub = chexbert_label_reports(gen, checkpoint="hf://org/tiny-bert@v1/chexbert.pth", bert_path="org/tiny-bert")
    lab_loc = chexbert_label_reports(gen, checkpoint=local + "/chexbert.pth", bert_path=local)
    return {"bs_hub": hub, "bs_local": loc, "labels_equal": lab_hub.equals(lab_loc)}

mark("online")
out["online"] = both()
os.environ["HF_HUB_OFFLINE"] = "1"
mark("offline")
out["offline"] = both()
try:
    chexbert_label_reports(gen, checkpoint="hf://org/tiny-bert@v9/chexbert.pth", bert_path=local)
except OSError as exc:
    out["missing"] = str(exc)
"""


def test_bertscore_and_chexbert_by_hub_id(tmp_path):
    folder = _tiny_bert(tmp_path / "bert")
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with HubServer() as hub:
        hub.add_commit("org/tiny-bert", files, ref="v1")
        hub.repos["org/tiny-bert"].refs["main"] = hub.repos["org/tiny-bert"].refs["v1"]
        out = run_client(CLIENT, hub.endpoint, tmp_path, LOCAL=str(folder))
        phases = hub.phases()
    for phase in ("online", "offline"):
        assert out[phase]["bs_hub"] == out[phase]["bs_local"]
        assert out[phase]["labels_equal"]
    assert phases["offline"] == []
    assert "org/tiny-bert" in out["missing"] and "'v9'" in out["missing"]
