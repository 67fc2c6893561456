"""Fixtures for ``medimg_bench.metrics.verse`` from the official VerSe evaluation code.

Runs ``get_hits`` of ``anjany/verse`` (``utils/eval_utilities.py`` at commit
02b292b86021a8873043124982f5f58da9ba1cb8) on a generated corpus of ground-truth / predicted
centroid sets and stores inputs and outputs (numbers only) in
``tests/metrics/data/verse_get_hits.npz``.

Re-run::

    git --git-dir=<mirror of anjany/verse> archive 02b292b8 utils/eval_utilities.py | tar -x -C /tmp/verse
    PYTHONPATH=. python tools/verse_fixtures.py /tmp/verse

The corpus: a spine of 28 positions ~25 mm apart along a curved line; each case keeps a random
contiguous run of vertebrae as ground truth; predictions add Gaussian noise (0-25 mm), drop some,
add some absent from the ground truth, shift labels by one (the typical labelling error), and put
some errors exactly at 20 mm (the inclusive threshold).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

MAX = 28
OUT = Path(__file__).resolve().parents[1] / "tests" / "metrics" / "data" / "verse_get_hits.npz"


def corpus(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gts, preds = np.full((n, MAX, 3), np.nan), np.full((n, MAX, 3), np.nan)
    for c in range(n):
        t = np.arange(MAX) * rng.uniform(18, 30)
        spine = np.stack([10 * np.sin(t / 200), 15 * np.cos(t / 150), -t], 1) + rng.normal(0, 50, 3)
        lo = int(rng.integers(0, MAX - 1))
        hi = int(rng.integers(lo + 1, MAX + 1))
        gts[c, lo:hi] = spine[lo:hi]
        kind = c % 6
        noise = rng.uniform(0, 25)
        p = spine + rng.normal(0, noise / 2, spine.shape)
        if kind == 1:  # labels shifted by one on part of the run
            p = np.roll(p, int(rng.choice([-1, 1])), axis=0)
        if kind == 2:  # errors exactly at the threshold, in a random direction
            d = rng.normal(size=spine.shape)
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            p = spine + d * rng.choice([19.999, 20.0, 20.001], size=(MAX, 1))
        keep = np.zeros(MAX, bool)
        keep[max(0, lo - int(rng.integers(0, 3))): min(MAX, hi + int(rng.integers(0, 3)))] = True
        if kind in (3, 4):
            keep &= rng.random(MAX) > 0.3
        if kind == 5 and c % 12 == 5:
            keep[:] = False
        preds[c, keep] = p[keep]
    return gts, preds


def main(verse_root: str) -> None:
    sys.path.insert(0, str(Path(verse_root) / "utils"))
    import eval_utilities as eu  # the official code, run as is

    gts, preds = corpus(600)
    hits = np.zeros(len(gts))
    hit_lists = np.zeros((len(gts), MAX))
    for c in range(len(gts)):
        h, hl = eu.get_hits(gts[c], preds[c], MAX)
        hits[c], hit_lists[c] = h, hl
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, gt=gts, pred=preds, hits=hits, hit_list=hit_lists,
                        commit=np.array("02b292b86021a8873043124982f5f58da9ba1cb8"))
    print(f"wrote {OUT}: {len(gts)} cases, mean id.rate "
          f"{np.nanmean(hits / np.maximum(1, (~np.isnan(gts[:, :, 0])).sum(1))):.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
