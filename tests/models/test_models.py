import pytest
import torch

from medimg_bench.models.base import load_checkpoint
from medimg_bench.registry import MODELS, create_model
from medimg_bench.sample import collate

# the smallest configuration of every registered model; a new model must add one here
TINY = {
    "timm": dict(model_name="resnet10t", num_classes=3, in_channels=1),
    "monai_unet": dict(num_classes=3, channels=(4, 8), strides=(2,), num_res_units=0),
    "monai_net": dict(net="SegResNet", num_classes=3, spatial_dims=3, init_filters=8, blocks_down=(1, 1), blocks_up=(1,), divisor=2),
    "clip": dict(classes=["a", "b", "c"], model_cfg={  # a tiny random open_clip CLIP (zero-shot)
        "embed_dim": 16, "vision_cfg": {"layers": 1, "width": 32, "patch_size": 8, "image_size": 32, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1}}),
    # a MONAI bundle folder written into the test's tmp_path (configs/inference.json + models/model.pt)
    "monai_bundle": lambda tmp: dict(bundle=str(_tiny_bundle(tmp)), num_classes=3, in_channels=1),
}


def _tiny_bundle(tmp):
    from tests.models.test_monai_bundle import NET, make_bundle

    return make_bundle(tmp / "bundle", {**NET, "out_channels": 3}, out_channels=3)


def _batch(model, b=2):
    if model.task == "classification":
        return collate([{"id": f"s{i}", "image": torch.rand(1, 32, 32)} for i in range(b)])
    return collate([{"id": f"s{i}", "image": torch.rand(1, 12, 10, 9)} for i in range(b)])


# generative adapters answer prompts, not batches (tests/models/vlm covers every one of them);
# `predictions` reads files, not a network (tests/models/test_predictions.py)
@pytest.mark.parametrize("name", [n for n in MODELS.list()
                                  if not {"generative", "predictions"} & set(MODELS.entry(n).tags)])
def test_every_registered_model_predicts(name, tmp_path):
    assert name in TINY, f"add a tiny configuration for model {name!r} to TINY"
    options = TINY[name](tmp_path) if callable(TINY[name]) else TINY[name]
    model = create_model(name, **options).eval()
    batch = _batch(model)
    with torch.inference_mode():
        out = model.predict(batch)
    if model.task == "classification":
        assert out["probs"].shape == (2, 3) and out["logits"].shape == (2, 3)
        assert ((out["probs"] >= 0) & (out["probs"] <= 1)).all()
    else:  # odd sizes are padded to the network's divisor and cropped back
        assert "probs" not in out  # labels come from the logits; probabilities only on request
        assert out["labels"].shape == (2, 12, 10, 9) and out["labels"].dtype == torch.int64
        model.return_probs = True
        with torch.inference_mode():
            out_p = model.predict(batch)
        assert out_p["probs"].shape == (2, 3, 12, 10, 9)
        assert torch.allclose(out_p["probs"].sum(1), torch.ones(2, 12, 10, 9), atol=1e-5)
        assert torch.equal(out_p["labels"], out["labels"])


def test_sliding_window_matches_shapes():
    model = create_model("monai_unet", num_classes=2, channels=(4, 8), strides=(2,), roi_size=(8, 8, 8)).eval()
    with torch.inference_mode():
        out = model.predict(collate([{"id": "a", "image": torch.rand(1, 20, 17, 9)}]))
    assert out["labels"].shape == (1, 20, 17, 9)


def test_checkpoints_load_safely(tmp_path):
    from safetensors.torch import save_file

    src = create_model("timm", **TINY["timm"])
    torch.save(src.module.state_dict(), tmp_path / "w.pt")
    save_file(src.module.state_dict(), str(tmp_path / "w.safetensors"))
    for f in ("w.pt", "w.safetensors"):
        dst = create_model("timm", **TINY["timm"], checkpoint=tmp_path / f)
        for a, b in zip(src.module.state_dict().values(), dst.module.state_dict().values()):
            assert torch.equal(a, b)
    with pytest.raises(ValueError, match="does not match"):
        load_checkpoint(create_model("timm", model_name="resnet10t", num_classes=5, in_channels=1).module, tmp_path / "w.pt")
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        create_model("timm", **TINY["timm"], checkpoint=tmp_path / "nope.pt")


def test_mixed_size_batch_gives_clear_error():
    model = create_model("timm", **TINY["timm"])
    batch = collate([{"id": "a", "image": torch.rand(1, 32, 32)}, {"id": "b", "image": torch.rand(1, 16, 16)}])
    with pytest.raises(ValueError, match="different sizes"):
        model.predict(batch)


def test_fingerprint_follows_architecture_options_and_weights(tmp_path):
    torch.manual_seed(0)
    a = create_model("timm", **TINY["timm"])
    torch.manual_seed(0)
    b = create_model("timm", **TINY["timm"])
    assert a.fingerprint() == b.fingerprint()
    torch.manual_seed(1)
    c = create_model("timm", **TINY["timm"])
    assert c.fingerprint()["weights_sha256"] != a.fingerprint()["weights_sha256"]
    assert create_model("timm", **TINY["timm"], multilabel=False).fingerprint()["options"] == {"multilabel": False}
    # the same weights from a file (either format) give the same fingerprint
    from safetensors.torch import save_file

    torch.save(a.module.state_dict(), tmp_path / "w.pt")
    save_file(a.module.state_dict(), str(tmp_path / "w.safetensors"))
    for f in ("w.pt", "w.safetensors"):
        assert create_model("timm", **TINY["timm"], checkpoint=tmp_path / f).fingerprint() == a.fingerprint()
    u = create_model("monai_unet", **TINY["monai_unet"]).fingerprint()
    assert u["config"]["channels"] == [4, 8] and u["options"]["roi_size"] is None


def test_checkpoint_errors_name_the_file_and_the_reason(tmp_path):
    module = create_model("timm", **TINY["timm"]).module
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.pt.*empty \(0 bytes\)"):
        load_checkpoint(module, tmp_path / "empty.pt")
    torch.save(module.state_dict(), tmp_path / "pickled.safetensors")
    with pytest.raises(ValueError, match=r"pickled\.safetensors.*pickle-based torch\.save file"):
        load_checkpoint(module, tmp_path / "pickled.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(ValueError, match=r"junk\.safetensors.*not a valid safetensors file"):
        load_checkpoint(module, tmp_path / "junk.safetensors")
    (tmp_path / "junk.pt").write_bytes(b"garbage bytes")
    with pytest.raises(ValueError, match=r"junk\.pt.*could not be loaded safely.*weights_only"):
        load_checkpoint(module, tmp_path / "junk.pt")


def test_timm_small_input_stem_is_the_cifar_resnet():
    """stem='small_input': the CIFAR-style ResNet-18 MedMNIST benchmarks 28x28 images with (3x3
    stride-1 first convolution, no max-pool): 11,173,962 parameters for 3 channels / 10 classes,
    28x28 features after the first stage, 4x4 after the last."""
    from medimg_bench.models.classification import timm_classifier

    a = timm_classifier(model_name="resnet18", num_classes=10, in_channels=3, multilabel=False, stem="small_input")
    net = a.module
    assert sum(p.numel() for p in net.parameters()) == 11_173_962
    x = torch.zeros(2, 3, 28, 28)
    assert net.layer1(net.maxpool(net.act1(net.bn1(net.conv1(x))))).shape[-2:] == (28, 28)
    assert net.forward_features(x).shape == (2, 512, 4, 4)
    assert a.config["stem"] == "small_input"
    with pytest.raises(ValueError, match="stem must be"):
        timm_classifier(model_name="resnet18", num_classes=2, stem="tiny")
