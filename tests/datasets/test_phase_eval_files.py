"""The ``phase_eval_files`` dataset on generated folders: header or none, integer or named phases,
any frame step, the ``first_line`` rules, bad rows named, and a ``task=phase_recognition`` run
with ``model=predictions`` equal to ``cholec80_matlab_eval`` on the same sequences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medimg_bench.datasets import create
from medimg_bench.datasets.video import CHOLEC80_PHASES
from medimg_bench.metrics.phase_challenges import cholec80_matlab_eval


def _write(path: Path, frames, phases, header: bool, named: bool) -> None:
    lines = ["Frame\tPhase"] if header else []
    lines += [f"{f}\t{CHOLEC80_PHASES[p] if named else p}" for f, p in zip(frames, phases)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _videos(seed: int, n: int = 3):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lengths = rng.integers(5, 40, size=7)
        gt = np.repeat(np.arange(7), lengths)
        pred = gt.copy()
        flip = rng.random(gt.size) < 0.15
        pred[flip] = rng.integers(0, 7, size=int(flip.sum()))
        out.append((gt, pred))
    return out


def _layout(root: Path, videos, *, header: bool, named: bool, step: int) -> None:
    for k, (gt, pred) in enumerate(videos, start=41):
        frames = np.arange(gt.size) * step
        _write(root / "gt-phase" / f"video{k}-phase.txt", frames, gt, header, named)
        _write(root / "phase" / f"video{k}-phase.txt", frames, pred, header, named)


@pytest.mark.parametrize("header", [True, False], ids=["header", "no_header"])
@pytest.mark.parametrize("named", [True, False], ids=["named", "integer"])
@pytest.mark.parametrize("step", [1, 25, 5])
def test_reads_every_layout(tmp_path, header, named, step):
    videos = _videos(step)
    _layout(tmp_path, videos, header=header, named=named, step=step)
    ds = create("phase_eval_files", tmp_path)
    assert len(ds) == sum(g.size for g, _ in videos) and ds.classes == list(CHOLEC80_PHASES)
    s = ds[1]
    assert s["label"] == int(videos[0][0][1]) and s["meta"]["video_id"] == "video41"
    assert s["meta"]["frame_index"] == step and s["meta"]["timestamp"] == pytest.approx(step / 25)
    skipped = create("phase_eval_files", tmp_path, first_line="skip")
    # ReadPhaseLabel.m's rule: line 1 always goes; without a header that is each video's first frame
    assert len(skipped) == len(ds) - (0 if header else len(videos))


def test_first_line_keep_and_auto(tmp_path):
    _write(tmp_path / "gt-phase" / "video01-phase.txt", [0, 1, 2], [0, 1, 1], False, False)
    assert len(create("phase_eval_files", tmp_path, first_line="keep")) == 3
    assert len(create("phase_eval_files", tmp_path, first_line="auto")) == 3
    with pytest.raises(ValueError, match="first_line must be one of"):
        create("phase_eval_files", tmp_path, first_line="maybe")


@pytest.mark.parametrize("lines, match", [
    (["0\t0", "1\tNotAPhase"], "line 2: phase 'NotAPhase'"),
    (["0\t0", "1\t7"], r"class numbers \[0, 7\] fit neither"),
    (["0\t1", "1\t3"], "ambiguous; set dataset.options.index_base=0"),
    (["0\t0", "0\t1"], "frame 0 follows frame 0"),
    (["0\t0", "1 2 3"], "line 2: expected 'frame phase'"),
    (["Frame\tPhase"], "no frame lines"),
])
def test_bad_rows_are_named(tmp_path, lines, match):
    p = tmp_path / "gt-phase" / "video07-phase.txt"
    p.parent.mkdir(parents=True)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=match):
        create("phase_eval_files", tmp_path)


def test_one_based_numbers(tmp_path):
    p = tmp_path / "gt-phase" / "video01-phase.txt"
    p.parent.mkdir(parents=True)
    p.write_text("0\t1\n1\t7\n2\t4\n")
    assert create("phase_eval_files", tmp_path).manifest["label"].tolist() == [0, 6, 3]  # auto: 7 occurs
    (tmp_path / "gt-phase" / "video02-phase.txt").write_text("0\t2\n1\t3\n")  # alone: ambiguous
    assert create("phase_eval_files", tmp_path).manifest["label"].tolist() == [0, 6, 3, 1, 2]  # decided over all
    with pytest.raises(ValueError, match="ambiguous"):
        create("phase_eval_files", tmp_path, videos=["video02"])
    assert create("phase_eval_files", tmp_path, videos=["video02"], index_base=0).manifest["label"].tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"outside 0..6"):
        create("phase_eval_files", tmp_path, index_base=0)


def test_videos_pick_and_missing(tmp_path):
    _layout(tmp_path, _videos(0), header=True, named=False, step=25)
    ds = create("phase_eval_files", tmp_path, videos=[42, "video43"])
    assert sorted(set(ds.manifest["video_id"])) == ["video42", "video43"]
    with pytest.raises(FileNotFoundError, match="video99-phase.txt"):
        create("phase_eval_files", tmp_path, videos=[99])
    with pytest.raises(FileNotFoundError, match="no <video>-phase.txt"):
        create("phase_eval_files", tmp_path / "nothing")


@pytest.mark.parametrize("first_line", ["auto", "skip"])
def test_run_scores_the_folder_as_the_matlab_evaluation(tmp_path, first_line):
    from medimg_bench.runs import compose_config, run_config

    videos = _videos(11, n=4)
    _layout(tmp_path / "data", videos, header=False, named=False, step=25)
    out = tmp_path / "run"
    cfg = compose_config(["task=phase_recognition", "dataset=phase_eval_files", f"dataset.root={tmp_path / 'data'}",
                          f"dataset.options.first_line={first_line}", "model=predictions",
                          "model.options.root=${dataset.root}/phase", "metrics=phase_cholec80",
                          "bootstrap.n_resamples=0", "progress=false"])
    run_config(cfg, out)
    whole = json.loads((out / "summary.json").read_text())
    assert whole["n_excluded"] == 0  # stored frames are keyed (video, frame): none is an "unknown id"
    summary = whole["metrics"]
    cut = 1 if first_line == "skip" else 0
    ref = cholec80_matlab_eval([p[cut:] for _, p in videos], [g[cut:] for g, _ in videos], fps=1.0)
    got = summary["cholec80_jaccard_relaxed"]
    assert got["mean"]["value"] == pytest.approx(ref.jaccard, abs=1e-6)
    for j, name in enumerate(CHOLEC80_PHASES):
        assert got["per_class"][name]["value"] == pytest.approx(ref.per_phase["jaccard"][j], abs=1e-6)
    assert summary["cholec80_accuracy_relaxed"]["mean"]["value"] == pytest.approx(ref.accuracy, abs=1e-6)
    assert summary["cholec80_precision_relaxed"]["mean"]["value"] == pytest.approx(ref.precision, abs=1e-6)
