"""radgraph_f1 against the reference implementations' own scores (fixtures from
tools/radgraph_reference.py: Stanford-AIMI/radgraph rewards at 35c64b9 / 87f11a1 and
CXR-Report-Metric 9c9ecad, 400 generated annotation pairs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from medimg_bench.metrics.text.radgraph import (
    RADGRAPH_COLUMNS,
    RadGraphF1,
    cxr_metric_radgraph,
    load_annotator,
    radgraph_f1,
    radgraph_rewards,
)
from medimg_bench.registry import create_metric, list_metrics

DATA = json.loads((Path(__file__).parent / "data/radgraph_reference.json").read_text())
CASES = DATA["cases"]


@pytest.mark.parametrize("version,key", [("main", "reward_main-87f11a1"), ("0.1.18", "reward_0.1.18")])
def test_rewards_equal_radgraph_package(version: str, key: str) -> None:
    for i, c in enumerate(CASES):
        assert radgraph_rewards(c["hyp"], c["ref"], version=version) == pytest.approx(c[key], abs=1e-12), i


def test_versions_differ_on_case() -> None:
    # the corpus holds pairs where the two releases disagree (case changes), so the name matters
    assert any(c["reward_0.1.18"] != c["reward_main-87f11a1"] for c in CASES)


def test_cxr_report_metric_entity_relation_f1() -> None:
    for i, c in enumerate(CASES):
        ef, rf, comb = cxr_metric_radgraph(c["hyp"], c["ref"])
        assert ef == pytest.approx(c["cxrm_entity_f1"], abs=1e-12), i
        assert rf == pytest.approx(c["cxrm_relation_f1"], abs=1e-12), i
        assert comb == pytest.approx((c["cxrm_entity_f1"] + c["cxrm_relation_f1"]) / 2, abs=1e-12)


def test_stateful_on_annotations_matches_functional() -> None:
    assert "radgraph_f1" in list_metrics()
    m = create_metric("radgraph_f1", annotated=True)
    hyps, refs = [c["hyp"] for c in CASES[:50]], [c["ref"] for c in CASES[:50]]
    m.update(hyps[:20], refs[:20])
    m.update(hyps[20:], refs[20:])
    ids, vals = m.values()
    assert len(ids) == 50 and vals.shape == (50, len(RADGRAPH_COLUMNS))
    assert torch.equal(vals, radgraph_f1(hyps, refs))
    assert vals[:, 0].tolist() == pytest.approx([c["reward_main-87f11a1"][0] for c in CASES[:50]])
    assert m.compute().tolist() == pytest.approx(vals.mean(0).tolist())


def test_texts_through_an_annotator_and_empty_reports_score_zero() -> None:
    table = {"effusion": {"entities": {"1": {"tokens": "effusion", "label": "OBS-DP", "relations": []}}},
             "clear": {"entities": {"1": {"tokens": "clear", "label": "OBS-DA", "relations": []}}}}
    calls: list[list[str]] = []

    def annotator(texts: list[str]) -> list[dict]:
        calls.append(texts)
        return [table[t] for t in texts]

    m = RadGraphF1(annotator=annotator)
    m.update(["effusion", "clear", ""], ["effusion", "effusion", "clear"])
    vals = m.values()[1]
    assert vals[0, :3].tolist() == [1.0, 1.0, 1.0]
    assert vals[1, :3].tolist() == [0.0, 0.0, 0.0]
    assert vals[2].tolist() == [0.0] * 6  # empty hypothesis: F1RadGraph's 0, never annotated
    assert calls == [["effusion", "clear", "effusion", "effusion"]]


def test_bad_annotation_names_the_pair() -> None:
    bad = {"entities": {"1": {"tokens": "a", "label": "OBS-DP", "relations": [["modify", "9"]]}}}
    with pytest.raises(ValueError, match=r"unknown entity.*pair 0"):
        radgraph_f1([bad], [bad])
    with pytest.raises(ValueError, match="version"):
        RadGraphF1(version="1.0")


def test_model_refused_clearly_without_weights(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not hold the extracted 'radgraph' model"):
        load_annotator("radgraph", model_cache_dir=tmp_path / "absent")
    (tmp_path / "radgraph").mkdir()
    (tmp_path / "radgraph" / "config.json").write_text("{}")
    (tmp_path / "radgraph" / "weights.th").write_bytes(b"")
    try:
        import radgraph  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="needs the 'radgraph' package"):
            load_annotator("radgraph", model_cache_dir=tmp_path)
    m = RadGraphF1(model_cache_dir=str(tmp_path / "absent"))
    with pytest.raises((RuntimeError, FileNotFoundError), match="radgraph"):
        m.update(["effusion"], ["effusion"])
