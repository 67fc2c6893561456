"""The ``nih_cxr14_chexnet`` card: jrzech/reproduce-chexnet's stored test-set probabilities
(``preds.csv`` as published: ``Image Index`` + ``prob_<Finding>``, no images) scored against NIH's
v2020 labels reproduce the 14 AUROCs the authors printed (``aucs.csv``), with patient-level
intervals; the CheXNet paper's values ride along as a reference that is never judged. The real
files are read in place from ../shared/data/nih_cxr14_chexnet; skipped when absent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medimg_bench.baselines.cards import CardError, load_card, validate_card
from medimg_bench.baselines.reproduce import reproduce
from medimg_bench.datasets import create
from medimg_bench.metrics.classification import auroc

ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nih_cxr14_chexnet"
real = pytest.mark.skipif(not (ROOT / "preds.csv").is_file(),
                          reason=f"the reproduce-chexnet files are not in {ROOT} (../shared/data is absent)")
CARD = load_card("nih_cxr14_chexnet")


def test_card_scores_the_file_as_published_against_the_release_the_authors_name():
    ovs = CARD["overrides"]
    assert "dataset.options.release=v2020" in ovs and "dataset.options.split_list=preds.csv" in ovs
    assert "model.options.root=${dataset.root}/preds.csv" in ovs  # the file itself: no renamed copy
    (m,) = CARD["metrics"]
    assert m["metric"] == "auroc" and m["rule"] == "abs_tol" and m["tolerance"] <= 1e-6
    (ref,) = CARD["references"]
    assert "NOT reproducible" in ref["note"] and len(ref["values"]["auroc"]) == 14
    assert ref["values"]["auroc"]["Atelectasis"] == 0.8094  # the paper's, not the reproduction's


def test_references_are_validated():
    bad = {**CARD, "references": [{**CARD["references"][0], "values": {"accuracy": 0.5}}]}
    with pytest.raises(CardError, match="not in the card's metrics"):
        validate_card(bad)
    bad = {**CARD, "references": [{k: v for k, v in CARD["references"][0].items() if k != "note"}]}
    with pytest.raises(CardError, match=r"references\[0\].note"):
        validate_card(bad)


@real
def test_card_values_are_aucs_csv():
    printed = pd.read_csv(ROOT / "aucs.csv").set_index("label")["auc"]
    assert CARD["metrics"][0]["published"] == printed.to_dict()


@real
def test_our_auroc_equals_the_printed_values_before_rounding():
    ds = create("nih_cxr14", ROOT, release="v2020", split_list="preds.csv", on_missing="lazy")  # no images
    preds = pd.read_csv(ROOT / "preds.csv").set_index("Image Index")
    preds.index = preds.index.str.removesuffix(".png")
    scores = preds.loc[ds.ids, [f"prob_{c}" for c in ds.classes]].to_numpy(np.float64)
    labels = ds.manifest[list(ds.classes)].to_numpy(np.float64)
    ours = auroc(scores, labels, average=None).numpy()
    printed = pd.read_csv(ROOT / "aucs.csv").set_index("label")["auc"].loc[list(ds.classes)].to_numpy()
    np.testing.assert_allclose(ours, printed, rtol=0, atol=1e-12)
    assert len(ds) == 22433 and ds.label_release["release"] == "v2020"


@real
def test_reproduce(tmp_path):
    out = reproduce("nih_cxr14_chexnet", [f"dataset.root={ROOT}", "bootstrap.n_resamples=200", "progress=false"],
                    run_dir=tmp_path)
    rows = out["rows"]
    assert len(rows) == 14 and out["reproduced"] is True
    assert all(r["ci_low"] < r["measured"] < r["ci_high"] for r in rows)  # patient-level intervals
    assert out["references"][0]["values"]["auroc"]["Hernia"] == 0.9164
