"""Stored outputs of scikit-learn's ``LogisticRegression`` (lbfgs) for the ``clip_lbfgs`` probe test.

For a seeded corpus of problems (multinomial with 3-6 classes, binary, multi-label with unlabelled
entries; 40-400 samples, 4-48 features at scales 0.01-10, C from 1e-4 to 1e4) this runs
``sklearn.linear_model.LogisticRegression(C=C, tol=1e-10, max_iter=100000)`` — the optimum of
scikit-learn's objective, which ``fit_logistic_regression`` must reach — and, for reference,
the default ``LogisticRegression(C=C, max_iter=1000)`` the CLIP paper names. It stores, per case,
the generation parameters and the predicted probabilities on 30 held-out rows (numbers only,
no code), in ``tests/protocols/data/lbfgs_sklearn.npz``. The problems are regenerated in the test
from the same seeds with ``tests/protocols/_lbfgs_cases.py`` (numpy's PCG64 stream is stable
across platforms).

Run from the repository root (scikit-learn 1.9.1, as pinned in constraints.txt)::

    python tools/lbfgs_probe_fixtures.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "protocols" / "data" / "lbfgs_sklearn.npz"
sys.path.insert(0, str(REPO))
from tests.protocols._lbfgs_cases import make_case  # noqa: E402  (the problems the test rebuilds)


def sklearn_probs(case: dict, **options) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    x, y, xe = case["x"], case["y"], case["x_eval"]
    if case["kind"] != "multilabel":
        return LogisticRegression(C=case["c"], **options).fit(x, y).predict_proba(xe)
    cols = []
    for j in range(case["k"]):
        keep = ~np.isnan(y[:, j])
        cols.append(LogisticRegression(C=case["c"], **options).fit(x[keep], y[keep, j]).predict_proba(xe)[:, 1])
    return np.stack(cols, 1)


def main() -> None:
    import sklearn

    seeds = list(range(30))
    tight, default, meta = [], [], []
    for s in seeds:
        case = make_case(s)
        tight.append(sklearn_probs(case, tol=1e-10, max_iter=100000))
        default.append(sklearn_probs(case, max_iter=1000))
        meta.append({"seed": s, "kind": case["kind"], "k": case["k"], "c": case["c"]})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, meta=json.dumps({"sklearn": sklearn.__version__, "cases": meta}),
                        **{f"tight_{s}": p for s, p in zip(seeds, tight)},
                        **{f"default_{s}": p for s, p in zip(seeds, default)})
    print(f"wrote {OUT} ({len(seeds)} cases, scikit-learn {sklearn.__version__})")


if __name__ == "__main__":
    main()
