"""``protocol=regression_probe``: gene-expression regression from frozen patch embeddings, as
HEST-Benchmark computes it (mahmoodlab/HEST ``src/hest/bench/benchmark.py`` and ``trainer.py``,
commit afd42c31):

* per fold (``splits/train_<i>.csv`` / ``test_<i>.csv``: patient-level), embeddings of the
  training spots are standardised (``StandardScaler``) and reduced with
  ``PCA(n_components=256, random_state=seed)`` fitted on the training spots (``dimreduce="PCA"``,
  ``latent_dim=256``), cast to float32 (``torch.Tensor``);
* ``Ridge(solver="lsqr", alpha=100 / (n_features · n_genes), fit_intercept=False,
  max_iter=1000)`` on the log1p expression of the gene list (``normalize=True``);
* Pearson correlation per gene on the test spots (``scipy.stats.pearsonr``); a fold's score is
  the mean over genes; the benchmark's figure is the mean over folds with the standard deviation
  over folds (``np.std``, ddof 0); a gene's figure is its mean over folds.

HEST's default seed is 1 (``BenchmarkConfig.seed``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["hest_ridge_probe", "pearson_per_gene", "merge_folds", "run_regression_probe"]


def hest_ridge_probe(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, pca_dim: int | None = 256,
                     seed: int = 1, alpha: float | None = None, max_iter: int = 1000) -> np.ndarray:
    """Predicted expression ``(n_test, n_genes)`` of HEST-Benchmark's ridge probe (see module
    docstring); ``pca_dim=None`` skips the scaler and PCA; ``alpha=None`` is HEST's
    ``100 / (n_features · n_genes)`` (n_features after PCA)."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    x_train, x_test = np.asarray(x_train), np.asarray(x_test)
    y_train = np.asarray(y_train)
    if pca_dim:
        if pca_dim > min(x_train.shape):
            raise ValueError(f"regression_probe: pca_dim={pca_dim} exceeds min(n_train={x_train.shape[0]}, "
                             f"dim={x_train.shape[1]}); lower protocol.options.pca_dim")
        pipe = Pipeline([("scaler", StandardScaler()), ("PCA", PCA(n_components=pca_dim, random_state=seed))])
        # HEST wraps the PCA output in torch.Tensor: float32 from here on
        x_train = pipe.fit_transform(x_train).astype(np.float32)
        x_test = pipe.transform(x_test).astype(np.float32)
    a = 100.0 / (x_train.shape[1] * y_train.shape[1]) if alpha is None else float(alpha)
    reg = Ridge(solver="lsqr", alpha=a, random_state=seed, fit_intercept=False, max_iter=max_iter)
    reg.fit(x_train, y_train)
    return reg.predict(x_test)


def pearson_per_gene(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Pearson's r of each column (gene) between truth and prediction, float64 (NaN where either
    column is constant, as ``scipy.stats.pearsonr`` returns it)."""
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape or t.ndim != 2 or len(t) < 2:
        raise ValueError(f"pearson_per_gene: need two (n ≥ 2, genes) arrays of one shape, got {t.shape}, {p.shape}")
    tc, pc = t - t.mean(0), p - p.mean(0)
    tn, pn = np.linalg.norm(tc, axis=0), np.linalg.norm(pc, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (tc / tn * (pc / pn)).sum(0)
    r = np.clip(r, -1.0, 1.0)
    r[(tn == 0) | (pn == 0)] = np.nan
    return r


def merge_folds(per_fold: Sequence[np.ndarray], genes: Sequence[str]) -> dict[str, Any]:
    """HEST's fold merge: ``pearson_mean`` = mean over folds of each fold's mean over genes,
    ``pearson_std`` their std (ddof 0), ``per_gene`` {gene: (mean, std) over folds}."""
    folds = np.asarray(per_fold, dtype=np.float64)
    means = folds.mean(1)
    return {"pearson_mean": float(means.mean()), "pearson_std": float(means.std()), "mean_per_split": means.tolist(),
            "per_gene": {g: (float(folds[:, j].mean()), float(folds[:, j].std())) for j, g in enumerate(genes)}}


def _t_interval(values: Sequence[float], confidence: float) -> tuple[float | None, float | None]:
    v = np.asarray(values, dtype=float)
    if len(v) < 2 or not np.isfinite(v).all():
        return None, None
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, len(v) - 1)) * float(v.std(ddof=1)) / math.sqrt(len(v))
    return round(float(v.mean()) - half, 6), round(float(v.mean()) + half, 6)


def run_regression_probe(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, extra: dict[str, Any], *,
                         shared: Mapping[str, Any]) -> Any:
    """One seed of ``protocol=regression_probe`` over every fold of the dataset (``shared``: the
    run module's helpers)."""
    import pandas as pd

    if "emb" not in extra:
        extra.update(_embeddings(c, p, shared))
    emb, ds = extra["emb"], extra["dataset"]
    o = dict(p.get("options") or {})
    sample_of = dict(zip(ds.manifest["id"].astype(str), ds.manifest["sample_id"].astype(str)))
    samples = np.asarray([sample_of[i] for i in emb.ids])
    x, y = emb.x.numpy(), emb.y.numpy().astype(np.float64)
    per_fold, rows = [], []
    for k, (train_ids, test_ids) in enumerate(ds.folds()):
        tr, te = np.isin(samples, train_ids), np.isin(samples, test_ids)
        if not tr.any() or not te.any():
            raise ValueError(f"regression_probe: fold {k} has no {'training' if not tr.any() else 'test'} spots")
        pred = hest_ridge_probe(x[tr], y[tr], x[te], pca_dim=o.get("pca_dim", 256), seed=seed, alpha=o.get("alpha"))
        per_fold.append(pearson_per_gene(y[te], pred))
        idx = np.flatnonzero(te)
        rows.append(pd.DataFrame({"id": [emb.ids[i] for i in idx], "patient_id": [emb.patients[i] for i in idx],
                                  "sample_id": samples[idx], "fold": k, "status": "ok",
                                  "pred": list(pred.astype(np.float32)), "target": list(y[te].astype(np.float32))}))
    merged = merge_folds(per_fold, ds.genes)
    conf = float((c.get("bootstrap") or {}).get("confidence", 0.95))
    lo, hi = _t_interval(merged["mean_per_split"], conf)
    summary = {"confidence": conf, "n_resamples": None, "n_samples": len(emb.ids), "n_failed": len(emb.failed),
               "failed_ids": emb.failed[:100], "metrics": {"pearson": {
                   "kind": "per_fold", "higher_is_better": True, "over": "folds",
                   "mean": {"value": round(merged["pearson_mean"], 6), "std": round(merged["pearson_std"], 6),
                            "ci_low": lo, "ci_high": hi, "n_folds": len(per_fold)},
                   "per_class": {g: {"value": round(m, 6), "std": round(s, 6)}
                                 for g, (m, s) in merged["per_gene"].items()}}}}
    info = {"folds": len(per_fold), "mean_per_fold": merged["mean_per_split"], "genes": len(ds.genes),
            "pca_dim": o.get("pca_dim", 256), "alpha": o.get("alpha")}
    return {"summary": summary, "samples": pd.concat(rows, ignore_index=True), "info": info}


def _embeddings(c: Mapping[str, Any], p: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    from medimg_bench.builders import build_dataset
    from medimg_bench.protocols.embeddings import cached_embeddings

    _encoder, _model_key = shared["encoder"], shared["model_key"]
    d = c["dataset"]
    ds = build_dataset(d, d.get("split"))
    if not callable(getattr(ds, "folds", None)) or not hasattr(ds, "genes"):
        raise ValueError(f"protocol=regression_probe needs a dataset with folds and a gene list (hest1k), "
                         f"got {d['name']!r}")
    e = dict(p.get("embeddings") or {})
    emb = cached_embeddings(_encoder(c, ds), ds, split=d.get("split"), model_name=_model_key(c),
                            cache_dir=e.get("cache_dir"), batch_size=int(e.get("batch_size", 64)),
                            num_workers=int(e.get("num_workers", 0)), amp=bool(c.get("amp")))
    return {"emb": emb, "dataset": ds, "embeddings": {"all": {"n": len(emb.ids), "dim": int(emb.x.shape[1]),
                                                              "source": emb.source, "refused": emb.refused,
                                                              "failed": emb.failed[:20],
                                                              "seconds": round(emb.seconds, 3)}}}
