"""task=phase_recognition end to end: official-layout Cholec80 / PitVis folders built here,
per-frame predictions on disk or a classifier, metrics per video as the challenges compute them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from medimg_bench.datasets.video.cholec80 import CHOLEC80_PHASES
from medimg_bench.metrics.phase_challenges import cholec80_matlab_eval, pitvis_eval
from tests.datasets._video_layouts import (
    write_cholec80_annotations,
    write_pitvis_annotations,
    write_pitvis_map_steps,
)
from tests.metrics._phase_corpus import cholec80_corpus, pitvis_corpus


def _png(path: Path, value: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, dtype=np.uint8)).save(path)


def _cholec80(root: Path, videos: list[tuple[np.ndarray, np.ndarray]], *, frames: bool = False) -> None:
    """``phase_annotations/videoNN-phase.txt`` at 25 fps (one label per second of ``gt``), tool
    annotations every 25th frame, and optionally the 1-fps frames as PNGs."""
    for n, (gt, _) in zip(range(41, 81), videos):
        per_frame = np.repeat(gt, 25)
        write_cholec80_annotations(root, n, [CHOLEC80_PHASES[p] for p in per_frame],
                                   {i: (1, 0, 1, 0, 0, 0, 0) for i in range(0, per_frame.size, 25)})
        if frames:
            for s, p in enumerate(gt):
                _png(root / "frames" / f"video{n}" / f"{s * 25:06d}.png", 30 * int(p))


def _run(tmp_path: Path, overrides: list[str], name: str = "run") -> dict:
    from medimg_bench.runs import compose_config, run_config

    cfg = compose_config(["task=phase_recognition", "bootstrap.n_resamples=200", "num_workers=0", *overrides])
    run_config(cfg, tmp_path / name)
    return json.loads((tmp_path / name / "summary.json").read_text())


def test_cholec80_predictions_on_disk_equal_main_m(tmp_path):
    videos = cholec80_corpus(6, seed=21)
    root = tmp_path / "cholec80"
    _cholec80(root, videos)
    rows = [{"video": f"video{n}", "frame": s * 25, "phase": CHOLEC80_PHASES[p]}
            for n, (_, pred) in zip(range(41, 81), videos) for s, p in enumerate(pred)]
    pd.DataFrame(rows).sample(frac=1.0, random_state=0).to_csv(tmp_path / "predictions.csv", index=False)
    summary = _run(tmp_path, ["dataset=cholec80", f"dataset.root={root}", "dataset.options.videos=[41,42,43,44,45,46]",
                              "dataset.options.frame_template='none/{video}/{frame}.png'",  # never read
                              "model=predictions", f"model.options.root={tmp_path / 'predictions.csv'}",
                              "metrics=phase_cholec80"])
    n_frames = sum(len(g) for g, _ in videos)
    assert summary["n_failed"] == 0
    # samples.parquet: a row per frame plus the per-video metric rows (id = video id)
    assert summary["n_samples"] == n_frames + 6
    assert summary["phase_videos"] == {"n_videos": 6, "n_frames": n_frames}
    ref = cholec80_matlab_eval([p for _, p in videos], [g for g, _ in videos], fps=1.0)
    strict = cholec80_matlab_eval([p for _, p in videos], [g for g, _ in videos], relaxed=False)
    m = summary["metrics"]
    for key, value in (("jaccard", ref.jaccard), ("precision", ref.precision), ("recall", ref.recall),
                       ("accuracy", ref.accuracy)):
        assert m[f"cholec80_{key}_relaxed"]["mean"]["value"] == pytest.approx(value, abs=1e-6), key
    assert m["cholec80_accuracy"]["mean"]["value"] == pytest.approx(strict.accuracy, abs=1e-6)
    jac = m["cholec80_jaccard_relaxed"]["per_class"]
    for k, name in enumerate(CHOLEC80_PHASES):
        want = ref.per_phase["jaccard"][k]
        assert (jac[name]["mean"] is None) if np.isnan(want) else jac[name]["mean"] == pytest.approx(want, abs=1e-6)
    # CIs resample videos: 6 videos, an interval around the mean
    acc = m["cholec80_accuracy_relaxed"]["mean"]
    assert acc["ci_low"] < acc["value"] < acc["ci_high"]
    assert m["phase_edit"]["per_class"]["0"]["n"] == 6
    samples = pd.read_parquet(next((tmp_path / "run").glob("samples.parquet")))
    assert {"video_id", "frame_index", "label", "pred"} <= set(samples.columns)


def test_pitvis_layout_by_time_with_scores(tmp_path):
    videos = pitvis_corpus(4, seed=5)
    root = tmp_path / "pitvis"
    write_pitvis_map_steps(root, [(-1, "background"), *((i, f"s{i}") for i in range(1, 15))])
    rows = []
    for n, (gt, pred) in enumerate(videos, start=1):
        write_pitvis_annotations(root, n, [(t, -1 if s == 0 else int(s), 0, -1) for t, s in enumerate(gt)])
        scores = np.eye(15)[pred] * 0.9 + 0.1 / 15
        for t, s in enumerate(scores):
            rows.append({"video": f"video_{n:02d}", "time": float(t), **{f"c{k}": s[k] for k in range(15)}})
    pd.DataFrame(rows).to_parquet(tmp_path / "preds.parquet")
    summary = _run(tmp_path, ["dataset=pitvis", f"dataset.root={root}",
                              "dataset.options.frame_template='f/{video}/{time}.png'",
                              "model=predictions", f"model.options.root={tmp_path / 'preds.parquet'}",
                              f"model.options.classes=[{','.join(f'c{k}' for k in range(15))}]",
                              "metrics=phase_pitvis"])
    ref = pitvis_eval([p for _, p in videos], [g for g, _ in videos])
    assert summary["metrics"]["pitvis_score"]["mean"]["value"] == pytest.approx(ref["score"], abs=1e-6)
    assert summary["metrics"]["pitvis_f1"]["mean"]["value"] == pytest.approx(ref["f1"], abs=1e-6)


def test_missing_frame_prediction_fails_that_frame_naming_it(tmp_path):
    videos = cholec80_corpus(2, seed=4)
    root = tmp_path / "cholec80"
    _cholec80(root, videos)
    rows = [{"video": f"video{n}", "frame": s * 25, "phase": int(p)}
            for n, (_, pred) in zip(range(41, 81), videos) for s, p in enumerate(pred)]
    pd.DataFrame(rows[1:]).to_csv(tmp_path / "predictions.csv", index=False)  # video41's first frame lacks one
    summary = _run(tmp_path, ["dataset=cholec80", f"dataset.root={root}", "dataset.options.videos=[41,42]",
                              "dataset.options.frame_template='x/{frame}.png'", "model=predictions",
                              f"model.options.root={tmp_path / 'predictions.csv'}", "metrics=phase"])
    assert summary["n_failed"] == 1 and summary["failed_ids"] == ["video41_000000"]
    samples = pd.read_parquet(tmp_path / "run" / "samples.parquet")
    err = samples.loc[samples["status"] == "failed", "error"].iloc[0]
    assert "video41" in err and "frame 0" in err and "predictions.csv" in err


@pytest.mark.parametrize("table, message", [
    ({"video": ["video41", "video41"], "frame": [0, 0], "phase": [1, 2]}, "two rows at frame 0"),
    ({"video": ["video41"], "frame": ["x"], "phase": [1]}, "row 2: frame is not a number"),
    ({"video": ["video41"], "frame": [0], "phase": ["Nope"]}, "row 2: phase 'Nope'"),
    ({"video": ["video41"], "time": [0.0], "a": [0.5]}, r"score columns \[.a.\] are not classes"),
])
def test_bad_prediction_tables_named(tmp_path, table, message):
    from medimg_bench.registry import create_model

    path = tmp_path / "predictions.csv"
    pd.DataFrame(table).to_csv(path, index=False)
    with pytest.raises(ValueError, match=message) as err:
        model = create_model("predictions", root=str(path), num_classes=7, classes=None)
        model.bind_dataset(type("D", (), {"classes": list(CHOLEC80_PHASES)})())
    assert "predictions.csv" in str(err.value)


def test_a_classifier_predicts_frames(tmp_path):
    """Any classification adapter: frames from PNGs (pre-extracted layout), trained briefly with
    the task's cross-entropy (the training split is the same three videos: ``videos`` wins)."""
    videos = cholec80_corpus(3, seed=8)
    videos = [(g[:40], p[:40]) for g, p in videos]
    root = tmp_path / "cholec80"
    _cholec80(root, videos, frames=True)
    summary = _run(tmp_path, ["dataset=cholec80", f"dataset.root={root}", "dataset.options.videos=[41,42,43]",
                              "dataset.split=all", "dataset.options.frame_template='frames/video{video}/{frame:06d}.png'",
                              "model=timm_resnet10t", "metrics=phase_cholec80", "batch_size=32",
                              "train.enabled=true", "train.max_steps=3", "train.batch_size=16"])
    assert summary["n_failed"] == 0 and summary["phase_videos"]["n_frames"] == sum(len(g) for g, _ in videos)
    acc = summary["metrics"]["cholec80_accuracy_relaxed"]["mean"]["value"]
    assert 0.0 <= acc <= 1.0
    assert (tmp_path / "run" / "plots" / "phase_ribbons.png").exists()


def test_clip_datasets_are_refused(tmp_path):
    import torch

    from medimg_bench.registry import create_task

    task = create_task("phase_recognition")
    with pytest.raises(ValueError, match="single frames"):
        task.metric_inputs({"label": torch.zeros(2, 4, dtype=torch.long)}, {"probs": torch.rand(2, 7)})
    with pytest.raises(ValueError, match="multilabel"):
        create_task("phase_recognition", multilabel=True)


def test_video_frames_folders_with_generic_metrics(tmp_path):
    """Any frame folders + CSV (``video_frames``), predictions by time, the generic metrics."""
    from medimg_bench.metrics.video import phase_metrics

    videos = [(g[:60], p[:60]) for g, p in cholec80_corpus(3, seed=12)]
    root = tmp_path / "frames"
    rows, preds = [], []
    for n, (gt, pred) in enumerate(videos):
        for s in range(gt.size)[::-1]:  # rows out of order: the loader sorts by time
            rows.append({"video": f"case{n}", "frame": f"case{n}/{s:04d}.png", "label": f"p{gt[s]}", "t": 0.5 * s})
            preds.append({"video": f"case{n}", "time": 0.5 * s, "phase": f"p{pred[s]}"})
    root.mkdir()
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    pd.DataFrame(preds).to_csv(tmp_path / "predictions.csv", index=False)
    classes = [f"p{k}" for k in range(7)]
    summary = _run(tmp_path, ["dataset=video_frames", f"dataset.root={root}", "dataset.split=null",
                              "dataset.options.time_column=t", f"dataset.options.classes=[{','.join(classes)}]",
                              "model=predictions", f"model.options.root={tmp_path / 'predictions.csv'}",
                              "metrics=phase"])
    ref = phase_metrics([p for _, p in videos], [g for g, _ in videos], num_classes=7)
    assert summary["n_failed"] == 0
    assert summary["metrics"]["phase_accuracy"]["mean"]["value"] == pytest.approx(ref.accuracy, abs=1e-6)
    assert summary["metrics"]["phase_edit"]["mean"]["value"] == pytest.approx(ref.edit, abs=1e-6)
    assert summary["metrics"]["phase_jaccard"]["mean"]["value"] == pytest.approx(ref.jaccard, abs=1e-6)


def test_cholec80_phase_txt_folder_as_tmrnet_exports(tmp_path):
    """A folder of ``videoNN-phase.txt`` (``25·k<TAB>label``, no header: TMRNet's export)."""
    videos = cholec80_corpus(3, seed=30)
    root = tmp_path / "cholec80"
    _cholec80(root, videos)
    out = tmp_path / "phase"
    out.mkdir()
    for n, (_, pred) in zip(range(41, 81), videos):
        (out / f"video{n}-phase.txt").write_text("".join(f"{25 * k}\t{int(p)}\n" for k, p in enumerate(pred)))
    summary = _run(tmp_path, ["dataset=cholec80", f"dataset.root={root}", "dataset.options.videos=[41,42,43]",
                              "dataset.options.frame_template='x/{frame}.png'", "model=predictions",
                              f"model.options.root={out}", "metrics=phase_cholec80"])
    ref = cholec80_matlab_eval([p for _, p in videos], [g for g, _ in videos], fps=1.0)
    assert summary["n_failed"] == 0
    assert summary["metrics"]["cholec80_jaccard_relaxed"]["mean"]["value"] == pytest.approx(ref.jaccard, abs=1e-6)
    (out / "video41-phase.txt").write_text("Frame\tPhase\n0\t1\n25\t1 2\n")
    from medimg_bench.registry import create_model

    with pytest.raises(ValueError, match=r"video41-phase.txt' line 3: expected 'frame phase'"):
        create_model("predictions", root=str(out), num_classes=7)


def test_score_columns_matched_to_classes_by_name(tmp_path):
    import torch

    from medimg_bench.registry import create_model

    names = list(CHOLEC80_PHASES)
    shuffled = names[::-1]
    table = {"video": ["video41"], "frame": [25], **{n: [float(names.index(n) == 2)] for n in shuffled}}
    pd.DataFrame(table).to_csv(tmp_path / "p.csv", index=False)
    model = create_model("predictions", root=str(tmp_path / "p.csv"), num_classes=7)
    model.bind_dataset(type("D", (), {"classes": names})())
    out = model.predict({"id": ["a"], "meta": [{"video_id": "video41", "frame_index": 25}]})
    assert int(torch.argmax(out["probs"][0])) == 2


def test_run_page_of_stored_phase_labels(tmp_path, caplog):
    """Stored per-frame labels have no scores (NaN): the run page is still written (it raised
    "idxmax with skipna=True encountered all NA" on a real Cholec80 run), with the videos worst
    first by frame accuracy and the frames predicted wrong."""
    videos = cholec80_corpus(3, seed=8)
    root = tmp_path / "cholec80"
    _cholec80(root, videos)
    rows = [{"video": f"video{n}", "frame": s * 25, "phase": CHOLEC80_PHASES[p]}
            for n, (_, pred) in zip(range(41, 81), videos) for s, p in enumerate(pred)]
    pd.DataFrame(rows).to_csv(tmp_path / "predictions.csv", index=False)
    _run(tmp_path, ["dataset=cholec80", f"dataset.root={root}", "dataset.options.videos=[41,42,43]",
                    "dataset.options.frame_template='none/{video}/{frame}.png'",
                    "model=predictions", f"model.options.root={tmp_path / 'predictions.csv'}",
                    "metrics=phase_cholec80"])
    assert "report.html not written" not in caplog.text
    page = (tmp_path / "run" / "report.html").read_text()
    acc = {f"video{n}": float(np.mean(np.asarray(g) == np.asarray(p))) for n, (g, p) in zip(range(41, 81), videos)}
    worst = min(acc, key=acc.get)
    assert "Videos, worst first" in page
    assert page.index(worst) < page.index(max(acc, key=acc.get))
    assert f"{acc[worst]:.3f}" in page
