"""CLIP zero-shot with a tiny randomly initialised open_clip model (offline)."""

import pytest
import torch

from medimg_bench.datasets import create
from medimg_bench.engine.runner import evaluate
from medimg_bench.models.clip import load_templates
from medimg_bench.registry import create_model, create_task

TINY = {"embed_dim": 16,
        "vision_cfg": {"layers": 1, "width": 32, "patch_size": 8, "image_size": 32, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}


def _tiny(**kw):
    torch.manual_seed(0)
    return create_model("clip", model_cfg=TINY, **kw)


def test_class_weights_average_the_templates_as_open_clip_does():
    model = _tiny(classes=["cat", "dog"], templates=["a {c}.", "the {c} here."])
    w = model.class_weights()
    import open_clip

    tok = open_clip.SimpleTokenizer(context_length=16)
    with torch.no_grad():
        e = model.module.encode_text(tok(["a dog.", "the dog here."])).float()
    e = torch.nn.functional.normalize(e, dim=-1).mean(0)
    assert torch.allclose(w[:, 1], e / e.norm(), atol=1e-6)


def test_zero_shot_end_to_end_with_the_classification_task(synthetic_root):
    data = create("synthetic_cxr", cache_dir=synthetic_root / "clip", split="test", n=16, size=32)
    model = _tiny(classes=list(data.classes), multilabel=True)
    res = evaluate(model, data, task=create_task("classification"), batch_size=8, progress=False, n_resamples=10)
    assert res.summary["n_failed"] == 0
    assert 0.0 <= res.summary["metrics"]["auroc"]["mean"]["value"] <= 1.0
    out = model.predict({"image": torch.rand(3, 1, 40, 40)})
    assert out["probs"].shape == (3, 3) and ((out["probs"] > 0) & (out["probs"] < 1)).all()
    multi = _tiny(classes=["a", "b", "c", "d"])
    p = multi.predict({"image": torch.rand(2, 3, 32, 32)})["probs"]
    assert torch.allclose(p.sum(1), torch.ones(2), atol=1e-5)


def test_templates_and_missing_weights_errors(tmp_path):
    t = load_templates("cxr")
    assert t["negative"] and all("{c}" in x for x in t["positive"])
    with pytest.raises(ValueError, match="placeholder"):
        load_templates(["a photo"])
    with pytest.raises(FileNotFoundError, match=r"model.options.pretrained=.*missing.bin"):
        create_model("clip", model_cfg=TINY, pretrained=str(tmp_path / "missing.bin"))
    with pytest.raises(ValueError, match="negative templates"):
        _tiny(templates=["a {c}"], multilabel=True)


def test_local_weights_are_loaded(tmp_path):
    from safetensors.torch import save_file

    a = _tiny(classes=["x", "y"])
    state = {k: v.contiguous() for k, v in a.module.state_dict().items()}
    save_file(state, str(tmp_path / "w.safetensors"))
    torch.manual_seed(123)
    b = create_model("clip", model_cfg=TINY, pretrained=str(tmp_path / "w.safetensors"), classes=["x", "y"])
    assert a.fingerprint()["weights_sha256"] == b.fingerprint()["weights_sha256"]
