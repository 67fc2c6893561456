"""reproduce --seeds (one run per seed, a verdict on the mean with the seed + test interval),
departures from the card (measured, no verdict), per-flag published values and the per-flag
dataset check from the MedMNIST release."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from scipy.stats import t as student_t

from medimg_bench.baselines.cards import CardError, load_card, published_values, validate_card
from medimg_bench.baselines.reproduce import check_dataset_root, cli_main, reproduce
from medimg_bench.baselines.seeds import combine_seeds, seed_interval
from tests.baselines.test_cards_reproduce import _card
from tests.datasets._helpers import write_breastmnist_like


@pytest.fixture(scope="module")
def npz_root(tmp_path_factory):
    return write_breastmnist_like(tmp_path_factory.mktemp("medmnist_seeds"), sizes=(40, 8, 40), seed=1)


def test_seed_interval_is_the_t_interval_of_the_mean_and_the_mean_test_half_width_in_quadrature():
    vals, lows, highs = [0.80, 0.84, 0.86], [0.74, 0.77, 0.80], [0.85, 0.90, 0.91]
    iv = seed_interval(vals, lows, highs)
    mean, sd = sum(vals) / 3, statistics.stdev(vals)
    h_seed = student_t.ppf(0.975, 2) * sd / math.sqrt(3)
    test_lo = ((0.80 - 0.74) + (0.84 - 0.77) + (0.86 - 0.80)) / 3
    test_hi = ((0.85 - 0.80) + (0.90 - 0.84) + (0.91 - 0.86)) / 3
    assert iv["mean"] == pytest.approx(mean) and iv["sd"] == pytest.approx(sd)
    assert iv["ci_low"] == pytest.approx(mean - math.sqrt(h_seed**2 + test_lo**2))
    assert iv["ci_high"] == pytest.approx(mean + math.sqrt(h_seed**2 + test_hi**2))
    # wider than the test-set interval alone, and than the seed interval alone
    assert iv["ci_low"] < mean - max(h_seed, test_lo) and iv["ci_high"] > mean + max(h_seed, test_hi)


def test_one_seed_is_its_own_test_interval_with_no_sd():
    iv = seed_interval([0.8], [0.7], [0.85])
    assert iv["sd"] is None and iv["h_seed"] == 0
    assert (iv["ci_low"], iv["ci_high"]) == pytest.approx((0.7, 0.85))


def test_seed_interval_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="one value and one interval per seed"):
        seed_interval([0.8, 0.9], [0.7], [0.85, 0.95])


def test_combine_seeds_means_every_entry_and_keeps_each_seed():
    def summ(v):
        e = {"value": v, "ci_low": v - 0.1, "ci_high": v + 0.05}
        return {"metrics": {"auroc": {"mean": e, "per_class": {"a": dict(e), "b": dict(e)}}}}

    comb = combine_seeds([summ(0.7), summ(0.8)], [3, 5])
    m = comb["metrics"]["auroc"]["mean"]
    assert m["value"] == pytest.approx(0.75) and [p["seed"] for p in m["per_seed"]] == [3, 5]
    assert m["h_test"] == pytest.approx([0.1, 0.05])
    assert set(comb["metrics"]["auroc"]["per_class"]) == {"a", "b"}


def test_combine_seeds_clips_the_interval_to_the_recorded_range_and_says_so():
    def summ(v, rng):
        e = {"value": v, "ci_low": v - 0.05, "ci_high": v + 0.05}
        return {"metrics": {"acc": {"range": rng, "mean": e, "per_class": {"a": dict(e)}},
                            "dist": {"range": [0.0, None], "mean": dict(e)}}}

    # two seeds far apart: t(0.975, 1) = 12.7 makes the raw interval run past [0, 1]
    comb = combine_seeds([summ(0.80, [0.0, 1.0]), summ(0.90, [0.0, 1.0])], [0, 1])
    raw = seed_interval([0.80, 0.90], [0.75, 0.85], [0.85, 0.95])
    assert raw["ci_high"] > 1.0 and raw["ci_low"] < 0.5
    m = comb["metrics"]["acc"]["mean"]
    assert m["ci_high"] == 1.0 and m["ci_low"] == pytest.approx(raw["ci_low"]) and m["ci_clipped"] is True
    assert comb["metrics"]["acc"]["per_class"]["a"]["ci_high"] == 1.0
    d = comb["metrics"]["dist"]["mean"]  # bounded below only: the upper side stays as computed
    assert d["ci_high"] == pytest.approx(raw["ci_high"]) and d["ci_low"] == pytest.approx(raw["ci_low"])
    assert d["ci_clipped"] is False
    # no range recorded (older summaries): nothing clipped
    e = {"value": 0.9, "ci_low": 0.85, "ci_high": 0.95}
    old = combine_seeds([{"metrics": {"acc": {"mean": dict(e, value=0.8)}}}, {"metrics": {"acc": {"mean": e}}}], [0, 1])
    assert old["metrics"]["acc"]["mean"]["ci_high"] > 1.0 and old["metrics"]["acc"]["mean"]["ci_clipped"] is False


@pytest.fixture(scope="module")
def seeded(npz_root, tmp_path_factory):
    run = tmp_path_factory.mktemp("seeds") / "r"
    out = reproduce(_card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card"),
                    run_dir=run, seeds=[0, 1])
    return out, run


def test_seeds_run_once_each_and_judge_the_mean(seeded):
    out, run = seeded
    row = out["rows"][0]
    per = row["per_seed"]
    assert [p["seed"] for p in per] == [0, 1]
    for p in per:  # each seed's value is that run's own summary value
        summ = json.loads((run / f"seed={p['seed']}" / "summary.json").read_text())
        assert p["value"] == summ["metrics"]["auroc"]["mean"]["value"]
        man = json.loads((run / f"seed={p['seed']}" / "manifest.json").read_text())
        assert man["config"]["seed"] == p["seed"] and man["training"]["steps"] == 3
    assert row["measured"] == pytest.approx(sum(p["value"] for p in per) / 2)
    assert row["sd"] == pytest.approx(statistics.stdev([p["value"] for p in per]))
    iv = seed_interval([p["value"] for p in per], [p["ci_low"] for p in per], [p["ci_high"] for p in per])
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((max(iv["ci_low"], 0.0), min(iv["ci_high"], 1.0)))
    assert row["ci_clipped"] == (iv["ci_low"] < 0.0 or iv["ci_high"] > 1.0)
    assert row["verdict"] == "reproduced" and out["reproduced"] is True
    saved = json.loads((run / "reproduce.json").read_text())
    assert saved["seeds"] == [0, 1] and len(saved["runs"]) == 2 and saved["departures"] == []
    assert saved["data_files"][0]["official"] is False  # a synthetic file: not the release's MD5


def test_two_seeds_train_different_models(seeded):
    out, run = seeded
    losses = [json.loads((run / f"seed={s}" / "manifest.json").read_text())["training"]["final_loss"] for s in (0, 1)]
    assert losses[0] != losses[1]


def test_a_finished_seed_is_reused_not_retrained(seeded, npz_root, capsys):
    out, run = seeded
    before = (run / "seed=0" / "summary.json").stat().st_mtime_ns
    card = _card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card")
    again = reproduce(card, run_dir=run, seeds=[0, 1])
    assert (run / "seed=0" / "summary.json").stat().st_mtime_ns == before
    assert "is finished; reused, not retrained" in capsys.readouterr().out
    assert again["rows"][0]["measured"] == out["rows"][0]["measured"]
    other = _card(npz_root, 0.5)
    other["overrides"] = [o.replace("train.max_steps=3", "train.max_steps=4") for o in other["overrides"]]
    with pytest.raises(CardError, match="another config .*train.max_steps: saved 3, now 4"):
        reproduce(other, run_dir=run, seeds=[0])


def test_a_finished_seed_of_other_data_is_refused_and_no_manifest_is_rewritten(seeded, npz_root, tmp_path):
    """Issue 35: a seed run trained on other data was reused (``dataset.root`` is neutral in the
    config) and its manifest rewritten with the new data's MD5. Now the dataset's identity must
    match, and the run directory's manifest is left as the run wrote it."""
    import shutil

    out, run = seeded
    card = _card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card")
    manifest = run / "seed=0" / "manifest.json"
    before = manifest.read_bytes()
    reproduce(card, run_dir=run, seeds=[0])  # the same data: reused
    assert manifest.read_bytes() == before  # never rewritten
    # a byte-identical copy elsewhere is the same data: reused
    moved = tmp_path / "moved"
    shutil.copytree(npz_root, moved)
    reproduce(_card(moved, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card"),
              run_dir=run, seeds=[0])
    # other data under another root: refused, naming the data
    other = tmp_path / "other"
    other.mkdir()
    with np.load(npz_root / "breastmnist.npz") as z:
        arrs = {k: z[k].copy() for k in z.files}
    arrs["test_labels"] = 1 - arrs["test_labels"]
    np.savez(other / "breastmnist.npz", **arrs)
    with pytest.raises(CardError, match="finished run of other data.*content_sha256"):
        reproduce(_card(other, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card"),
                  run_dir=run, seeds=[0])
    assert manifest.read_bytes() == before


def test_a_seed_killed_mid_training_trains_on_from_its_state(seeded, npz_root, tmp_path, monkeypatch, capsys):
    """A seed killed after a training state (``seed=<s>/train/``) goes on from it, to the run an
    uninterrupted seed gives."""
    from medimg_bench.models.training import loop

    out, run = seeded
    card = _card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card")
    card["overrides"] = [*card["overrides"], "train.checkpoint_every=2"]
    real = loop.save_state

    def die_after_step_2(path, *args, **kwargs):
        real(path, *args, **kwargs)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(loop, "save_state", die_after_step_2)
    with pytest.raises(KeyboardInterrupt):
        reproduce(card, run_dir=tmp_path / "r", seeds=[0])
    monkeypatch.setattr(loop, "save_state", real)
    assert (tmp_path / "r" / "seed=0" / "train" / "train_state.pt").is_file()
    again = reproduce(card, run_dir=tmp_path / "r", seeds=[0])
    assert "training on from the state" in capsys.readouterr().out
    man = json.loads((tmp_path / "r" / "seed=0" / "manifest.json").read_text())
    assert man["training"]["resumed_training"] is True and man["training"]["steps"] == 3
    assert again["rows"][0]["per_seed"][0]["value"] == out["rows"][0]["per_seed"][0]["value"]


def test_an_override_of_the_recipe_is_measured_without_a_verdict(npz_root, tmp_path, capsys):
    card = _card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card")
    out = reproduce(card, ["train.max_steps=2", "bootstrap.n_resamples=20", "device=cpu"], run_dir=tmp_path / "r")
    assert out["departures"] == [{"key": "train.max_steps", "value": 2, "card": 3}]
    assert out["rows"][0]["verdict"] == "recipe changed" and out["reproduced"] is None
    assert out["rows"][0]["measured"] is not None
    assert "recipe changed: train.max_steps=2, card 3" in capsys.readouterr().out


def test_shipped_card_with_fewer_epochs_is_a_departure(npz_root):
    from medimg_bench.baselines.departures import describe, recipe_departures

    card = load_card("medmnist_v2_resnet18_28")
    ovs = [o.replace("{flag}", "breastmnist") for o in card["overrides"]]
    neutral = recipe_departures(ovs, [f"dataset.root={npz_root}", "device=cpu", "progress=false",
                                      "num_workers=2", "train.num_workers=2", "seed=3"])
    assert neutral == []
    changed = recipe_departures(ovs, [f"dataset.root={npz_root}", "train.epochs=2", "dataset.options.upsample=56",
                                      "+metrics.auprc={}"])
    assert describe(changed) == "recipe changed: dataset.options.upsample=56, card null; train.epochs=2, card 100"


def test_cli_seeds_flag(npz_root, tmp_path, capsys):
    import yaml

    card = _card(npz_root, 0.5, rule="abs_tol", tolerance=0.5, tolerance_reason="any AUROC: a test card")
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    assert cli_main([str(path), "--seeds", "0,0"]) == 2
    assert "distinct" in capsys.readouterr().out
    assert cli_main([str(path), "--seeds", "a"]) == 2


def test_published_by_picks_the_flags_values_and_leaves_others_unjudged():
    card = _card("x", None)
    card["metrics"][0].pop("published")
    card["published_by"] = {"flag": {"breastmnist": {"auroc": 0.9, "read_from": "Table 3"},
                                     "retinamnist": {"auroc": 0.7}}}
    card = validate_card(card)
    got, note = published_values(card, {"flag": "retinamnist"})
    assert got["metrics"][0]["published"] == {"mean": 0.7} and note is None
    got, note = published_values(card, {"flag": "pathmnist"})
    assert got["metrics"][0]["published"] == {"mean": None} and "flag=pathmnist is measured without a verdict" in note
    bad = dict(card, published_by={"flag": {"breastmnist": {"auprc": 0.9}}})
    with pytest.raises(CardError, match="published_by.flag.breastmnist"):
        validate_card(bad)


def _official_like(root, flag, sizes):
    arrs = {}
    for split, n in zip(("train", "val", "test"), sizes):
        arrs[f"{split}_images"] = np.zeros((n, 28, 28), np.uint8)
        arrs[f"{split}_labels"] = np.zeros((n, 1), np.uint8)
    np.savez(root / f"{flag}.npz", **arrs)


def test_a_flag_the_card_does_not_list_is_checked_against_its_release_sizes(tmp_path):
    card = load_card("medmnist_v2_resnet18_28")
    _official_like(tmp_path, "pneumoniamnist", (4708, 524, 624))
    with pytest.warns(UserWarning, match="not the official pneumoniamnist"):
        files = check_dataset_root(card, tmp_path, {"flag": "pneumoniamnist"})
    assert files[0]["official"] is False and files[0]["expected_md5"] == "28209eda62fecd6e6a2d98b1501bb15f"
    _official_like(tmp_path, "pneumoniamnist", (4708, 524, 600))
    with pytest.warns(UserWarning), pytest.raises(
            CardError, match=r"the test split has 600 images, the official pneumoniamnist file \(MedMNIST v3\) has 624"):
        check_dataset_root(card, tmp_path, {"flag": "pneumoniamnist"})
