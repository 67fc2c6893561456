"""Fixtures of U-Bench's per-image segmentation metrics, for tests/metrics/test_ubench_convention.py.

Runs U-Bench's own ``utils/metrics_medpy.get_metrics`` (github.com/FengheTan9/U-Bench at commit
eafbb9fb9039a53c747789aee59894198e77a7a5) on a generated corpus of 2D binary cases and stores the
inputs (bit-packed) and its outputs (iou, dice, SE, PC, F1, SP, ACC per case) as JSON. The script
imports and calls U-Bench's module; it contains none of its code.

Re-run (medpy 0.5.2, torch, numpy installed; the NumPy version decides medpy's Dice of two empty
masks, recorded in the fixture)::

    git clone https://github.com/FengheTan9/U-Bench /tmp/ubench && git -C /tmp/ubench checkout eafbb9fb
    python tools/ubench_metrics_reference.py /tmp/ubench tests/metrics/data/ubench_get_metrics.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

COMMIT = "eafbb9fb9039a53c747789aee59894198e77a7a5"


def corpus(seed: int = 20251008) -> list[tuple[np.ndarray, np.ndarray]]:
    """(prediction, target) 0/1 pairs: random blobs, identical, disjoint, one or both empty."""
    rng = np.random.default_rng(seed)
    cases = []
    for k in range(64):
        h, w = int(rng.integers(8, 33)), int(rng.integers(8, 33))
        t = rng.random((h, w)) < rng.uniform(0.05, 0.6)
        kind = k % 8
        if kind == 0:
            p = t.copy()
        elif kind == 1:
            p = ~t
        elif kind == 2:
            p = np.zeros_like(t)
        elif kind == 3:
            t = np.zeros_like(t)
            p = rng.random((h, w)) < 0.2
        elif kind == 4:
            p, t = np.zeros_like(t), np.zeros_like(t)
        else:
            p = t ^ (rng.random((h, w)) < rng.uniform(0.01, 0.4))
        cases.append((p.astype(np.uint8), t.astype(np.uint8)))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ubench", type=Path, help=f"a U-Bench checkout at {COMMIT[:8]}")
    ap.add_argument("out", type=Path)
    args = ap.parse_args()
    import medpy
    import torch

    spec = importlib.util.spec_from_file_location("ubench_metrics_medpy", args.ubench / "utils" / "metrics_medpy.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    rows = []
    for p, t in corpus():
        logits = torch.from_numpy((p.astype(np.float32) * 2 - 1) * 4)[None, None]  # sigmoid > 0.5 <=> p
        target = torch.from_numpy(t.astype(np.float32))[None, None]
        iou, dice, se, pc, f1, sp, acc = (float(v) for v in mod.get_metrics(logits, target))
        rows.append({"shape": list(p.shape), "pred": np.packbits(p.ravel()).tobytes().hex(),
                     "target": np.packbits(t.ravel()).tobytes().hex(),
                     "iou": iou, "dice": dice, "SE": se, "PC": pc, "F1": f1, "SP": sp, "ACC": acc})
    meta = {"source": f"FengheTan9/U-Bench utils/metrics_medpy.py get_metrics @ {COMMIT}",
            "numpy": np.__version__, "medpy": getattr(medpy, "__version__", "0.5.2"), "torch": torch.__version__}
    args.out.write_text(json.dumps({"meta": meta, "cases": rows}, indent=0, allow_nan=True) + "\n")
    print(f"wrote {len(rows)} cases to {args.out}")


if __name__ == "__main__":
    main()
