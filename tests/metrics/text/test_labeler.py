"""The offline CheXpert-style labeler on its labelled sentence set (tests/metrics/text/data/
labelled_sentences.tsv, written for this project: every observation, negation, uncertainty,
hedges, "no change in", lists, abbreviations) and the aggregation rules."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from medimg_bench.metrics import label_reports
from medimg_bench.metrics.text.chexpert_labeler import CHEXPERT_OBSERVATIONS, label_report

DATA = Path(__file__).with_name("data") / "labelled_sentences.tsv"
PATHOLOGIES = CHEXPERT_OBSERVATIONS[1:]


def _labelled() -> list[tuple[str, dict[str, float]]]:
    rows = []
    for line in DATA.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        sentence, _, spec = line.partition("\t")
        expected = {}
        for item in filter(None, (x.strip() for x in spec.split(";"))):
            obs, value = item.split("=")
            assert obs in CHEXPERT_OBSERVATIONS, obs
            expected[obs] = float(value)
        rows.append((sentence, expected))
    return rows


def agreement() -> pd.DataFrame:
    """Per observation: sentences, agreements (NaN = NaN counts as agreeing), agreement rate."""
    rows = _labelled()
    got = label_reports([s for s, _ in rows])
    out = {}
    for obs in PATHOLOGIES:
        agree = mentioned = agree_mentioned = 0
        for i, (_, exp) in enumerate(rows):
            e, g = exp.get(obs, math.nan), got[obs].iloc[i]
            same = (math.isnan(e) and math.isnan(g)) or e == g
            agree += same
            if not math.isnan(e):
                mentioned += 1
                agree_mentioned += same
        out[obs] = {"mentioned": mentioned, "agree_mentioned": agree_mentioned,
                    "rate_mentioned": agree_mentioned / mentioned, "agree": agree,
                    "rate": agree / len(rows)}
    return pd.DataFrame(out).T


def test_labelled_set_is_large_and_covers_every_observation():
    rows = _labelled()
    assert len(rows) >= 150
    for obs in PATHOLOGIES:
        values = {e[obs] for _, e in rows if obs in e}
        assert 1.0 in values and 0.0 in values, obs  # every observation positive and negative


def test_agreement_on_the_labelled_set():
    table = agreement()
    print("\n" + table.to_string())
    assert (table["rate"] >= 0.98).all(), table
    assert (table["rate_mentioned"] >= 0.9).all(), table
    total_disagreements = int((len(_labelled()) - table["agree"]).sum())
    assert total_disagreements <= 3, total_disagreements


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Small effusion. No effusion on the right.", {"Pleural Effusion": 1.0}),  # any positive wins
        ("No effusion. Effusion cannot be excluded.", {"Pleural Effusion": -1.0}),  # neg + unc → unc
        ("Endotracheal tube in place.", {"Support Devices": 1.0, "No Finding": 1.0}),
        ("Possible pneumonia.", {"Pneumonia": -1.0}),  # uncertain: no "No Finding"
        ("Pneumothorax.", {"Pneumothorax": 1.0}),
        ("No pneumothorax.", {"Pneumothorax": 0.0, "No Finding": 1.0}),
    ],
)
def test_aggregation_and_no_finding(text, expected):
    got = label_report(text)
    for obs in CHEXPERT_OBSERVATIONS:
        want = expected.get(obs, math.nan)
        assert (math.isnan(want) and math.isnan(got[obs])) or got[obs] == want, (obs, got[obs])


def test_contract_and_bad_input():
    df = label_reports(["", "   ", "No effusion."])
    assert list(df.columns) == list(CHEXPERT_OBSERVATIONS) and len(df) == 3
    assert df.iloc[0].isna().all() and df.iloc[1].isna().all()  # empty: nothing mentioned
    assert df["Pleural Effusion"].iloc[2] == 0.0
    assert label_reports([b"No effusion."])["Pleural Effusion"].iloc[0] == 0.0
    with pytest.raises(ValueError, match="report 1: not valid UTF-8"):
        label_reports(["ok", b"\xff\xfe bad"])
    with pytest.raises(TypeError, match="report 0"):
        label_reports([None])
