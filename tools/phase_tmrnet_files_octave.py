"""Run TMRNet's ``Main.m`` (with its ``Evaluate.m`` and ``ReadPhaseLabel.m``) under GNU Octave on
the authors' own per-frame files and store what it computes and prints as
``tests/datasets/data/cholec80_tmrnet_main_m.json`` (numbers only). The tests of the
``phase_eval_files`` dataset and the ``cholec80_tmrnet_files`` card compare ours with it.

Source of the scripts and the files: github.com/YuemingJin/TMRNet at commit
ab1b51ca01bc3254696a60a65c6c2352a6fe3be4, ``code/eval/matlab-phase/`` (as kept in
``../shared/data/cholec80_tmrnet``, see its PROVENANCE.md). The three scripts are byte-identical
to those of commit 6a0db47 (``code/eval/result/matlab-eval/``) that ``metrics=phase_cholec80``
already reproduces. Nothing of them is copied into this repository: they are copied to a
temporary folder beside links to ``gt-phase/`` and ``phase/`` and run there unmodified; Octave 7
lacks MATLAB's ``nanmean`` / ``nanstd``, given as the same shims as ``tools/phase_cholec80_octave.py``.

    apt-get install -y octave octave-image
    python tools/phase_tmrnet_files_octave.py --data ../shared/data/cholec80_tmrnet
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tools.phase_cholec80_octave import SHIMS  # noqa: E402

OUT = REPO / "tests" / "datasets" / "data" / "cholec80_tmrnet_main_m.json"
COMMIT = "ab1b51ca01bc3254696a60a65c6c2352a6fe3be4"
SAVED = ("jaccard", "prec", "rec", "acc", "meanJaccPerPhase", "meanPrecPerPhase", "meanRecPerPhase",
         "meanjaccphase", "stdjaccphase", "meanprecphase", "stdprecphase", "meanrecphase", "stdrecphase",
         "meanJacc", "stdJacc", "meanPrec", "stdPrec", "meanRec", "stdRec", "meanAcc", "stdAcc")


def _num(x: float) -> float | str:
    return x if np.isfinite(x) else str(x)


def run(data: Path) -> dict:
    from scipy.io import loadmat

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "code").mkdir()
        for f in ("Main.m", "Evaluate.m", "ReadPhaseLabel.m"):
            shutil.copy(data / "code" / f, work / "code" / f)
        for name, text in SHIMS.items():
            (work / "code" / name).write_text(text)
        for d in ("gt-phase", "phase"):
            (work / d).symlink_to((data / d).resolve())
        names = ", ".join(f"'{n}'" for n in SAVED)
        proc = subprocess.run(["octave", "--no-gui", "--quiet", "--eval",
                               f"pkg load image; Main; save('-v7', 'out.mat', {names});"],
                              cwd=work / "code", capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"octave failed:\n{proc.stderr[-3000:]}")
        mat = loadmat(work / "code" / "out.mat")
        version = subprocess.run(["octave", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    out = {k: np.asarray(mat[k], dtype=np.float64) for k in SAVED}
    printed = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    scripts = {f: hashlib.sha256((data / "code" / f).read_bytes()).hexdigest()
               for f in ("Main.m", "Evaluate.m", "ReadPhaseLabel.m")}
    return {
        "source": {"repo": "YuemingJin/TMRNet", "commit": COMMIT, "path": "code/eval/matlab-phase/",
                   "scripts_sha256": scripts, "octave": version,
                   "shims": "nanmean / nanstd as tools/phase_cholec80_octave.py"},
        "generated_by": "tools/phase_tmrnet_files_octave.py",
        "videos": [f"video{k}" for k in range(41, 81)],
        "phases": ["Preparation", "CalotTriangleDissection", "ClippingCutting", "GallbladderDissection",
                   "GallbladderPackaging", "CleaningCoagulation", "GallbladderRetraction"],
        "saved": {k: [_num(float(x)) for x in v.ravel(order="C")] if v.size > 1 else _num(float(v.ravel()[0]))
                  for k, v in out.items()},
        "shapes": {k: list(v.shape) for k, v in out.items()},
        "printed": printed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "cholec80_tmrnet")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    doc = run(args.data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(doc["printed"][-4:]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
