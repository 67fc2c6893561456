"""``monai_bundle``: a bundle's network_def (literal arguments only) and weights, from a folder;
the Hub path (``MONAI/<name>``) is exercised in tests/models/test_hub_models.py."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("monai")

NET = {"_target_": "UNet", "spatial_dims": 3, "in_channels": 1, "out_channels": 2, "channels": [4, 8],
       "strides": [2], "num_res_units": 0}


def make_bundle(root, net=NET, *, seed=0, out_channels=2):
    """A bundle folder whose weights are a UNet of NET's shape with ``out_channels`` outputs."""
    from monai.networks.nets import UNet

    (root / "configs").mkdir(parents=True)
    (root / "models").mkdir()
    (root / "configs" / "inference.json").write_text(json.dumps({"network_def": net, "other": "$print(1)"}))
    torch.manual_seed(seed)
    kwargs = {k: v for k, v in NET.items() if k != "_target_"} | {"out_channels": out_channels}
    torch.save(UNet(**kwargs).state_dict(), root / "models" / "model.pt")
    return root


def test_bundle_from_folder_predicts_and_records_weights(tmp_path):
    from medimg_bench.registry import create_model

    folder = make_bundle(tmp_path / "b")
    m = create_model("monai_bundle", bundle=str(folder), num_classes=2, in_channels=1)
    out = m.predict({"image": torch.rand(1, 1, 20, 24, 18)})
    assert out["labels"].shape == (1, 20, 24, 18)
    src = m.weight_sources[0]
    assert src["source"] == "local" and any(k.endswith("models/model.pt") for k in src["files"])
    assert m.config["net"] == "UNet" and m.config["out_channels"] == 2
    # the weights are the bundle's: another seed gives another fingerprint
    other = create_model("monai_bundle", bundle=str(make_bundle(tmp_path / "c", seed=1)), num_classes=2)
    assert other.fingerprint()["weights_sha256"] != m.fingerprint()["weights_sha256"]


def test_bundle_refuses_expressions_and_mismatches(tmp_path):
    from medimg_bench.registry import create_model

    bad = make_bundle(tmp_path / "expr", {**NET, "channels": "$[4, 8]"})
    with pytest.raises(ValueError, match="expression or reference"):
        create_model("monai_bundle", bundle=str(bad))
    target = make_bundle(tmp_path / "target", {**NET, "_target_": "os.system"})
    with pytest.raises(ValueError, match="not a class of monai.networks.nets"):
        create_model("monai_bundle", bundle=str(target))
    good = make_bundle(tmp_path / "good")
    with pytest.raises(ValueError, match="2 output channels but the dataset has 3"):
        create_model("monai_bundle", bundle=str(good), num_classes=3)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        create_model("monai_bundle", bundle=str(tmp_path / "missing"))
