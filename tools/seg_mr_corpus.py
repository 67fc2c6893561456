"""Run MetricsReloaded's own code on a generated corpus of mask pairs and store its outputs as
``tests/metrics/data/peer_cases/metrics_reloaded_corpus.json`` (masks as packed bits, the
outputs as numbers or the exception raised). ``tests/metrics/test_segmentation_mr_corpus.py``
compares the ``metrics_reloaded`` and ``metrics_reloaded_00219d0`` conventions with them.

Two commits of Project-MONAI/MetricsReloaded (not on PyPI) are run, each in its own process:

* ``cb38dfc0a5ed4fa3bdc559e4960b6e2b93c3b967`` — main, 2025-06-02 (convention
  ``metrics_reloaded``);
* ``00219d05d09edb2ef5f9d453bd69f0f9fb318cd3`` — 2024-06-06, reachable only from pull-request
  refs (convention ``metrics_reloaded_00219d0``).

Re-run (the source trees need only ``MetricsReloaded/``; NumPy, SciPy, scikit-image and
scikit-learn from the project's environment)::

    git clone https://github.com/Project-MONAI/MetricsReloaded mr && git -C mr fetch origin \\
        00219d05d09edb2ef5f9d453bd69f0f9fb318cd3   # or any clone holding both commits
    for c in cb38dfc 00219d0; do mkdir -p /tmp/mr_$c && git -C mr archive $c MetricsReloaded \\
        | tar -x -C /tmp/mr_$c; done
    python tools/seg_mr_corpus.py --main /tmp/mr_cb38dfc --old /tmp/mr_00219d0

The corpus (seed 20250602): 2-D and 3-D masks of 1-24 voxels per axis, unit or anisotropic
spacing (or none, MetricsReloaded's ``pixdim=None``), both masks present (ellipsoids, noise,
masks touching the image border and its first corner, identical masks, full images), exactly one
mask empty (either side) and both empty; NSD tolerances 0.5-3 mm and Hausdorff percentiles
50-100. This script contains no MetricsReloaded code; it imports and calls it.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "metrics" / "data" / "peer_cases" / "metrics_reloaded_corpus.json"
COMMITS = {"main": "cb38dfc0a5ed4fa3bdc559e4960b6e2b93c3b967",
           "old": "00219d05d09edb2ef5f9d453bd69f0f9fb318cd3"}
SPACINGS = (0.5, 0.8, 1.0, 1.25, 2.5, 3.0)
KINDS = ("present", "present", "present", "noise", "corner", "border", "identical", "full",
         "pred_empty", "ref_empty", "both_empty")


def _blob(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    grid = np.ogrid[tuple(slice(0, s) for s in shape)]
    centre = [rng.uniform(-1, s) for s in shape]
    radii = [rng.uniform(0.6, max(1.0, s / 1.5)) for s in shape]
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1


def _nonempty(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    m = _blob(rng, shape)
    if not m.any():
        m[tuple(int(rng.integers(0, s)) for s in shape)] = True
    return m


def _pair(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    z = np.zeros(shape, dtype=bool)
    if kind == "both_empty":
        return z, z.copy()
    if kind == "pred_empty":
        return z, _nonempty(rng, shape)
    if kind == "ref_empty":
        return _nonempty(rng, shape), z
    if kind == "identical":
        m = _nonempty(rng, shape)
        return m, m.copy()
    if kind == "full":
        return np.ones(shape, dtype=bool), _nonempty(rng, shape)
    p, r = _nonempty(rng, shape), _nonempty(rng, shape)
    if kind == "noise":
        p = p ^ (rng.random(shape) < 0.15)
        p[tuple(int(rng.integers(0, s)) for s in shape)] = True
    elif kind in ("corner", "border"):  # masks at index 0 along the first axis (and the corner)
        lo = tuple(slice(0, max(1, s // 3)) for s in shape) if kind == "corner" else (slice(0, 2),)
        p[lo] = True
    return p, r


def make_corpus(n: int = 320, seed: int = 20250602) -> list[dict]:
    """Mask pairs with their spacing, NSD tolerance and Hausdorff percentile."""
    sys.path.insert(0, str(REPO))
    from tests.metrics._peer_cases import pack_mask

    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        nd = 2 if i % 2 == 0 else 3
        hi = 24 if nd == 2 else 12
        shape = tuple(int(rng.integers(1, hi + 1)) for _ in range(nd))
        kind = KINDS[i % len(KINDS)]
        pred, ref = _pair(rng, kind, shape)
        sp = None if i % 5 == 0 else [float(rng.choice(SPACINGS)) for _ in range(nd)]
        cases.append({"id": f"{i:03d}-{kind}-{nd}d", "kind": kind, "pred": pack_mask(pred),
                      "ref": pack_mask(ref), "spacing": sp,
                      "tau": float(rng.choice([0.5, 1.0, 1.5, 2.0, 3.0])),
                      "perc": float(rng.choice([50, 90, 95, 99, 100]))})
    return cases


# -- the worker: runs inside a process whose sys.path starts with one MetricsReloaded tree ----------
_CALLS = {  # our metric name -> BinaryPairwiseMeasures method (by commit: ppv changed name)
    "dice": ("dsc", "dsc"), "fbeta": ("fbeta", "fbeta"), "iou": ("intersection_over_union",) * 2,
    "precision": ("positive_predictive_value", "positive_predictive_values"),
    "recall": ("recall", "recall"), "hausdorff": ("measured_hausdorff_distance",) * 2,
    "hd95": ("measured_hausdorff_distance_perc",) * 2, "assd": ("measured_average_distance",) * 2,
    "masd": ("measured_masd",) * 2, "nsd": ("normalised_surface_distance",) * 2,
    "avdr": ("absolute_volume_difference_ratio", None), "vol_diff": (None, "vol_diff"),
    "rel_vol_error": (None, "rel_vol_error"),
}


def _value(fn) -> float | str:
    try:
        v = fn()
    except Exception as err:  # a decision of the peer's code: stored by exception name
        return f"raises {type(err).__name__}"
    v = float(v)
    return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else v)


def _near_tau(bpm, tau: float) -> bool:
    """Whether a border distance lies within float rounding of the NSD tolerance (there our
    KD-tree's and SciPy's distance transform's last bits may compare differently)."""
    try:
        d_ref, d_pred, b_ref, b_pred = bpm.border_distance()
    except Exception:
        return False
    d = np.concatenate([np.asarray(d_ref)[np.asarray(b_pred) > 0], np.asarray(d_pred)[np.asarray(b_ref) > 0]])
    return bool(np.any(np.abs(d - tau) <= 1e-9 * max(tau, 1.0)))


def evaluate(tree: str, which: str, corpus_path: str, out_path: str) -> None:
    sys.path.insert(0, tree)
    sys.path.insert(1, str(REPO))
    from MetricsReloaded.metrics.pairwise_measures import BinaryPairwiseMeasures as PM

    from tests.metrics._peer_cases import build_mask

    slot = 0 if which == "main" else 1
    results = []
    for case in json.loads(Path(corpus_path).read_text()):
        pred = build_mask(case["pred"]).astype(np.float64)
        ref = build_mask(case["ref"]).astype(np.float64)
        bpm = PM(pred, ref, pixdim=case["spacing"], dict_args={"nsd": case["tau"], "hd_perc": case["perc"]})
        row = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for ours, names in _CALLS.items():
                if names[slot] is not None:
                    row[ours] = _value(getattr(bpm, names[slot]))
            row["nsd_near_tau"] = _near_tau(bpm, case["tau"])
        results.append(row)
    Path(out_path).write_text(json.dumps(results))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--main", help="source tree of MetricsReloaded at cb38dfc")
    ap.add_argument("--old", help="source tree of MetricsReloaded at 00219d0")
    ap.add_argument("--worker", nargs=4, metavar=("TREE", "WHICH", "CORPUS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        evaluate(*args.worker)
        return
    corpus = make_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        cpath = Path(tmp) / "corpus.json"
        cpath.write_text(json.dumps(corpus))
        outputs = {}
        for which, tree in (("main", args.main), ("old", args.old)):
            opath = Path(tmp) / f"{which}.json"
            subprocess.run([sys.executable, __file__, "--worker", tree, which, str(cpath), str(opath)],
                           check=True)
            outputs[which] = json.loads(opath.read_text())
    for case, a, b in zip(corpus, outputs["main"], outputs["old"]):
        case["metrics_reloaded"] = a
        case["metrics_reloaded_00219d0"] = b
    doc = {"generated_by": "tools/seg_mr_corpus.py", "repo": "Project-MONAI/MetricsReloaded",
           "commits": {"metrics_reloaded": COMMITS["main"], "metrics_reloaded_00219d0": COMMITS["old"]},
           "numpy": np.__version__, "scipy": __import__("scipy").__version__, "cases": corpus}
    OUT.write_text(json.dumps(doc, indent=0) + "\n")
    print(f"{len(corpus)} cases -> {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
