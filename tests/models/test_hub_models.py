"""Adapters by hub name through the loopback Hub (tests/models/hub_server.py): timm
``hf-hub:`` and ``pretrained=<id>`` with revision pinning, open_clip ``hf-hub:``, ``hf_vlm``
``path=<org>/<name>`` online then offline, a MONAI bundle by name, ``hf_vision`` by id; each records the resolved commit and the SHA-256 of
its weight files, and two revisions give two fingerprints (a resume across them is refused).
Tiny models are built here and served; one client process loads them all."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.models.hub_server import HubServer, run_client

pytest.importorskip("huggingface_hub")
timm = pytest.importorskip("timm")
open_clip = pytest.importorskip("open_clip")
torch = pytest.importorskip("torch")

TINY_CLIP = {"embed_dim": 16,
             "vision_cfg": {"layers": 1, "width": 32, "patch_size": 8, "image_size": 32, "head_width": 16},
             "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _timm_repo(tmp: Path, seed: int) -> dict[str, bytes]:
    from timm.models import save_for_hf

    torch.manual_seed(seed)
    model = timm.create_model("test_resnet", num_classes=3)
    out = tmp / f"timm{seed}"
    save_for_hf(model, str(out), safe_serialization=True)
    return _files(out)


def _clip_repo(tmp: Path) -> dict[str, bytes]:
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CLIP)
    out = tmp / "clip"
    out.mkdir()
    cfg = {"model_cfg": TINY_CLIP, "preprocess_cfg": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}
    (out / "open_clip_config.json").write_text(json.dumps(cfg))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "open_clip_model.safetensors"))
    return _files(out)


def _vlm_repo(tmp: Path) -> dict[str, bytes]:
    from medimg_bench.models.vlm.tiny import build_tiny_vlm

    return _files(build_tiny_vlm(tmp / "vlm"))


def _bundle_repo(tmp: Path) -> dict[str, bytes]:
    from tests.models.test_monai_bundle import make_bundle

    return _files(make_bundle(tmp / "bundle"))


def _vit_repo(tmp: Path) -> dict[str, bytes]:
    from transformers import ViTConfig, ViTImageProcessor, ViTModel

    torch.manual_seed(0)
    out = tmp / "vit"
    ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                       image_size=32, patch_size=8)).save_pretrained(out)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(out)
    return _files(out)


CLIENT = """
import os
from medimg_bench.registry import create_model
from medimg_bench.engine.runner import model_fingerprint
from medimg_bench.models.encoders import build_encoder
from medimg_bench.hub import HubError

mark("timm_hf_hub")
a = create_model("timm", model_name="hf-hub:org/tiny-timm", num_classes=3, in_channels=3)
out["timm_main"] = {"sources": a.weight_sources, "fp": model_fingerprint(a)}
mark("timm_pinned")
b = create_model("timm", model_name="test_resnet", pretrained="org/tiny-timm", revision=os.environ["T1"],
                 num_classes=5, in_channels=1)
out["timm_pinned"] = {"sources": b.weight_sources, "fp": model_fingerprint(b)}
enc = build_encoder({"name": "timm", "options": {"model_name": "hf-hub:org/tiny-timm", "offline": True}},
                    in_channels=3)
out["timm_encoder"] = enc.identity()["config"]
from medimg_bench.engine.checkpoint import key_differences
out["key_diff"] = key_differences({"model": out["timm_pinned"]["fp"]}, {"model": out["timm_main"]["fp"]})
mark("run")
from medimg_bench.runs.run import run
res = run(["dataset=synthetic_cxr", "dataset.options.n=8", "dataset.options.size=32",
           "model=timm_resnet18", "model.options.model_name=hf-hub:org/tiny-timm", "model.options.revision=v0",
           "progress=false", "bootstrap.n_resamples=10"], run_dir=os.environ["RUN_DIR"])
out["manifest"] = json.loads(open(os.path.join(os.environ["RUN_DIR"], "manifest.json")).read())
mark("clip")
c = create_model("clip", model_name="hf-hub:org/tiny-clip", classes=["a", "b"])
import torch
probs = c.predict({"image": torch.rand(2, 1, 40, 40)})["probs"]
out["clip"] = {"sources": c.weight_sources, "probs_sum": probs.sum(1).tolist(),
               "size": c.info["image_size"], "mean": c.info["mean"]}
mark("bundle")
m = create_model("monai_bundle", bundle="tiny_bundle", num_classes=2, in_channels=1)
labels = m.predict({"image": torch.rand(1, 1, 16, 16, 16)})["labels"]
out["bundle"] = {"sources": m.weight_sources, "shape": list(labels.shape), "hub": m.config["hub"]}
mark("vision")
e = build_encoder({"name": "hf_vision", "options": {"path": "org/tiny-vit"}}, in_channels=1)
out["vision"] = {"sources": e.weight_sources, "config": e.identity()["config"],
                 "shape": list(e.encode(torch.rand(2, 1, 40, 40)).shape), "size": e.preprocess["size"]}
mark("vlm")
v = create_model("hf_vlm", path="org/tiny-llava", max_new_tokens=3, cache=False)
out["vlm"] = {"sources": v.weight_sources, "identity": v.identity()}
mark("vlm_offline")
os.environ["HF_HUB_OFFLINE"] = "1"
w = create_model("hf_vlm", path="org/tiny-llava", max_new_tokens=3, cache=False)
out["vlm_offline"] = w.identity()
try:
    create_model("hf_vlm", path="org/absent-llava", cache=False)
except HubError as exc:
    out["vlm_absent"] = str(exc)
"""


def test_adapters_by_hub_name(tmp_path):
    t0 = _timm_repo(tmp_path, 0)
    t1 = _timm_repo(tmp_path, 1)
    with HubServer() as hub:
        c_t0 = hub.add_commit("org/tiny-timm", t0, ref="v0")
        c_t1 = hub.add_commit("org/tiny-timm", t1, ref="main")
        c_clip = hub.add_commit("org/tiny-clip", _clip_repo(tmp_path))
        c_bundle = hub.add_commit("MONAI/tiny_bundle", _bundle_repo(tmp_path), ref="0.1.0")
        hub.repos["MONAI/tiny_bundle"].refs["main"] = c_bundle
        c_vit = hub.add_commit("org/tiny-vit", _vit_repo(tmp_path))
        vlm = _vlm_repo(tmp_path)
        c_vlm = hub.add_commit("org/tiny-llava", vlm)
        out = run_client(CLIENT, hub.endpoint, tmp_path, T1=c_t0, RUN_DIR=str(tmp_path / "run"), timeout=600)
        phases = hub.phases()

    main_src = out["timm_main"]["sources"][0]
    assert main_src["repo_id"] == "org/tiny-timm" and main_src["commit"] == c_t1
    assert main_src["files"]["model.safetensors"] == hashlib.sha256(t1["model.safetensors"]).hexdigest()
    pinned = out["timm_pinned"]["sources"][0]
    assert pinned["commit"] == c_t0 and pinned["revision"] == c_t0
    assert pinned["files"]["model.safetensors"] == hashlib.sha256(t0["model.safetensors"]).hexdigest()
    # the weights loaded are the ones served: the state dict digests differ by revision, and the
    # resolved commit is part of the fingerprint a resume is checked against
    fa, fb = out["timm_main"]["fp"], out["timm_pinned"]["fp"]
    assert fa["weights_sha256"] != fb["weights_sha256"]
    assert fa["config"]["hub"] == [{"repo_id": "org/tiny-timm", "commit": c_t1}]
    assert fb["config"]["hub"] == [{"repo_id": "org/tiny-timm", "commit": c_t0}]
    assert out["timm_encoder"]["hub"] == [{"repo_id": "org/tiny-timm", "commit": c_t1}]
    # a resume under the other revision is refused, naming the field
    assert any(d.startswith("model.config.hub: saved") for d in out["key_diff"]), out["key_diff"]
    # a run by hub name: manifest.json keeps the id, the revision asked, the commit, every SHA-256
    weights = out["manifest"]["model_weights"]
    assert weights[0]["repo_id"] == "org/tiny-timm" and weights[0]["revision"] == "v0"
    assert weights[0]["commit"] == c_t0
    assert weights[0]["files"]["model.safetensors"] == hashlib.sha256(t0["model.safetensors"]).hexdigest()
    # open_clip hf-hub: config, preprocessing and weights from the repository
    assert out["clip"]["sources"][0]["commit"] == c_clip
    assert out["clip"]["size"] == 32 and out["clip"]["mean"] == [0.5, 0.5, 0.5]
    assert all(abs(s - 1) < 1e-5 for s in out["clip"]["probs_sum"])
    # a MONAI bundle by name: MONAI/<name> on the Hub, network and weights from the snapshot
    assert out["bundle"]["sources"][0]["repo_id"] == "MONAI/tiny_bundle"
    assert out["bundle"]["hub"] == [{"repo_id": "MONAI/tiny_bundle", "commit": c_bundle}]
    assert out["bundle"]["shape"] == [1, 16, 16, 16]
    # hf_vision by hub id: processor size, commit in the encoder identity (the embedding cache key)
    assert out["vision"]["config"] == {"path": "org/tiny-vit", "hub": [{"repo_id": "org/tiny-vit", "commit": c_vit}]}
    assert out["vision"]["shape"] == [2, 32] and out["vision"]["size"] == 32
    # hf_vlm by hub id: the commit in the identity, every file's SHA-256 in the weight sources
    src = out["vlm"]["sources"][0]
    assert src["commit"] == c_vlm and out["vlm"]["identity"]["commit"] == c_vlm
    assert src["files"] == {k: hashlib.sha256(v).hexdigest() for k, v in vlm.items()}
    # offline: the same model from the cache, and no request at all
    assert out["vlm_offline"] == out["vlm"]["identity"]
    assert phases["vlm_offline"] == []
    assert "org/absent-llava" in out["vlm_absent"] and "offline" in out["vlm_absent"]
