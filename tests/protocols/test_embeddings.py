"""Embedding cache: reused when the key matches, refused with the reason and recomputed when
the model or the preprocessing differs; written atomically."""

import logging

import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.models.encoders import Encoder, build_encoder
from medimg_bench.protocols.embeddings import cached_embeddings, extract_embeddings


@pytest.fixture(scope="module")
def tiny_cxr(synthetic_root):
    return create("synthetic_cxr", cache_dir=synthetic_root / "emb", split="test", n=16, size=32)


def _encoder(seed=0, size=None):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU())
    return Encoder(net, kind="test", config={"net": "conv4"}, preprocess={"channels": 1, "size": size})


def test_cache_reused_then_refused_for_other_model_and_preprocessing(tiny_cxr, tmp_path, caplog):
    kw = {"split": "test", "model_name": "conv4", "cache_dir": tmp_path, "batch_size": 5}
    first = cached_embeddings(_encoder(), tiny_cxr, **kw)
    assert first.source == "computed" and first.refused is None and first.x.shape == (len(tiny_cxr), 4)
    again = cached_embeddings(_encoder(), tiny_cxr, **kw)
    assert again.source == "cache" and torch.equal(again.x, first.x) and again.ids == first.ids
    assert again.patients == list(tiny_cxr.manifest["patient_id"])
    with caplog.at_level(logging.WARNING):
        other = cached_embeddings(_encoder(seed=1), tiny_cxr, **kw)
    assert other.source == "computed" and "encoder.weights_sha256: saved" in other.refused
    assert "recomputing" in caplog.text
    resized = cached_embeddings(_encoder(seed=1, size=16), tiny_cxr, **kw)
    assert "encoder.preprocess.size: saved None, now 16" in resized.refused
    assert not list(tmp_path.glob(".*.tmp*"))  # no temporary file left behind
    (tmp_path / "conv4__synthetic_cxr__test.safetensors").write_bytes(b"garbage")
    assert "unreadable" in cached_embeddings(_encoder(seed=1, size=16), tiny_cxr, **kw).refused


def test_cache_refused_for_other_dataset_content(tiny_cxr, tmp_path):
    kw = {"split": "test", "model_name": "conv4", "cache_dir": tmp_path}
    cached_embeddings(_encoder(), tiny_cxr, **kw)
    fewer = tiny_cxr.subset(tiny_cxr.ids[:5])
    out = cached_embeddings(_encoder(), fewer, **kw)
    assert "dataset_fingerprint" in out.refused and len(out.ids) == 5


def test_extraction_equals_a_bare_forward(tiny_cxr):
    enc = build_encoder({"name": "timm", "options": {"model_name": "resnet10t"}}, in_channels=1)
    emb = extract_embeddings(enc, tiny_cxr, batch_size=4)
    images = torch.stack([tiny_cxr[i]["image"] for i in range(len(tiny_cxr))])
    with torch.inference_mode():
        ref = enc.module(images)
    assert torch.allclose(emb.x, ref, atol=1e-5)


def test_missing_local_weights_name_path_and_option(tmp_path):
    missing = tmp_path / "nope.safetensors"
    with pytest.raises(FileNotFoundError, match=r"model.options.checkpoint=.*nope.safetensors"):
        build_encoder({"name": "timm", "options": {"model_name": "resnet10t", "checkpoint": str(missing)}})
    with pytest.raises(FileNotFoundError, match=r"model.options.path=.*nope"):
        build_encoder({"name": "hf_vision", "options": {"path": str(tmp_path / "nope")}})


def test_monai_and_local_hf_vision_encoders(tmp_path):
    monai = build_encoder({"name": "monai_encoder", "options": {
        "network": "DenseNet", "kwargs": {"out_channels": 2, "init_features": 4, "growth_rate": 4,
                                          "block_config": [1, 1], "bn_size": 2}}}, in_channels=1)
    assert monai.encode(torch.rand(2, 1, 32, 32)).shape[0] == 2
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                 image_size=32, patch_size=8, num_channels=3)
    torch.manual_seed(0)
    transformers.ViTModel(cfg).save_pretrained(tmp_path / "vit")
    hf = build_encoder({"name": "hf_vision", "options": {"path": str(tmp_path / "vit"), "image_size": 32}})
    out = hf.encode(torch.rand(3, 1, 40, 40))  # grey → RGB, resized to 32
    assert out.shape == (3, 16) and torch.isfinite(out).all()
    assert hf.identity()["preprocess"]["size"] == 32
