"""Time the phase-recognition metrics on 80 videos x 2,000 frames: ours vs the challenges' own code.

Sides, each on the same generated sequences (``tests/metrics/_phase_corpus.py`` shapes,
resampled to ``--frames`` per video):

* Cholec80: ``cholec80_matlab_eval`` (relaxed, fps 1) vs ``Evaluate.m`` per video + the
  aggregation under GNU Octave (``--matlab-eval DIR``: TMRNet's ``code/eval/result/matlab-eval``
  at 6a0db47; ``octave`` and ``octave-image`` installed). The Octave side is timed inside Octave
  (``tic``/``toc`` around the 80 calls), so start-up and file writing are not counted;
* PitVis: ``pitvis_eval`` vs ``calculate_steps_evaluation_metric`` of ``evaluation_steps.py``
  (``--pitvis-eval DIR``: dreets/pitvis ``helper_scripts`` at b1cb307), per video;
* the stateful path of ``task=phase_recognition``: ``cholec80_phase`` fed 160,000 frames in
  batches of 256 with the loaders' meta, then its per-video tables (ours only).

Run: ``python benchmarks/phase_metrics.py [--videos 80] [--frames 2000] [--repeats 3]
[--matlab-eval DIR] [--pitvis-eval DIR]``. Prints seconds per side (best of ``--repeats``; the
machine is shared) and the ratio peer / ours (> 1: we are faster). A side whose code is not
given is skipped.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import best_of  # noqa: E402

from medimg_bench.metrics.phase_challenges import cholec80_matlab_eval, pitvis_eval  # noqa: E402
from medimg_bench.metrics.phase_frames import Cholec80Phase  # noqa: E402
from tests.metrics._phase_corpus import cholec80_corpus, pitvis_corpus  # noqa: E402


def _resize(pairs: list[tuple[np.ndarray, np.ndarray]], frames: int) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for g, p in pairs:
        idx = np.minimum((np.arange(frames) * g.size / frames).astype(int), g.size - 1)
        out.append((g[idx], p[idx]))
    return out




def octave_seconds(scripts: Path, videos: list[tuple[np.ndarray, np.ndarray]], repeats: int) -> float:
    from scipy.io import loadmat, savemat

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(scripts / "Evaluate.m", Path(tmp) / "Evaluate.m")
        cells = np.empty((len(videos), 2), dtype=object)
        for i, (g, p) in enumerate(videos):
            cells[i, 0], cells[i, 1] = (g + 1.0).reshape(1, -1), (p + 1.0).reshape(1, -1)
        savemat(Path(tmp) / "in.mat", {"cases": cells})
        script = ("pkg load image; load('in.mat'); n = size(cases, 1); best = inf; "
                  f"for r = 1:{repeats}; tic; J = zeros(7, n); P = J; R = J; A = zeros(1, n); "
                  "for i = 1:n; [J(:, i), P(:, i), R(:, i), A(i)] = Evaluate(cases{i, 1}, cases{i, 2}, 1); end; "
                  "J(J > 100) = 100; P(P > 100) = 100; R(R > 100) = 100; "
                  "m = [mean(A), mean(J(~isnan(J)))]; best = min(best, toc); end; "
                  "save('-v7', 'out.mat', 'best');")
        proc = subprocess.run(["octave", "--no-gui", "--quiet", "--eval", script], cwd=tmp,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        return float(loadmat(Path(tmp) / "out.mat")["best"].item())


def frame_batches(videos: list[tuple[np.ndarray, np.ndarray]], size: int = 256) -> list[tuple]:
    """(scores, targets, meta, ids) batches as the engine hands them to a metric."""
    rows = [(f"video{i}", j) for i, (g, _) in enumerate(videos) for j in range(g.size)]
    pred = np.concatenate([p for _, p in videos])
    gt = torch.from_numpy(np.concatenate([g for g, _ in videos]))
    scores = torch.nn.functional.one_hot(torch.from_numpy(pred), 7).float()
    out = []
    for s in range(0, len(rows), size):
        chunk = rows[s : s + size]
        meta = [{"video_id": v, "frame_index": j * 25, "timestamp": float(j)} for v, j in chunk]
        out.append((scores[s : s + size], gt[s : s + size], meta, [f"{v}_{j:06d}" for v, j in chunk]))
    return out


def stateful(batches: list[tuple]) -> None:
    m = Cholec80Phase(num_classes=7)
    for scores, gt, meta, ids in batches:
        m.update(scores, gt, meta, ids=ids)
    m.metric_values()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", type=int, default=80)
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--matlab-eval", type=Path, default=None)
    ap.add_argument("--pitvis-eval", type=Path, default=None)
    args = ap.parse_args()
    chol = _resize(cholec80_corpus(args.videos, seed=1), args.frames)
    pit = _resize(pitvis_corpus(args.videos, seed=2), args.frames)
    print(f"{args.videos} videos x {args.frames} frames, best of {args.repeats}")
    ours = best_of(lambda: cholec80_matlab_eval([p for _, p in chol], [g for g, _ in chol], fps=1.0), args.repeats)
    line = f"cholec80 (relaxed, Main.m rules): ours {ours:.3f} s"
    if args.matlab_eval:
        peer = octave_seconds(args.matlab_eval, chol, args.repeats)
        line += f" | Octave Evaluate.m {peer:.3f} s | ratio {peer / ours:.1f}x"
    print(line)
    ours = best_of(lambda: pitvis_eval([p for _, p in pit], [g for g, _ in pit]), args.repeats)
    line = f"pitvis (F1, edit, score):        ours {ours:.3f} s"
    if args.pitvis_eval:
        sys.path.insert(0, str(args.pitvis_eval))
        from evaluation_steps import calculate_steps_evaluation_metric

        raw = [([int(v) if v > 0 else -1 for v in g], [int(v) if v > 0 else -1 for v in p]) for g, p in pit]
        peer = best_of(lambda: [calculate_steps_evaluation_metric(ls_trues=t, ls_preds=q) for t, q in raw], args.repeats)
        line += f" | evaluation_steps.py {peer:.3f} s | ratio {peer / ours:.1f}x"
    print(line)
    batches = frame_batches(chol)
    secs = best_of(lambda: stateful(batches), args.repeats)
    n = args.videos * args.frames
    print(f"cholec80_phase stateful (update in batches of 256 + per-video tables): {secs:.3f} s "
          f"({n / secs:,.0f} frames/s)")


if __name__ == "__main__":
    main()
