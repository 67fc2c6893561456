"""Figures for ``metrics/text/rexrank.py``: CXR-Report-Metric's RadCliQ-v0 / RadCliQ-v1 composite.

Reference (run, never copied): rajpurkarlab/CXR-Report-Metric at
9c9ecad39be6cb2be8e75be1d1c50ef8888a3e40, ``CXRMetric/run_eval.py`` ``calc_metric`` (its last two
steps): ``normalizer.pkl`` (a scikit-learn ``StandardScaler``) then ``composite_metric_model.pkl``
(a ``LinearRegression``) give RadCliQ-v0; ``radcliq-v1.pkl`` (their ``CompositeMetric``: a second
``StandardScaler`` and coefficients with the intercept last) gives RadCliQ-v1. Inputs are the
columns ``COLS = [radgraph_combined, bertscore, semb_score, bleu_score]`` in that order.

The pickles are loaded here, in this script only (the package never unpickles): it prints the
scalers' ``mean_`` / ``scale_``, the linear model's ``coef_`` / ``intercept_`` and the v1
coefficients (the numbers stored as constants in ``medimg_bench/metrics/text/rexrank.py``), and
writes ``tests/metrics/text/data/rexrank_radcliq_reference.csv.gz``: a generated corpus of
component scores with the two composites as CXR-Report-Metric's own objects compute them.

Re-run: fetch the repository into /work/.mirror (the ``fetch`` tool; needs scikit-learn, pandas,
bert-score and fast-bleu importable, as ``run_eval`` imports them) and
``python tools/rexrank_reference.py``.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import pandas as pd

import __main__

CXRM = Path("/work/.mirror/rajpurkarlab+CXR-Report-Metric/repo")
COMMIT = "9c9ecad39be6cb2be8e75be1d1c50ef8888a3e40"
OUT = Path(__file__).resolve().parents[1] / "tests/metrics/text/data/rexrank_radcliq_reference.csv.gz"
N_ROWS = 2400


def _checkout(dest: Path) -> None:
    files = ["CXRMetric/__init__.py", "CXRMetric/run_eval.py", "config.py", "CXRMetric/normalizer.pkl",
             "CXRMetric/composite_metric_model.pkl", "CXRMetric/radcliq-v1.pkl"]
    archive = subprocess.run(["git", f"--git-dir={CXRM}", "archive", COMMIT, *files], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def _corpus(rng: np.random.Generator) -> pd.DataFrame:
    """Component scores over and beyond their usual ranges, plus edge rows."""
    n = N_ROWS - 6
    frame = pd.DataFrame({
        "radgraph_combined": rng.uniform(0, 1, n),
        "bertscore": rng.uniform(-0.6, 1.0, n),  # rescaled BERTScore goes below 0
        "semb_score": rng.uniform(-0.2, 1.0, n),
        "bleu_score": rng.uniform(0, 1, n),
    })
    # a quarter on a coarse grid, as per-report scores often are (0, 1/2, 1, ...)
    grid = rng.random(n) < 0.25
    frame.loc[grid] = np.round(frame.loc[grid] * 4) / 4
    edges = pd.DataFrame([[0, 0, 0, 0], [1, 1, 1, 1], [0, -1, 0, 0], [1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5],
                          [0.3397, 0.5421, 0.6355, 0.2704]], columns=frame.columns)
    return pd.concat([frame, edges], ignore_index=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _checkout(root)
        sys.path.insert(0, str(root))
        # run_eval imports the RadGraph runner (allennlp) at module level; the composite does not use it
        stub = types.ModuleType("CXRMetric.radgraph_evaluate_model")
        stub.run_radgraph = None  # type: ignore[attr-defined]
        sys.modules["CXRMetric.radgraph_evaluate_model"] = stub
        from CXRMetric import run_eval  # type: ignore[import-not-found]

        __main__.CompositeMetric = run_eval.CompositeMetric  # radcliq-v1.pkl names __main__.CompositeMetric
        with open(root / run_eval.NORMALIZER_PATH, "rb") as fh:
            normalizer = pickle.load(fh)
        with open(root / run_eval.COMPOSITE_METRIC_V0_PATH, "rb") as fh:
            v0 = pickle.load(fh)
        with open(root / run_eval.COMPOSITE_METRIC_V1_PATH, "rb") as fh:
            v1 = pickle.load(fh)
        cols = list(run_eval.COLS)

    constants = {
        "COLS": cols,
        "v0_normalizer_mean": normalizer.mean_.tolist(), "v0_normalizer_scale": normalizer.scale_.tolist(),
        "v0_coef": v0.coef_.tolist(), "v0_intercept": float(v0.intercept_),
        "v1_scaler_mean": v1.scaler.mean_.tolist(), "v1_scaler_scale": v1.scaler.scale_.tolist(),
        "v1_coefs": np.asarray(v1.coefs).tolist(),
    }
    print(json.dumps(constants, indent=1))

    pred = _corpus(np.random.default_rng(20261125))
    # calc_metric's last two steps, with its objects
    input_data = np.array(pred[cols])
    pred["RadCliQ-v0"] = v0.predict(normalizer.transform(input_data))
    pred["RadCliQ-v1"] = v1.predict(np.array(pred[cols]))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pred.to_csv(OUT, index=False, float_format="%.17g", compression={"method": "gzip", "mtime": 0})
    print(f"wrote {len(pred)} rows to {OUT}")


if __name__ == "__main__":
    main()
