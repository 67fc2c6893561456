"""Bootstrap at scale: the run summary of the default classification metrics vs scikit-learn.

    python benchmarks/bootstrap_scale.py [--n 100000] [--labels 14] [--large-n 10000]
        [--large-labels 366] [--per-patient 3.3] [--resamples 1000] [--per-metric]
        [--check 20] [--device cpu|cuda] [--repeats 1] [--threads N]

For each of two problems — ``n`` samples × ``labels`` (NIH CXR-14 sized) and ``large-n`` ×
``large-labels`` (a Pillar-0-sized CT label set) — builds scores and multi-hot targets
(prevalence 1–20 %, 5 % of labels unlabelled, scores rounded to 3 decimals so ties occur) from
``n / per-patient`` patients, feeds the five default metrics (AUROC, AUPRC, sensitivity,
specificity, ECE) and times ``engine.summary.summarize`` with a ``resamples``-resample
patient-clustered percentile bootstrap, in the same run as one scikit-learn ``roc_auc_score``
pass over the same data (one call per label on its labelled samples). Prints both times and
their ratio (goals: ≤ 15× for the first problem, ≤ 10 s for the second).

Process CPU seconds are printed beside the wall-clock ones (on a machine shared with other
jobs the CPU ratio is the steadier figure). ``--per-metric`` also times each metric alone; ``--check B`` reruns ``B`` resamples
through the plain path (each resample's rows through the metric, no fast path) with the same
seed and prints the largest difference of the interval bounds. Wall-clock seconds (best of
``--repeats``); the device is the one holding the scores.
"""

from __future__ import annotations

import argparse
import time
import warnings
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


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _summary_time(metrics: dict[str, Any], patients: dict[str, str], resamples: int, device: str
                  ) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one ``summarize``."""
    import pandas as pd

    from medimg_bench.engine.summary import summarize

    _sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    summarize(metrics, pd.DataFrame({"id": []}), patients=patients, n_resamples=resamples, seed=0)
    _sync(device)
    return time.perf_counter() - t0, time.process_time() - c0


def _sklearn_time(s: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    from sklearn.metrics import roc_auc_score

    sn, yn = s.cpu().numpy(), y.cpu().numpy()
    t0, c0 = time.perf_counter(), time.process_time()
    for j in range(sn.shape[1]):
        keep = ~np.isnan(yn[:, j])
        roc_auc_score(yn[keep, j], sn[keep, j])
    return time.perf_counter() - t0, time.process_time() - c0


def _check(metrics: dict[str, Any], patients: dict[str, str], resamples: int) -> float:
    """Largest |difference| of the interval bounds: fast paths vs each resample's rows."""
    from medimg_bench.metrics.stats import bootstrap_ci, bootstrap_cis

    some = next(iter(metrics.values()))
    groups = [patients[i] for i in some.ids]
    items = [(m.functional, *m.state_arrays()) for m in metrics.values()]
    fast = bootstrap_cis(items, n_resamples=resamples, groups=groups, seed=0, append_mean=True)
    worst = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (fn, p, t), f in zip(items, fast):
            slow = bootstrap_ci(lambda a, b, fn=fn: fn(a, b), p, t, n_resamples=resamples, groups=groups,
                                seed=0, append_mean=True)
            for a, b in ((f.low, slow.low), (f.high, slow.high)):
                if not np.array_equal(np.isnan(a), np.isnan(b)):
                    return float("inf")
                worst = max(worst, float(np.nanmax(np.abs(a - b), initial=0.0)))
    return worst


def _problem(args: argparse.Namespace, n: int, labels: int) -> tuple[float, float]:
    s, y, ids, patients = _data(n, labels, args.per_patient, args.device)
    metrics = _metrics(s, y, ids)
    print(f"n={n} labels={labels} patients={len(set(patients.values()))} resamples={args.resamples} "
          f"device={args.device} torch threads={torch.get_num_threads()}")
    ours = min(_summary_time(metrics, patients, args.resamples, args.device) for _ in range(args.repeats))
    sk = min(_sklearn_time(s, y) for _ in range(args.repeats))
    print(f"  summary, five metrics   {ours[0]:8.2f} s  (CPU {ours[1]:.2f} s)")
    print(f"  sklearn roc_auc_score   {sk[0]:8.3f} s  (CPU {sk[1]:.3f} s; one pass, {labels} labels)")
    print(f"  ratio                   {ours[0] / sk[0]:8.1f} x  (CPU {ours[1] / sk[1]:.1f} x)")
    if args.per_metric:
        for name, m in metrics.items():
            t = _summary_time({name: m}, patients, args.resamples, args.device)
            print(f"    {name:<12} alone {t[0]:8.2f} s  (CPU {t[1]:.2f} s)")
    if args.check:
        print(f"  max |bound difference| vs the plain path ({args.check} resamples): "
              f"{_check(metrics, patients, args.check):.1e}")
    return ours[0], sk[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=14)
    parser.add_argument("--large-n", type=int, default=10_000)
    parser.add_argument("--large-labels", type=int, default=366)
    parser.add_argument("--per-patient", type=float, default=3.3, help="images per patient (NIH CXR-14: 3.7)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--per-metric", action="store_true")
    parser.add_argument("--check", type=int, default=0, help="compare with the plain path on this many resamples")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    ours, sk = _problem(args, args.n, args.labels)
    large, _ = _problem(args, args.large_n, args.large_labels)
    print(f"goal 1: {args.n} x {args.labels} summary / sklearn pass = {ours / sk:.1f}x (goal <= 15x): "
          f"{'met' if ours / sk <= 15 else 'NOT met'}")
    print(f"goal 2: {args.large_n} x {args.large_labels} summary = {large:.2f} s (goal <= 10 s): "
          f"{'met' if large <= 10 else 'NOT met'}")


if __name__ == "__main__":
    main()
