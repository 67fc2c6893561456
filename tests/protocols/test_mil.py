"""protocol=mil: eva's ABMIL head (equal to eva's own module, fixture), masking, training and
selection rules, and the protocol end to end on a CAMELYON16-layout folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from medimg_bench.protocols.mil import (
    ABMIL,
    Bags,
    MeanPoolMIL,
    MILSettings,
    predict_bags,
    top_attention_tiles,
    train_mil,
)

FIXTURE = Path(__file__).parent / "fixtures" / "eva_abmil.safetensors"
SHAPES = {"a": (24, 1, 16, 12, (16, 8)), "b": (20, 3, None, 10, (12,)), "c": (32, 1, 128, 128, (128, 64))}


@pytest.mark.parametrize("key", sorted(SHAPES))
def test_abmil_equals_eva(key):
    from safetensors.torch import load_file

    t = load_file(str(FIXTURE))
    d, out, proj, hid, mlp = SHAPES[key]
    net = ABMIL(d, out, projected_input_size=proj, hidden_size_attention=hid, hidden_sizes_mlp=mlp).eval()
    state = {k[len(f"{key}.w."):].replace("gated_attention.", "").replace("classifier._network.", "classifier."): v
             for k, v in t.items() if k.startswith(f"{key}.w.")}
    net.load_state_dict(state)  # strict: the same parameters as eva's
    x = t[f"{key}.x"]
    with torch.no_grad():
        got = net(x)  # -inf rows are padding, as eva's Pad2DTensor makes them
        mask = ~torch.isneginf(x).all(-1)
        got_masked = net(x.masked_fill(~mask[..., None], 0.0), mask)
    torch.testing.assert_close(got, t[f"{key}.logits"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_masked, t[f"{key}.logits"], rtol=1e-5, atol=1e-6)


def test_top_attention_tiles_find_the_witness():
    tr, va, te = _bags(48, 0), _bags(24, 1), _bags(40, 2)
    te.tile_ids = [[f"{s}/{j}" for j in range(len(x))] for s, x in zip(te.slide_ids, te.x)]
    res = train_mil(tr, va, num_classes=2, settings=MILSettings(epochs=15, patience=5))
    top = top_attention_tiles(res.model, te, k=1)
    hits = [int(t[0].split("/")[1]) < max(1, len(x) // 6) for t, x, y in zip(top, te.x, te.y) if y == 1]
    assert np.mean(hits) > 0.8  # the witness tiles are the first sixth of each positive bag


@pytest.mark.parametrize("cls", [ABMIL, MeanPoolMIL])
def test_padding_does_not_change_a_bag(cls):
    torch.manual_seed(0)
    net = cls(8, 1).eval()
    bag = torch.randn(1, 5, 8)
    padded = torch.cat([bag, torch.randn(1, 3, 8) * 100], 1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    with torch.no_grad():
        torch.testing.assert_close(net(bag), net(padded, mask))
    if cls is ABMIL:
        assert float(net.attention[0, 5:].sum()) == 0.0 and abs(float(net.attention.sum()) - 1) < 1e-6


def _bags(n: int, seed: int, dim: int = 16, k: int = 2) -> Bags:
    """Bags whose label is carried by a few 'tumour' tiles (a witness direction) among noise."""
    g = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    witness = torch.zeros(dim)
    witness[0] = 4.0
    for i in range(n):
        y = i % k
        x = torch.randn(int(torch.randint(5, 30, (1,), generator=g)), dim, generator=g)
        if y:
            x[: max(1, len(x) // 6)] += witness * y
        xs.append(x)
        ys.append(y)
    return Bags([f"s{seed}_{i}" for i in range(n)], xs, torch.tensor(ys), [f"p{seed}_{i}" for i in range(n)])


@pytest.mark.parametrize("aggregator", ["abmil", "mean"])
def test_train_mil_learns_witness_tiles(aggregator):
    from sklearn.metrics import roc_auc_score

    tr, va, te = _bags(48, 0), _bags(24, 1), _bags(40, 2)
    res = train_mil(tr, va, num_classes=2, settings=MILSettings(aggregator=aggregator, epochs=15, patience=5))
    probs = predict_bags(res.model, te, num_classes=2)
    assert probs.shape == (40, 2) and torch.allclose(probs.sum(1), torch.ones(40))
    auc = roc_auc_score(te.y.numpy(), probs[:, 1].numpy())
    assert auc > {"abmil": 0.9, "mean": 0.7}[aggregator], auc  # the mean dilutes the few witness tiles
    curve = dict(res.val_curve)
    assert res.best_val == max(curve.values())
    assert res.best_epoch == min(e for e, v in curve.items() if v == res.best_val)  # strictly better only
    assert res.epochs <= 15 and (res.epochs == 15 or res.epochs - res.best_epoch == 5)


def test_train_mil_multiclass_and_seeds():
    tr, va = _bags(30, 0, k=3), _bags(30, 1, k=3)
    a = train_mil(tr, va, num_classes=3, settings=MILSettings(epochs=3), seed=0)
    b = train_mil(tr, va, num_classes=3, settings=MILSettings(epochs=3), seed=0)
    c = train_mil(tr, va, num_classes=3, settings=MILSettings(epochs=3), seed=1)
    pa, pb, pc = (predict_bags(r.model, va, num_classes=3) for r in (a, b, c))
    torch.testing.assert_close(pa, pb)
    assert not torch.allclose(pa, pc)
    torch.testing.assert_close(pa.sum(1), torch.ones(30))


def test_unknown_aggregator_is_an_error():
    with pytest.raises(ValueError, match="aggregator='gru'"):
        train_mil(_bags(4, 0), _bags(4, 1), num_classes=2, settings=MILSettings(aggregator="gru"))


def test_mil_protocol_on_camelyon16_layout(tmp_path, monkeypatch):
    from medimg_bench.protocols import run_protocol
    from medimg_bench.runs import compose_config
    from tests.datasets.test_pathology_camelyon16 import make_camelyon16

    pytest.importorskip("tiffslide")
    root = make_camelyon16(tmp_path / "c16")
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    over = ["protocol=mil", "dataset=camelyon16", f"dataset.root={root}", "protocol.val_split=val",
            "dataset.options.mpp=1.0", "dataset.options.tile_size=32", "dataset.options.thumbnail_size=128",
            "model=timm_resnet10t", "protocol.options.epochs=4", "bootstrap.n_resamples=20", "progress=false",
            "protocol.seeds=[0,1]"]
    res = run_protocol(compose_config(over), tmp_path / "run")
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(s["metrics"]) == {"auroc", "balanced_accuracy", "accuracy"}
    assert s["metrics"]["auroc"]["mean"]["n_seeds"] == 2
    seed0 = json.loads((tmp_path / "run" / "seeds" / "0" / "summary.json").read_text())
    assert seed0["n_samples"] == 3  # test slides
    assert seed0["metrics"]["auroc"]["mean"]["ci_low"] is not None
    info = s["protocol"]["info"]["0"]
    assert (info["train_slides"], info["val_slides"], info["test_slides"]) == (6, 2, 3)
    emb = s["protocol"]["embeddings"]
    assert emb["test"]["slides"] == 3 and emb["test"]["tiles"] > 3
    samples = res.samples[res.samples["seed"] == 0]
    assert sorted(set(samples["id"])) == ["test_001", "test_002", "test_003"]  # one row per slide × class
    assert len(samples) == 6
    assert (samples["n_tiles"] >= 1).all()
    for sid, tops in zip(samples["id"], samples["top_attention_tiles"]):
        tiles = tops.split(",")
        assert 1 <= len(tiles) <= 5 and all(t.startswith(sid + "/") for t in tiles)
    # a second run reads every split's embeddings from the cache
    res2 = run_protocol(compose_config(over + ["protocol.seeds=[0]"]), tmp_path / "run2")
    assert {v["source"] for v in res2.summary["protocol"]["embeddings"].values()} == {"cache"}
    np.testing.assert_allclose(res2.summary["protocol"]["per_seed"]["0"]["auroc"],
                               s["protocol"]["per_seed"]["0"]["auroc"])


def test_a_test_slide_without_tissue_is_a_failed_slide(tmp_path, monkeypatch, capsys):
    """Issue #35 item 4: a CAMELYON16 test slide with no tissue left the MIL test set (n_failed 0);
    it is now a failed slide naming the reason, and reference.csv's slide absent from disk
    (test_049) an exclusion counted in summary.json and printed."""
    from medimg_bench.protocols import run_protocol
    from medimg_bench.runs import compose_config
    from tests.datasets.test_pathology_camelyon16 import _write_slide, make_camelyon16

    pytest.importorskip("tiffslide")
    root = make_camelyon16(tmp_path / "c16")
    _write_slide(root / "testing" / "images" / "test_004.tif", np.full((512, 512, 3), 235, np.uint8), 0.25)
    with open(root / "testing" / "reference.csv", "a") as f:
        f.write("test_004,Normal,\n")
    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    over = ["protocol=mil", "dataset=camelyon16", f"dataset.root={root}", "protocol.val_split=val",
            "dataset.options.mpp=1.0", "dataset.options.tile_size=32", "dataset.options.thumbnail_size=128",
            "model=timm_resnet10t", "protocol.options.epochs=2", "bootstrap.n_resamples=10", "progress=false",
            "protocol.seeds=[0]"]
    res = run_protocol(compose_config(over), tmp_path / "run")
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["n_samples"] == 4 and s["n_failed"] == 1 and s["failed_ids"] == ["test_004"]
    assert s["n_excluded"] == 1 and s["exclusions"][0]["id"] == "test_049"
    failed = res.samples[res.samples["status"] == "failed"]
    assert list(failed["id"]) == ["test_004"] and "without tissue" in failed["error"].iloc[0]
    assert "test_004.tif" in failed["error"].iloc[0]
    assert s["protocol"]["info"]["0"]["test_slides"] == 3  # the figures are over the scored slides
    out = capsys.readouterr().out
    assert "1 failed" in out and "1 excluded" in out and "excluded test_049" in out
