"""Run the Cholec80 MATLAB phase evaluation (``Main.m`` / ``Evaluate.m``) under GNU Octave on a
generated corpus of label sequences and store its outputs as fixtures for
``tests/metrics/test_video_cholec80.py``.

The scripts are those of github.com/YuemingJin/TMRNet, commit
6a0db472033c14d43d184f01f99f3fc80d9dfe00, folder ``code/eval/result/matlab-eval`` (the M2CAI16
challenge script "revised for cholec80", as TeCNO / TMRNet / Trans-SVNet evaluate). Nothing of
them is copied here: they are read from a local copy of that commit and run as they are.

    apt-get install -y octave octave-image
    git clone https://github.com/YuemingJin/TMRNet /tmp/TMRNet && git -C /tmp/TMRNet checkout 6a0db47
    python tools/phase_cholec80_octave.py --scripts /tmp/TMRNet/code/eval/result/matlab-eval \
        --out tests/metrics/data/phase_cholec80_octave.npz

Two parts: (1) ``Main.m`` unmodified (videos 41-80 read from ``../gt-phase`` and ``../phase``,
``fps = 1``) on several sets of 40 videos: per-video matrices after its clipping to 100 and its
aggregates; (2) ``Evaluate.m`` called on single videos at fps 0 (no relaxation), 1, 2.5 and 3 (a
window of 0, 10, 25 and 30 frames): its raw per-video outputs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.metrics._phase_corpus import cholec80_corpus  # noqa: E402

MAIN_OUT = ("jaccard", "prec", "rec", "acc", "meanJacc", "stdJacc", "meanPrec", "stdPrec",
            "meanRec", "stdRec", "meanAcc", "stdAcc", "meanJaccPerPhase", "meanPrecPerPhase",
            "meanRecPerPhase")


def _write_labels(path: Path, labels: np.ndarray) -> None:
    lines = ["Frame\tPhase"] + [f"{i}\t{int(v)}" for i, v in enumerate(labels)]
    path.write_text("\n".join(lines) + "\n")


# MATLAB's nanmean / nanstd (Statistics Toolbox), which Main.m calls and Octave 7 lacks (Octave
# Forge statistics 1.5 dropped them): the mean / sample standard deviation of the non-NaN values
# along the first non-singleton dimension (or ``dim``), NaN where none is left.
SHIMS = {
    "nanmean.m": """function y = nanmean(x, dim)
  if nargin < 2, dim = find(size(x) != 1, 1); if isempty(dim), dim = 1; end, end
  keep = ~isnan(x); x(~keep) = 0;
  y = sum(x, dim) ./ sum(keep, dim);
end
""",
    "nanstd.m": """function y = nanstd(x, flag, dim)
  if nargin < 3, dim = find(size(x) != 1, 1); if isempty(dim), dim = 1; end, end
  keep = ~isnan(x); n = sum(keep, dim); x0 = x; x0(~keep) = 0;
  m = sum(x0, dim) ./ n; d = (x - m) .^ 2; d(~keep) = 0;
  y = sqrt(sum(d, dim) ./ (n - 1));
end
""",
}


def _octave(script: str, cwd: Path) -> None:
    proc = subprocess.run(["octave", "--no-gui", "--quiet", "--eval", script], cwd=cwd,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"octave failed:\n{proc.stderr[-3000:]}")


def run_main(scripts: Path, videos: list[tuple[np.ndarray, np.ndarray]], work: Path) -> dict[str, np.ndarray]:
    """Main.m on 40 videos (gt, pred), 0-based phase labels."""
    from scipy.io import loadmat

    if work.exists():
        shutil.rmtree(work)
    (work / "gt-phase").mkdir(parents=True)
    (work / "phase").mkdir()
    (work / "eval").mkdir()
    for f in ("Main.m", "Evaluate.m", "ReadPhaseLabel.m"):
        shutil.copy(scripts / f, work / "eval" / f)
    for name, text in SHIMS.items():
        (work / "eval" / name).write_text(text)
    for k, (gt, pred) in zip(range(41, 81), videos):
        _write_labels(work / "gt-phase" / f"video{k}-phase.txt", gt)
        _write_labels(work / "phase" / f"video{k}-phase.txt", pred)
    names = " ".join(f"'{n}'" for n in MAIN_OUT)
    _octave(f"pkg load image; Main; save('-v7', 'out.mat', {names.replace(' ', ', ')});", work / "eval")
    mat = loadmat(work / "eval" / "out.mat")
    return {k: np.asarray(mat[k], dtype=np.float64) for k in MAIN_OUT}


def run_evaluate(scripts: Path, videos: list[tuple[np.ndarray, np.ndarray, float]], work: Path) -> np.ndarray:
    """Evaluate.m per video at its fps: rows [jaccard(7), prec(7), rec(7), acc] (1-based labels)."""
    from scipy.io import loadmat, savemat

    work.mkdir(parents=True, exist_ok=True)
    for f in ("Evaluate.m",):
        shutil.copy(scripts / f, work / f)
    cells = np.empty((len(videos), 3), dtype=object)
    for i, (gt, pred, fps) in enumerate(videos):
        cells[i, 0] = (gt + 1).astype(np.float64).reshape(1, -1)
        cells[i, 1] = (pred + 1).astype(np.float64).reshape(1, -1)
        cells[i, 2] = float(fps)
    savemat(work / "in.mat", {"cases": cells})
    _octave("pkg load image; load('in.mat'); out = zeros(size(cases, 1), 22); "
            "for i = 1:size(cases, 1); [j, p, r, a] = Evaluate(cases{i, 1}, cases{i, 2}, cases{i, 3}); "
            "out(i, :) = [j, p, r, a]; end; save('-v7', 'out.mat', 'out');", work)
    return np.asarray(loadmat(work / "out.mat")["out"], dtype=np.float64)


def _pack(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    return {"gt": np.concatenate([g for g, _ in pairs]).astype(np.int8),
            "pred": np.concatenate([p for _, p in pairs]).astype(np.int8),
            "lengths": np.asarray([len(g) for g, _ in pairs], dtype=np.int64)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scripts", type=Path, required=True, help="folder holding Main.m, Evaluate.m, ReadPhaseLabel.m")
    ap.add_argument("--out", type=Path, default=REPO / "tests/metrics/data/phase_cholec80_octave.npz")
    ap.add_argument("--sets", type=int, default=6, help="sets of 40 videos run through Main.m")
    ap.add_argument("--single", type=int, default=400, help="single videos run through Evaluate.m")
    args = ap.parse_args()
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(args.sets):
            videos = cholec80_corpus(40, seed=100 + s)
            res = run_main(args.scripts, videos, Path(tmp) / f"main{s}")
            for k, v in _pack(videos).items():
                out[f"main{s}_{k}"] = v
            for k, v in res.items():
                out[f"main{s}_out_{k}"] = v
        fps_choices = np.array([0.0, 1.0, 2.5, 3.0])
        videos = cholec80_corpus(args.single, seed=7)
        fps = fps_choices[np.arange(len(videos)) % len(fps_choices)]
        raw = run_evaluate(args.scripts, [(g, p, f) for (g, p), f in zip(videos, fps)], Path(tmp) / "single")
        for k, v in _pack(videos).items():
            out[f"single_{k}"] = v
        out["single_fps"] = fps
        out["single_out"] = raw
    out["sets"] = np.asarray(args.sets)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **out)
    print(f"wrote {args.out}: {args.sets} x 40 videos through Main.m, {len(videos)} through Evaluate.m")


if __name__ == "__main__":
    main()
