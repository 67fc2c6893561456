"""Baseline cards: schema over every shipped card; reproduce end to end on a synthetic MedMNIST
npz with a card made for it (verdict both ways), refusals."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from medimg_bench.baselines.cards import CardError, list_cards, load_card, validate_card
from medimg_bench.baselines.reproduce import cli_main, reproduce, verdict_rows


@pytest.mark.parametrize("name", list_cards())
def test_every_card_passes_schema(name):
    card = load_card(name)
    assert card["name"] == name


def test_at_least_ten_cards():
    assert len(list_cards()) >= 10


def _card(root, published, rule="ci", **extra):
    m = {"metric": "auroc", "convention": "macro ROC AUC", "published": {"mean": published},
         "rule": rule, **extra}
    return {
        "name": "synthetic_breast", "title": "t", "status": "ready",
        "source": {"paper": "synthetic", "table": "none", "read_from": "synthetic fixture"},
        "task": "classification",
        "params": {"flag": "breastmnist"},
        "dataset": {"name": "medmnist", "expected": {"files": ["{flag}.npz"], "npz": "{flag}.npz",
                                                     "counts": {"train": 40, "val": 8, "test": 40}}},
        "model": {"name": "resnet10t", "weights": "scratch"},
        "overrides": ["dataset=medmnist", f"dataset.root={root}", "dataset.options.flag={flag}",
                      "model=timm_resnet10t", "train.enabled=true", "train.max_steps=3",
                      "train.batch_size=16", "task.options.multilabel=false", "bootstrap.n_resamples=50", "progress=false",
                      "metrics=classification"],
        "metrics": [m], "needs": {"data": "x", "gpu_hours": 0, "cpu_minutes": 1},
    }


@pytest.fixture(scope="module")
def npz_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("medmnist")
    rng = np.random.default_rng(0)
    arrs = {}
    for split, n in (("train", 40), ("val", 8), ("test", 40)):
        y = rng.integers(0, 2, size=(n, 1)).astype(np.uint8)
        x = rng.integers(0, 60, size=(n, 28, 28)).astype(np.uint8)
        x[y[:, 0] == 1, 8:20, 8:20] = 230  # a visible square: learnable in a few steps
        arrs[f"{split}_images"], arrs[f"{split}_labels"] = x, y
    np.savez(root / "breastmnist.npz", **arrs)
    return root


@pytest.fixture(scope="module")
def measured(npz_root, tmp_path_factory):
    run = tmp_path_factory.mktemp("run") / "r"
    out = reproduce(_card(npz_root, 0.5), run_dir=run)
    return out, run


def test_reproduce_end_to_end_writes_table_json_plot(measured):
    out, run = measured
    saved = json.loads((run / "reproduce.json").read_text())
    assert saved["rows"] == out["rows"]
    assert (run / "reproduce.png").is_file()
    row = out["rows"][0]
    assert row["metric"] == "auroc" and row["measured"] is not None
    assert row["ci_low"] <= row["measured"] <= row["ci_high"]


def test_verdict_both_ways(measured):
    out, run = measured
    summary = json.loads((run / "summary.json").read_text())
    r = out["rows"][0]
    inside = (r["ci_low"] + r["ci_high"]) / 2
    yes = verdict_rows(_card("x", inside), summary)[0]
    assert yes["verdict"] == "reproduced"
    no = verdict_rows(_card("x", r["ci_high"] + 0.05 if r["ci_high"] < 0.95 else r["ci_low"] - 0.05),
                      summary)[0]
    assert no["verdict"] == "not reproduced"
    # an absolute tolerance: 0.01 away passes with tol 0.02, fails with tol 0.005
    near = r["measured"] - 0.01
    tol_ok = _card("x", near, rule="abs_tol", tolerance=0.02, tolerance_reason="r")
    tol_bad = _card("x", near, rule="abs_tol", tolerance=0.005, tolerance_reason="r")
    assert verdict_rows(tol_ok, summary)[0]["verdict"] == "reproduced"
    assert verdict_rows(tol_bad, summary)[0]["verdict"] == "not reproduced"
    # percentages: published 100 * x with scale 100 is the same value
    pct = _card("x", inside * 100, scale=100)
    assert verdict_rows(pct, summary)[0]["verdict"] == "reproduced"


def test_wrong_split_size_refused_before_training(npz_root, tmp_path):
    card = _card(npz_root, 0.5)
    card["dataset"]["expected"]["counts"]["test"] = 41
    with pytest.raises(CardError, match="test split has 40 images, the card expects 41"):
        reproduce(card, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_missing_file_refused(tmp_path):
    with pytest.raises(CardError, match="lacks breastmnist.npz"):
        reproduce(_card(tmp_path, 0.5), run_dir=tmp_path / "r")


def test_needs_source_and_missing_pieces_refused(tmp_path):
    card = _card(tmp_path, None)
    card["status"] = "needs_source"
    with pytest.raises(CardError, match="needs_source"):
        reproduce(card)
    card = _card(tmp_path, 0.5)
    card["requires"] = ["module:medimg_bench.not_a_module", "metric:auroc"]
    with pytest.raises(CardError, match="module:medimg_bench.not_a_module"):
        reproduce(card)
    assert cli_main(["medmnist_v2_resnet18_28", "dataset.root=/nonexistent"]) == 2


def test_a_flag_without_published_values_is_measured_without_a_verdict(npz_root, tmp_path, capsys):
    """Numbers published for one flag are never used to judge another: that run is measured and
    its rows say "no published value"; a comma-separated flag sweeps (one run each, one table)."""
    import shutil

    import yaml

    shutil.copy(npz_root / "breastmnist.npz", npz_root / "pneumoniamnist.npz")
    card = _card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC passes: a test card")
    card["published_for"] = {"flag": "breastmnist"}
    card["dataset"]["expected"]["counts"] = {"breastmnist": {"train": 40, "val": 8, "test": 40},
                                             "pneumoniamnist": {"train": 40, "val": 8, "test": 40}}
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    rc = cli_main([str(path), "--run-dir", str(tmp_path / "sweep"), "flag=breastmnist,pneumoniamnist"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "pneumoniamnist is measured without a verdict" in out
    breast = json.loads((tmp_path / "sweep" / "flag=breastmnist" / "reproduce.json").read_text())
    pneu = json.loads((tmp_path / "sweep" / "flag=pneumoniamnist" / "reproduce.json").read_text())
    assert breast["reproduced"] is True and breast["rows"][0]["verdict"] == "reproduced"
    assert pneu["reproduced"] is None and pneu["params"] == {"flag": "pneumoniamnist"}
    row = pneu["rows"][0]
    assert row["verdict"] == "no published value" and row["published"] is None
    assert row["measured"] is not None and row["ci_low"] <= row["measured"] <= row["ci_high"]
    assert out.count("flag=pneumoniamnist") >= 1  # the sweep table


@pytest.mark.parametrize("mutate, field", [
    (lambda c: c.pop("source"), "source"),
    (lambda c: c.update(status="done"), "status"),
    (lambda c: c["model"].update(weights="magic"), "model.weights"),
    (lambda c: c["metrics"][0].update(published="high"), "metrics[0].published"),
    (lambda c: c["metrics"][0].update(rule="abs_tol"), "metrics[0].tolerance"),
    (lambda c: c["metrics"][0]["published"].update(mean=None), "status"),
    (lambda c: c.update(overrides=["noequals"]), "overrides"),
    (lambda c: c["source"].pop("read_from"), "source.read_from"),
    (lambda c: c["source"].update(read_from=""), "source.read_from"),
    (lambda c: c["source"].update(note=3), "source.note"),
    (lambda c: c.update(published_for={"size": 28}), "published_for"),
    (lambda c: c.update(published_for="breastmnist"), "published_for"),
])
def test_schema_errors_name_the_field(mutate, field):
    card = copy.deepcopy(_card("x", 0.5))
    mutate(card)
    with pytest.raises(CardError, match=f"field '{field.replace('[', '.').replace(']', '.')}"):
        validate_card(card, where="c.yaml")


def test_needs_source_card_may_omit_read_from_and_published_for_names_a_param():
    card = copy.deepcopy(_card("x", None))
    card["status"] = "needs_source"
    card["source"].pop("read_from")
    card["published_for"] = {"flag": "breastmnist"}
    assert validate_card(card)["published_for"] == {"flag": "breastmnist"}


@pytest.mark.parametrize("name", list_cards())
def test_ready_cards_cite_the_text_read_and_needs_source_cards_say_what_was_searched(name):
    card = load_card(name)
    src = card["source"]
    if card["status"] == "ready":
        assert src["read_from"] and src["table"]
        if card.get("published_by"):  # values per setting, each saying where it was read
            for table in card["published_by"].values():
                for cells in table.values():
                    assert cells.get("read_from") and all(v is not None for v in cells.values())
        else:  # a card of several published rows carries its values in the variants
            pubs = ([v["published"] for v in card["variants"]] if card.get("variants")
                    else [m["published"] for m in card["metrics"]])
            assert all(v is not None for p in pubs for v in (p.values() if isinstance(p, dict) else [p]))
    else:
        assert src.get("note"), f"{name}: a needs_source card must note what was searched"


def test_list(capsys):
    assert cli_main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "medmnist_v2_resnet18_28" in out and "needs_source" in out


def test_weights_of_another_architecture_name_the_first_mismatching_layer(tmp_path):
    import torch
    from safetensors.torch import save_file

    from medimg_bench.models.base import load_checkpoint

    class Net(torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.stem = torch.nn.Conv2d(1, 4, 3)
            self.head = torch.nn.Linear(4, width)

    save_file(Net(3).state_dict(), str(tmp_path / "w.safetensors"))
    with pytest.raises(ValueError, match=r"size mismatch for head\.weight"):
        load_checkpoint(Net(2), tmp_path / "w.safetensors")


def test_cli_subcommand_is_wired(capsys):
    from medimg_bench.cli import main

    assert main(["reproduce", "--list"]) == 0
    assert "chexnet_nih_cxr14" in capsys.readouterr().out
    assert main(["reproduce", "cholec80_tecno", "dataset.root=/x"]) == 2
    assert "needs_source" in capsys.readouterr().out


def test_medmnist_recipe_reaches_fit_through_reproduce(npz_root, tmp_path):
    """The shipped MedMNIST recipe (Adam, MultiStepLR milestones, whole epochs, last batch kept,
    best-validation-AUC epoch) composes and runs; shortened to 2 epochs on the synthetic npz."""
    shipped = load_card("medmnist_v2_resnet18_28")
    recipe = [o for o in shipped["overrides"] if o.startswith("train.")]
    for o in ("train.optimizer=adam", "train.epochs=100", "train.lr_milestones=[50,75]", "train.lr_gamma=0.1",
              "train.select_on=auroc", "train.drop_last=false", "train.batch_size=128", "train.lr=0.001"):
        assert o in recipe, o
    card = _card(npz_root, 0.5)
    card["overrides"] = [o for o in card["overrides"] if not o.startswith("train.")] + recipe + [
        "train.epochs=2", "train.lr_milestones=[1]", "train.batch_size=16"]
    reproduce(card, run_dir=tmp_path / "r")
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    training, cfg = manifest["training"], manifest["config"]["train"]
    assert training["epochs"] == 2 and training["steps"] == 2 * 3  # 40 images, batch 16, last batch kept
    assert training["select_on"] == "auroc" and training["n_val"] == 8
    assert [e for e, _ in training["val_curve"]] == [0, 1] and training["best_epoch"] in (0, 1)
    assert training["best_val"] == max(v for _, v in training["val_curve"])
    assert cfg["optimizer"] == "adam" and cfg["lr_milestones"] == [1] and cfg["weight_decay"] == 0
