"""The generated problems of the ``clip_lbfgs`` probe test, shared by the test and
``tools/lbfgs_probe_fixtures.py`` (which stored scikit-learn's outputs on them)."""

from __future__ import annotations

import numpy as np


def make_case(seed: int) -> dict:
    """The problem of one seed: kind, classes, features, scale, C, train rows and 30 eval rows."""
    rng = np.random.default_rng(seed)
    kind = ("multiclass", "binary", "multilabel")[seed % 3]
    k = {"multiclass": int(rng.integers(3, 7)), "binary": 2, "multilabel": int(rng.integers(2, 5))}[kind]
    n, d = int(rng.integers(40, 401)), int(rng.integers(4, 49))
    scale = float(10.0 ** rng.uniform(-2, 1))
    c = float(10.0 ** rng.uniform(-4, 4))
    centers = rng.normal(0, 1.0, (k, d))
    x = rng.normal(0, 1.0, (n + 30, d))
    if kind == "multilabel":
        y = (x @ centers.T + rng.normal(0, 1.0, (n + 30, k)) > 0).astype(float)
        y[rng.random(y.shape) < 0.1] = np.nan  # unlabelled entries
        y[:2] = [[0.0] * k, [1.0] * k]  # every column has both values
    else:
        y = rng.integers(0, k, n + 30)
        y[:k] = np.arange(k)
        x += centers[y] * rng.uniform(0.2, 1.5)
    return {"kind": kind, "k": k, "c": c, "x": x[:n] * scale, "y": y[:n], "x_eval": x[n:] * scale}
