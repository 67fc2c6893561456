"""HEST-Benchmark regression probe speed: ours (``hest_ridge_probe`` + vectorised Pearson) vs
HEST's own ``train_test_reg`` after the same scaler + PCA, on one fold of generated spots.

    python benchmarks/regression_probe.py [--train 20000] [--test 5000] [--dim 1024] [--genes 50]
        [--pca 256] [--hest-src /tmp/hest/src]

``--hest-src``: HEST's ``src`` folder (``git archive afd42c31 src/hest/bench`` of
mahmoodlab/HEST); its ``trainer.py`` is loaded by path. Prints seconds of both, the ratio, and
the largest difference in per-gene Pearson r.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--test", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--genes", type=int, default=50)
    ap.add_argument("--pca", type=int, default=256)
    ap.add_argument("--hest-src", default=None)
    a = ap.parse_args()
    from sklearn.decomposition import PCA
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from medimg_bench.protocols.regression import hest_ridge_probe, pearson_per_gene

    rng = np.random.default_rng(0)
    w = rng.normal(size=(a.dim, a.genes)) / np.sqrt(a.dim)
    x = rng.normal(size=(a.train + a.test, a.dim)).astype(np.float32)
    y = np.log1p(rng.poisson(np.exp(x @ w * 0.5 + 1)).astype(np.float64))
    xtr, xte, ytr, yte = x[: a.train], x[a.train:], y[: a.train], y[a.train:]
    t = time.perf_counter()
    r = pearson_per_gene(yte, hest_ridge_probe(xtr, ytr, xte, pca_dim=a.pca, seed=1))
    ours = time.perf_counter() - t
    print(f"train {a.train}, test {a.test}, dim {a.dim}, genes {a.genes}, PCA {a.pca}")
    print(f"ours: {ours:.3f} s (PCA + ridge + Pearson), mean r {np.nanmean(r):.4f}")
    if a.hest_src:
        spec = importlib.util.spec_from_file_location("hest_trainer", Path(a.hest_src) / "hest/bench/trainer.py")
        trainer = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(trainer)
        t = time.perf_counter()
        pipe = Pipeline([("scaler", StandardScaler()), ("PCA", PCA(n_components=a.pca, random_state=1))])
        ptr, pte = pipe.fit_transform(xtr).astype(np.float32), pipe.transform(xte).astype(np.float32)
        res, _ = trainer.train_test_reg(ptr, pte, ytr, yte, random_state=1, genes=[str(i) for i in range(a.genes)])
        peer = time.perf_counter() - t
        theirs = np.array([d["pearson_corr"] for d in res["pearson_corrs"]])
        print(f"HEST: {peer:.3f} s, mean r {res['pearson_mean']:.4f}; ratio HEST / ours {peer / ours:.2f}; "
              f"max |Δr| {np.nanmax(np.abs(theirs - r)):.2e}")


if __name__ == "__main__":
    main()
