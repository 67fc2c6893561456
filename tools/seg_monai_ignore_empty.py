"""Run MONAI's own Dice and IoU with ``ignore_empty=False`` on a generated corpus of label maps
and store the masks (packed bits) and MONAI's outputs (numbers only) as
``tests/metrics/data/peer_cases/monai_ignore_empty_corpus.json``;
``tests/metrics/test_segmentation_monai_ignore_empty.py`` compares the
``monai_ignore_empty_false`` convention with them.

MONAI is imported and called (the installed release, whose version the file records):
``DiceMetric`` and ``MeanIoU`` (``reduction="none"``, ``ignore_empty=False``) on one-hot float64
tensors, and the functional ``compute_dice`` / ``compute_iou`` on the same, each with
``include_background`` true and false. The corpus (seed 37): 2-D and 3-D label maps of 1-9
voxels per axis with 2-4 labels (background included), in which each foreground label is, at
random, present in both maps, only in the prediction, only in the target or in neither; plus
all-background pairs, maps filled with one label, and identical maps. This script contains no
MONAI code.

Re-run: ``python tools/seg_monai_ignore_empty.py``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "metrics" / "data" / "peer_cases" / \
    "monai_ignore_empty_corpus.json"
KINDS = ("random", "random", "random", "random", "all_background", "one_label", "identical")


def _bits(mask: np.ndarray) -> dict:
    return {"bits": base64.b64encode(np.packbits(mask.astype(bool).ravel())).decode(),
            "shape": list(mask.shape), "dtype": "int64"}


def _label_pair(rng: np.random.Generator, kind: str) -> tuple[np.ndarray, np.ndarray, int]:
    ndim = int(rng.choice([2, 3]))
    shape = tuple(int(s) for s in rng.integers(1, 10, size=ndim))
    k = int(rng.integers(2, 5))
    if kind == "all_background":
        return np.zeros(shape, np.int64), np.zeros(shape, np.int64), k
    if kind == "one_label":
        a = np.full(shape, int(rng.integers(0, k)), np.int64)
        b = a if rng.random() < 0.5 else np.full(shape, int(rng.integers(0, k)), np.int64)
        return a, b, k
    pred, target = (rng.integers(0, k, size=shape) for _ in range(2))
    for c in range(1, k):  # where the label is: both, prediction only, target only, neither
        where = rng.choice(["both", "pred", "target", "none"])
        if where in ("target", "none"):
            pred[pred == c] = 0
        if where in ("pred", "none"):
            target[target == c] = 0
    if kind == "identical":
        target = pred.copy()
    return pred.astype(np.int64), target.astype(np.int64), k


def _monai(pred: np.ndarray, target: np.ndarray, k: int) -> dict[str, list]:
    import torch
    from monai.metrics import DiceMetric, MeanIoU, compute_dice, compute_iou

    def onehot(a: np.ndarray) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.from_numpy(a), k).movedim(-1, 0)[None].double()

    p, t = onehot(pred), onehot(target)
    out = {}
    for bg in (True, False):
        tag = "bg" if bg else "nobg"
        dm = DiceMetric(include_background=bg, reduction="none", ignore_empty=False)
        dm(p, t)
        im = MeanIoU(include_background=bg, reduction="none", ignore_empty=False)
        im(p, t)
        out[f"DiceMetric_{tag}"] = dm.aggregate().double().tolist()
        out[f"MeanIoU_{tag}"] = im.aggregate().double().tolist()
        out[f"compute_dice_{tag}"] = compute_dice(p, t, include_background=bg, ignore_empty=False).double().tolist()
        out[f"compute_iou_{tag}"] = compute_iou(p, t, include_background=bg, ignore_empty=False).double().tolist()
    return out


def main(n: int = 280) -> None:
    import monai

    rng = np.random.default_rng(37)
    cases = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        pred, target, k = _label_pair(rng, kind)
        case = {"id": f"{kind}/{i}", "num_classes": k,
                "pred": {"stack": [_bits(pred == c) for c in range(k)]},
                "target": {"stack": [_bits(target == c) for c in range(k)]}}
        case["monai"] = _monai(pred, target, k)
        cases.append(case)
    doc = {"source": {"package": "monai", "version": monai.__version__,
                      "calls": "DiceMetric / MeanIoU (reduction='none') and compute_dice / compute_iou, "
                               "ignore_empty=False, include_background true and false, one-hot float64"},
           "generated_by": "tools/seg_monai_ignore_empty.py", "seed": 37, "cases": cases}
    OUT.write_text(json.dumps(doc, indent=0) + "\n")
    print(f"wrote {OUT}: {len(cases)} cases, MONAI {monai.__version__}")


if __name__ == "__main__":
    main()
