"""Run the PitVis-2023 step-recognition evaluation (``helper_scripts/evaluation_steps.py`` of
github.com/dreets/pitvis, commit b1cb307629d2cdf566893f0752d475629427f44d, the challenge
organisers' repository) on a generated corpus of per-second step sequences and store its values
as fixtures for ``tests/metrics/test_video_pitvis.py``. Nothing of it is copied: the module is
imported from a local copy of that commit.

    git clone https://github.com/dreets/pitvis /tmp/pitvis && git -C /tmp/pitvis checkout b1cb307
    python tools/phase_pitvis_eval.py --scripts /tmp/pitvis/helper_scripts \
        --out tests/metrics/data/phase_pitvis_eval.npz

The script's step ids are the raw ``int_step`` values (-1 background, 1..14); the corpus uses the
``pitvis`` loader's labels (0 = background, 1..14), mapped back to -1 before the call. Per video:
``calculate_steps_evaluation_metric`` (the challenge score, (F1 + edit) / 2) and
``calculate_edit_score`` on the script's own cleaned lists; F1 = 2 * score - edit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.metrics._phase_corpus import pitvis_corpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scripts", type=Path, required=True, help="folder holding evaluation_steps.py")
    ap.add_argument("--out", type=Path, default=REPO / "tests/metrics/data/phase_pitvis_eval.npz")
    ap.add_argument("--videos", type=int, default=600)
    args = ap.parse_args()
    sys.path.insert(0, str(args.scripts))
    import sklearn
    from evaluation_steps import (
        calculate_edit_score,
        calculate_steps_evaluation_metric,
        clean_steps,
    )

    videos = pitvis_corpus(args.videos, seed=11)
    rows = []
    for gt, pred in videos:
        raw_gt = [int(v) if v > 0 else -1 for v in gt]
        raw_pred = [int(v) if v > 0 else -1 for v in pred]
        t, p = clean_steps(ls_trues=raw_gt, ls_preds=raw_pred)
        if not t:  # the script divides by zero on a video with only excluded steps
            rows.append((np.nan, np.nan))
            continue
        score = calculate_steps_evaluation_metric(ls_trues=raw_gt, ls_preds=raw_pred)
        edit = calculate_edit_score(ls_trues=t, ls_preds=p, bl_norm=True)
        rows.append((score, edit))
    out = np.asarray(rows, dtype=np.float64)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        gt=np.concatenate([g for g, _ in videos]).astype(np.int8),
        pred=np.concatenate([p for _, p in videos]).astype(np.int8),
        lengths=np.asarray([len(g) for g, _ in videos]),
        score=out[:, 0], edit=out[:, 1], f1=2 * out[:, 0] - out[:, 1],
        sklearn_version=np.asarray(sklearn.__version__),
    )
    print(f"wrote {args.out}: {len(videos)} videos (scikit-learn {sklearn.__version__})")


if __name__ == "__main__":
    main()
