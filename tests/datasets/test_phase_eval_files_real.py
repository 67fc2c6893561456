"""The TMRNet authors' Cholec80 files in ../shared/data/cholec80_tmrnet, read by the
``phase_eval_files`` dataset and scored by ``metrics.phase_challenges``, against their own
``Main.m`` run under GNU Octave on the same files (``tools/phase_tmrnet_files_octave.py``;
fixture ``data/cholec80_tmrnet_main_m.json``): every per-video, per-phase and summary figure,
the ± included, to 1e-10. Then the ``cholec80_tmrnet_files`` card, reproduced end to end.
Skipped when the folder is absent (a fresh clone has no ../shared)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.baselines.cards import load_card
from medimg_bench.baselines.reproduce import reproduce
from medimg_bench.datasets import create
from medimg_bench.datasets.video.phase_eval_files import read_phase_file
from medimg_bench.metrics.phase_challenges import cholec80_matlab_eval

FIXTURE = json.loads((Path(__file__).parent / "data" / "cholec80_tmrnet_main_m.json").read_text())
ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "cholec80_tmrnet"
real = pytest.mark.skipif(not (ROOT / "gt-phase" / "video41-phase.txt").is_file(),
                          reason=f"the TMRNet files are not in {ROOT} (../shared/data is absent)")
TOL = 1e-10


def _saved(key: str) -> np.ndarray:
    v = FIXTURE["saved"][key]
    vals = [float(x) for x in (v if isinstance(v, list) else [v])]
    return np.asarray(vals).reshape(FIXTURE["shapes"][key])


def _sequences(first_line: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    ds = create("phase_eval_files", ROOT, first_line=first_line)
    gts, preds = [], []
    for vid in FIXTURE["videos"]:
        rows = ds.manifest[ds.manifest["video_id"] == vid]
        gts.append(rows["label"].to_numpy())
        pred = read_phase_file(ROOT / "phase" / f"{vid}-phase.txt", classes=ds.classes, first_line=first_line)
        assert np.array_equal(pred["frame_index"].to_numpy(), rows["frame_index"].to_numpy())
        preds.append(pred["label"].to_numpy())
    return gts, preds


@real
def test_the_scripts_are_those_the_fixture_ran():
    for name, digest in FIXTURE["source"]["scripts_sha256"].items():
        assert hashlib.sha256((ROOT / "code" / name).read_bytes()).hexdigest() == digest


@real
def test_every_figure_equals_main_m_under_octave():
    gts, preds = _sequences("skip")
    ev = cholec80_matlab_eval(preds, gts, fps=1.0)
    for ours, key, short in (("jaccard", "jaccard", "Jacc"), ("precision", "prec", "Prec"), ("recall", "rec", "Rec")):
        np.testing.assert_allclose(ev.per_video[ours].T * 100, _saved(key), rtol=0, atol=TOL)  # 7 x 40, NaN where absent
        np.testing.assert_allclose(ev.per_phase[ours] * 100, _saved(f"mean{short}PerPhase").ravel(), rtol=0, atol=TOL)
    np.testing.assert_allclose(ev.per_video["accuracy"] * 100, _saved("acc").ravel(), rtol=0, atol=TOL)
    for ours, key in (("jaccard", "Jacc"), ("precision", "Prec"), ("recall", "Rec"), ("accuracy", "Acc")):
        assert abs(getattr(ev, ours) * 100 - _saved(f"mean{key}").item()) < TOL, ours
        assert abs(ev.std[ours] * 100 - _saved(f"std{key}").item()) < TOL, ours
    # per-phase ± (nanstd over videos), which Main.m computes but does not print
    for ours, key in (("jaccard", "jacc"), ("precision", "prec"), ("recall", "rec")):
        table = ev.per_video[ours] * 100
        std = np.array([np.nanstd(c, ddof=1) for c in table.T])
        np.testing.assert_allclose(std, _saved(f"std{key}phase").ravel(), rtol=0, atol=TOL)


@real
def test_printed_table_is_the_rounded_figures():
    printed = "\n".join(FIXTURE["printed"])
    gts, preds = _sequences("skip")
    ev = cholec80_matlab_eval(preds, gts, fps=1.0)
    assert f"Mean jaccard: {ev.jaccard * 100:5.2f} +- {ev.std['jaccard'] * 100:5.2f}" in printed
    assert f"Mean accuracy: {ev.accuracy * 100:5.2f} +- {ev.std['accuracy'] * 100:5.2f}" in printed


@real
def test_scoring_every_frame_differs_from_the_script():
    """Without ReadPhaseLabel.m's dropped line (first_line=auto: these files have no header) the
    first second of each video counts, and the figures move: the card must say first_line=skip."""
    gts, preds = _sequences("auto")
    ev = cholec80_matlab_eval(preds, gts, fps=1.0)
    assert abs(ev.jaccard * 100 - _saved("meanJacc").item()) > 1e-3


def test_card_values_are_the_scripts_output():
    card = load_card("cholec80_tmrnet_files")
    assert "NOT the paper" in card["title"] and "first_line=skip" in " ".join(card["overrides"])
    by = {m["metric"]: m for m in card["metrics"]}
    for metric, key, mean in (("cholec80_jaccard_relaxed", "meanJaccPerPhase", "meanJacc"),
                              ("cholec80_precision_relaxed", "meanPrecPerPhase", "meanPrec"),
                              ("cholec80_recall_relaxed", "meanRecPerPhase", "meanRec")):
        pub = by[metric]["published"]
        assert [pub[p] for p in FIXTURE["phases"]] == list(_saved(key).ravel()) and pub["mean"] == _saved(mean).item()
    assert by["cholec80_accuracy_relaxed"]["published"] == _saved("meanAcc").item()


@real
def test_reproduce_the_card(tmp_path):
    out = reproduce("cholec80_tmrnet_files", [f"dataset.root={ROOT}", "bootstrap.n_resamples=0", "progress=false"],
                    run_dir=tmp_path)
    assert len(out["rows"]) == 25
    bad = [(r["metric"], r["class"], r["published"], r["measured"]) for r in out["rows"] if r["verdict"] != "reproduced"]
    assert not bad, bad
