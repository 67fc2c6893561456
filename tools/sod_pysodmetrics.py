"""Run pysodmetrics (PyPI ``pysodmetrics``, the Python port of the same SOD metrics) on the generated
corpus of ``tests/metrics/_sod_corpus.py`` and store its per-image values as fixtures for
``tests/metrics/test_sod_toolbox.py`` (which names every difference from the MATLAB toolbox).

pysodmetrics is not a project dependency (it pins numpy < 2.3.5 and scikit-image < 0.26); install
it beside the project without its pins to re-run::

    pip install --no-deps pysodmetrics==1.6.2 opencv-python-headless
    python tools/sod_pysodmetrics.py --out tests/metrics/data/sod_pysodmetrics.npz

Only 8-bit and 1-bit maps are run (pysodmetrics takes uint8 maps; 1-bit maps as 0/255); masks as
uint8 0/255 after the toolbox's ``> 128``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.metrics._sod_corpus import corpus, digest, toolbox_gt  # noqa: E402

FIELDS = ("mae", "s_measure", "weighted_f_measure", "adaptive_e_measure", "e_measure_mean",
          "dice_mean", "iou_mean", "sensitivity_mean", "specificity_mean", "adaptive_dice")


def _one(pred: np.ndarray, gt: np.ndarray) -> dict[str, float]:
    import py_sod_metrics as psm

    handlers = {k: h(with_dynamic=True, with_adaptive=True, with_binary=False, sample_based=True)
                for k, h in (("dice", psm.DICEHandler), ("iou", psm.IOUHandler),
                             ("sensitivity", psm.RecallHandler), ("specificity", psm.SpecificityHandler))}
    fm = psm.FmeasureV2(metric_handlers=handlers)
    mae, sm, em, wfm = psm.MAE(), psm.Smeasure(), psm.Emeasure(), psm.WeightedFmeasure()
    for m in (fm, mae, sm, em, wfm):
        m.step(pred=pred, gt=gt)
    out = {"mae": float(mae.maes[0]), "s_measure": float(sm.sms[0]), "weighted_f_measure": float(wfm.weighted_fms[0]),
           "adaptive_e_measure": float(em.adaptive_ems[0]), "e_measure_mean": float(np.mean(em.changeable_ems[0]))}
    for k, h in handlers.items():
        out[f"{k}_mean"] = float(np.mean(h.dynamic_results[0]))
    out["adaptive_dice"] = float(handlers["dice"].adaptive_results[0])
    return out


def main(argv: list[str] | None = None) -> int:
    import py_sod_metrics

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "metrics" / "data" / "sod_pysodmetrics.npz")
    a = ap.parse_args(argv)
    ids, digests, rows = [], [], []
    for sid, pred, gt in corpus():
        if pred.dtype == np.uint16:
            continue
        p8 = np.where(pred, 255, 0).astype(np.uint8) if pred.dtype == bool else pred
        g8 = np.where(toolbox_gt(gt), 255, 0).astype(np.uint8)
        r = _one(p8, g8)
        ids.append(sid)
        digests.append(digest(pred, gt))
        rows.append([r[f] for f in FIELDS])
    version = getattr(py_sod_metrics, "__version__", "1.6.2")
    np.savez_compressed(a.out, ids=np.array(ids), digests=np.array(digests), fields=np.array(FIELDS),
                        values=np.array(rows, dtype=np.float64),
                        provenance=np.array([f"pysodmetrics {version} via tools/sod_pysodmetrics.py"]))
    print(f"wrote {a.out}: {len(ids)} items")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
