"""Time VerSe id.rate: medimg_bench (``verse_hits``) vs the official ``get_hits`` (anjany/verse),
side by side on the same centroid sets, plus centroid extraction from label maps.

Run: ``python benchmarks/verse_metrics.py [--n 2000] [--verse /tmp/verse] [--repeats 3]``.
``--verse`` is a folder holding ``utils/eval_utilities.py`` of anjany/verse (e.g.
``git --git-dir=<mirror> archive 02b292b8 utils/eval_utilities.py | tar -x -C /tmp/verse``);
without it only ours is timed. Prints seconds, µs per scan and the ratio (official / ours).
Also times ``centroids_from_labels`` on a 256×256×200 label map with 24 vertebrae.
Measured (shared 2-core CPU, 1000 scans): ours 327 µs/scan, official 1054 µs/scan (3.2×);
centroids of a 256×256×200 map 0.46 s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from medimg_bench.metrics.verse import centroids_from_labels, verse_hits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from _timing import best_of as best  # noqa: E402
from verse_fixtures import MAX, corpus  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--verse", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    gts, preds = corpus(a.n, seed=1)
    ours = best(lambda: [verse_hits(g, p) for g, p in zip(gts, preds)], a.repeats)
    print(f"ours     : {ours:.3f} s for {a.n} scans ({1e6 * ours / a.n:.1f} µs/scan)")
    if a.verse:
        sys.path.insert(0, str(Path(a.verse) / "utils"))
        import eval_utilities as eu

        theirs = best(lambda: [eu.get_hits(g, p, MAX) for g, p in zip(gts, preds)], a.repeats)
        print(f"official : {theirs:.3f} s ({1e6 * theirs / a.n:.1f} µs/scan); ratio official/ours "
              f"{theirs / ours:.2f}")
    lab = np.zeros((256, 256, 200), dtype=np.int16)
    for v in range(1, 25):
        lab[100:160, 90:170, (v - 1) * 8:(v - 1) * 8 + 6] = v
    t = best(lambda: centroids_from_labels(lab, np.eye(4)), a.repeats)
    print(f"centroids_from_labels 256x256x200, 24 labels: {t:.3f} s")


if __name__ == "__main__":
    main()
