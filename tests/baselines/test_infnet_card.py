"""The ``infnet_covid_semiseg`` card run on the real COVID-SemiSeg folder: every published cell of
the Inf-Net paper's two tables (the authors' printouts) reproduced from the authors' maps."""

from __future__ import annotations

from pathlib import Path

import pytest

from medimg_bench.baselines.cards import CardError, load_card
from medimg_bench.baselines.reproduce import reproduce

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "infnet_covid_semiseg"


def test_card_schema_and_variants(tmp_path):
    card = load_card("infnet_covid_semiseg")
    assert card["status"] == "ready" and len(card["variants"]) == 14
    assert sum(len(v["published"]) for v in card["variants"]) == 84  # 14 rows x 6 columns
    for f in card["dataset"]["expected"]["files"]:
        (tmp_path / f).mkdir(parents=True)
    with pytest.raises(CardError, match="unknown variant"):
        reproduce(card, [f"dataset.root={tmp_path}", "variant=VGG"], run_dir=tmp_path / "run")
    bad = {**card, "variants": [{**card["variants"][0], "published": {"dice": 0.5}}]}
    from medimg_bench.baselines.cards import validate_card

    with pytest.raises(CardError, match="not in the card's metrics"):
        validate_card(bad)


@pytest.mark.skipif(not REAL.exists(), reason=f"real data {REAL} is absent (a fresh clone has no ../shared)")
def test_reproduce_every_published_cell(tmp_path):
    out = reproduce("infnet_covid_semiseg", [f"dataset.root={REAL}", "bootstrap.n_resamples=0",
                                            "progress=false"], run_dir=tmp_path)
    rows = out["rows"]
    assert len(rows) == 84
    bad = [(r["variant"], r["metric"], r["published"], r["measured"]) for r in rows if r["verdict"] != "reproduced"]
    assert not bad, bad
    assert out["reproduced"] is True
