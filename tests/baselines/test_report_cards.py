"""The two report-generation cards run on the real folders (../shared/data; skipped when absent)
and reproduce every published figure; the predictions reader and the text-only dataset they
rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from medimg_bench.baselines.cards import load_card
from medimg_bench.metrics.text.nlg import java_available

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def test_cards_load_and_name_their_sources():
    for name in ("iu_xray_cvt2distilgpt2", "iu_xray_moerad"):
        card = load_card(name)
        assert card["status"] == "ready" and card["model"]["weights"] == "predictions"
    moerad = load_card("iu_xray_moerad")
    assert "do NOT describe the committed files" in moerad["source"]["note"]


@pytest.mark.parametrize("card, folder", [
    ("iu_xray_cvt2distilgpt2", "iu_xray_cvt2distilgpt2"),
    ("iu_xray_moerad", "iu_xray_moerad_rexrank"),
])
def test_card_reproduces_on_the_real_folder(tmp_path, card, folder):
    from medimg_bench.baselines.reproduce import reproduce

    root = SHARED / folder
    if not root.is_dir():
        pytest.skip(f"{root} is absent")
    if card == "iu_xray_cvt2distilgpt2" and not java_available():
        pytest.skip("METEOR needs Java")
    out = reproduce(card, [f"dataset.root={root}", "progress=false"], run_dir=tmp_path / "run")
    rows = {r["metric"]: r for r in out["rows"]}
    assert out["reproduced"] is True, rows
    expected = {"iu_xray_cvt2distilgpt2": {"BLEU_1", "BLEU_2", "BLEU_3", "BLEU_4", "METEOR", "ROUGE_L", "CIDEr"},
                "iu_xray_moerad": {"bleu_score"}}[card]
    assert set(rows) == expected


def test_predictions_read_report_csv_by_column_names(tmp_path):
    from medimg_bench.models.predictions import predictions

    (tmp_path / "a.csv").write_text("report,dicom_id\nthe heart is normal,CXR1_IM-1\nno effusion,CXR2_IM-2\n")
    model = predictions(root=tmp_path / "a.csv")
    assert model.answers == {"CXR1_IM-1": "the heart is normal", "CXR2_IM-2": "no effusion"}
    (tmp_path / "b.csv").write_text("study_id,report\nx,one\nx,two\n")
    with pytest.raises(ValueError, match="duplicate id.*'x'"):
        predictions(root=tmp_path / "b.csv")
    (tmp_path / "c.csv").write_text("name,report\nx,one\n")
    with pytest.raises(ValueError, match="no id column found"):
        predictions(root=tmp_path / "c.csv", kind="reports")
    import pandas as pd

    pd.DataFrame({"study_id": ["s1"], "prediction": ["clear"]}).to_parquet(tmp_path / "d.parquet")
    assert predictions(root=tmp_path / "d.parquet").answers == {"s1": "clear"}


def test_annotation_json_alone_is_a_valid_root_and_no_image_is_opened(tmp_path):
    import json

    from medimg_bench.datasets.reports.iu_xray import iu_xray
    from medimg_bench.models.predictions import predictions

    ann = {"test": [{"id": "CXR1_IM-1", "report": "Heart normal.", "image_path": ["CXR1_IM-1/0.png"]}]}
    (tmp_path / "annotation.json").write_text(json.dumps(ann))
    (tmp_path / "p.jsonl").write_text('{"id": "CXR1_IM-1", "text": "heart normal"}\n')
    ds = iu_xray(tmp_path, split="test")
    model = predictions(root=tmp_path / "p.jsonl")
    model.bind_dataset(ds)
    sample = ds[0]
    assert "image" not in sample and sample["report"] == "Heart normal."
