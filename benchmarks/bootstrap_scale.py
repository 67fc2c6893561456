"""Bootstrap at scale: the run summary of the default classification metrics.

    python benchmarks/bootstrap_scale.py [--n 100000] [--labels 14] [--per-patient 3.3]
        [--resamples 1000] [--compare 20] [--device cpu|cuda]

Builds ``n`` samples × ``labels`` scores and multi-hot targets (prevalence 1–20 %, 5 % of labels
unlabelled, scores rounded to 3 decimals so ties occur) from ``n / per-patient`` patients, feeds
the five default metrics (AUROC, AUPRC, sensitivity, specificity, ECE) and times
``engine.summary.summarize`` with a ``resamples``-resample patient-clustered bootstrap, per
metric. ``--compare B`` also runs the previous code path (sample-weight matrices for AUROC /
AUPRC, one metric call per resample for the others) with ``B`` resamples, checks that both give
the same intervals for the same seed, and prints its time scaled to ``resamples`` (linear in the
number of resamples). Wall-clock seconds; the device is the one holding the scores.
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

DEFAULTS = {"auroc": {}, "auprc": {}, "sensitivity": {"threshold": 0.5},
            "specificity": {"threshold": 0.5}, "ece": {}}


def _data(n: int, labels: int, per_patient: float, device: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    prevalence = np.linspace(0.01, 0.2, labels)
    y = (rng.random((n, labels)) < prevalence).astype(np.float64)
    logits = rng.normal(size=(n, labels)) + 1.5 * y
    s = np.round(1 / (1 + np.exp(-logits)), 3)
    y[rng.random((n, labels)) < 0.05] = np.nan
    n_patients = max(2, int(n / per_patient))
    patient = np.sort(rng.integers(0, n_patients, n))
    ids = [f"s{i}" for i in range(n)]
    patients = {ids[i]: f"p{patient[i]}" for i in range(n)}
    return torch.from_numpy(s).to(device), torch.from_numpy(y).to(device), ids, patients


def _metrics(s: torch.Tensor, y: torch.Tensor, ids: list[str], batch: int = 4096) -> dict[str, Any]:
    from medimg_bench.registry import create_metric

    out = {}
    for name, opts in DEFAULTS.items():
        m = create_metric(name, **opts)
        for a in range(0, len(ids), batch):
            m.update(s[a : a + batch], y[a : a + batch], ids=ids[a : a + batch])
        out[name] = m
    return out


@contextmanager
def _previous_path():
    """The code path before the cluster fast paths: no ``cluster_weighted``."""
    from medimg_bench.metrics import stats
    from medimg_bench.metrics.classification import _ScoreMetric

    saved = _ScoreMetric.cluster_weighted, stats._Statistic.bind, stats._Statistic.at_clusters
    _ScoreMetric.cluster_weighted = lambda self, *a: None  # type: ignore[method-assign]
    stats._Statistic.bind = lambda self, cluster, g: setattr(self, "_cluster", cluster)  # type: ignore[method-assign]
    stats._Statistic.at_clusters = lambda self, c: self.at(c[:, self._cluster])  # type: ignore[method-assign]
    try:
        yield
    finally:
        _ScoreMetric.cluster_weighted, stats._Statistic.bind, stats._Statistic.at_clusters = saved


def _summaries(metrics: dict[str, Any], patients: dict[str, str], resamples: int, device: str):
    import pandas as pd

    from medimg_bench.engine.summary import summarize

    times, summary = {}, {"metrics": {}}
    for name, m in metrics.items():
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        part = summarize({name: m}, pd.DataFrame({"id": []}), patients=patients, n_resamples=resamples, seed=0)
        if device == "cuda":
            torch.cuda.synchronize()
        times[name] = time.perf_counter() - t0
        summary["metrics"].update(part["metrics"])
    return times, summary


def _intervals(summary: dict) -> np.ndarray:
    vals = []
    for m in summary["metrics"].values():
        for entry in [*m["per_class"].values(), m["mean"]]:
            for k in ("ci_low", "ci_high"):
                vals.append(np.nan if entry[k] is None else entry[k])
    return np.array(vals, dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=14)
    parser.add_argument("--per-patient", type=float, default=3.3, help="images per patient (NIH CXR-14: 3.7)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--compare", type=int, default=0, help="also run the previous path with this many resamples")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    s, y, ids, patients = _data(args.n, args.labels, args.per_patient, args.device)
    metrics = _metrics(s, y, ids)
    print(f"n={args.n} labels={args.labels} patients={len(set(patients.values()))} "
          f"resamples={args.resamples} device={args.device} torch threads={torch.get_num_threads()}")
    times, _ = _summaries(metrics, patients, args.resamples, args.device)
    for name, t in times.items():
        print(f"  {name:<12} {t:8.2f} s")
    total = sum(times.values())
    print(f"  {'total':<12} {total:8.2f} s")
    if args.compare:
        _, new = _summaries(metrics, patients, args.compare, args.device)
        with _previous_path():
            old_times, old = _summaries(metrics, patients, args.compare, args.device)
        a, b = _intervals(new), _intervals(old)
        same = np.array_equal(np.isnan(a), np.isnan(b)) and np.nanmax(np.abs(a - b)) <= 1e-6
        scale = args.resamples / args.compare
        print(f"previous path, {args.compare} resamples (x{scale:g} to {args.resamples}):")
        for name, t in old_times.items():
            print(f"  {name:<12} {t:8.2f} s  -> {t * scale:8.1f} s")
        old_total = sum(old_times.values()) * scale
        print(f"  {'total':<12} {old_total:8.1f} s (scaled); speed-up {old_total / total:.1f}x")
        print(f"same intervals as the previous path (6 decimals, same seed): {same} "
              f"(max |diff| {np.nanmax(np.abs(a - b)):.1e} over {a.size} bounds)")


if __name__ == "__main__":
    main()
