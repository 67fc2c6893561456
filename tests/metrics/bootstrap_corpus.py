"""A seeded corpus of bootstrap problems (scores, targets, patient groups, metric, options).

``tools/bootstrap_reference.py`` runs an older commit's ``bootstrap_ci`` / ``summarize`` on it
and stores the results under ``tests/metrics/data/``; ``test_bootstrap_reference.py`` rebuilds
the same inputs and checks the current code against them. Changing a case here changes the
inputs: re-run the tool (at the commit named in the fixture) after any edit.

Only numpy, torch and the public registry / stats / summary API are used, so the same module
drives the old and the new code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

N_CASES = 160

# (registry name, options, kinds it accepts)
METRIC_SPECS: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("auroc", {}, ("binary", "multilabel", "multiclass")),
    ("auroc", {"average": "macro"}, ("multilabel", "multiclass")),
    ("auroc", {"average": "micro"}, ("multilabel",)),
    ("auroc", {"average": "weighted"}, ("multilabel", "multiclass")),
    ("auprc", {}, ("binary", "multilabel", "multiclass")),
    ("auprc", {"average": "macro"}, ("multilabel",)),
    ("auprc", {"average": "micro"}, ("multilabel",)),
    ("auprc", {"average": "weighted"}, ("multilabel", "multiclass")),
    ("sensitivity", {"threshold": 0.5}, ("binary", "multilabel", "multiclass")),
    ("sensitivity", {"threshold": 0.3, "average": "macro"}, ("multilabel",)),
    ("specificity", {"threshold": 0.5}, ("binary", "multilabel", "multiclass")),
    ("specificity", {"threshold": 0.6, "average": "weighted"}, ("multilabel",)),
    ("f1", {}, ("binary", "multilabel", "multiclass")),
    ("f1", {"average": "micro"}, ("multilabel", "multiclass")),
    ("f1", {"zero_division": 0.0, "average": "macro"}, ("multilabel",)),
    ("accuracy", {}, ("binary", "multilabel", "multiclass")),
    ("accuracy", {"average": "macro"}, ("multilabel", "multiclass")),
    ("accuracy", {"average": None}, ("multilabel",)),
    ("balanced_accuracy", {}, ("binary", "multilabel", "multiclass")),
    ("balanced_accuracy", {"average": None}, ("multilabel", "multiclass")),
    ("sensitivity_at_specificity", {"specificity": 0.8}, ("binary", "multilabel")),
    ("sensitivity_at_specificity", {"specificity": 0.5, "average": "macro"}, ("multilabel", "multiclass")),
    ("ece", {}, ("binary", "multilabel", "multiclass")),
    ("ece", {"norm": "max"}, ("binary", "multilabel", "multiclass")),
    ("ece", {"average": "weighted", "n_bins": 7}, ("multilabel",)),
    ("ece", {"average": "macro", "n_bins": 3}, ("multilabel",)),
]


def _scores(rng: np.random.Generator, kind: str, n: int, k: int, y: np.ndarray, decimals: int | None) -> np.ndarray:
    if kind == "multiclass":
        logits = rng.normal(size=(n, k))
        labelled = ~np.isnan(y)
        logits[labelled, y[labelled].astype(int)] += rng.uniform(0, 2)
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        if decimals is not None:  # ties; rows stay within 1e-3 of a sum of 1 after renormalising
            p = np.round(p, decimals)
            p = p / p.sum(1, keepdims=True)
        return p
    logits = rng.normal(size=(n, k)) + rng.uniform(0, 2.5) * np.nan_to_num(y)
    s = 1 / (1 + np.exp(-logits))
    return np.round(s, decimals) if decimals is not None else s


def _targets(rng: np.random.Generator, kind: str, n: int, k: int) -> np.ndarray:
    if kind == "multiclass":
        y = rng.integers(0, k, n).astype(np.float64)
        if rng.random() < 0.3:
            y[y == k - 1] = 0  # a class nobody has
        if rng.random() < 0.3:
            y[rng.random(n) < 0.1] = np.nan
        return y
    prev = rng.choice([0.02, 0.1, 0.3, 0.5, 0.8], size=k)
    y = (rng.random((n, k)) < prev).astype(np.float64)
    special = rng.random(k)
    y[:, special < 0.08] = 0.0  # constant labels
    y[:, (special >= 0.08) & (special < 0.14)] = 1.0
    rare = (special >= 0.14) & (special < 0.22)
    y[:, rare] = 0.0
    y[rng.integers(0, n), rare] = 1.0  # a single positive
    if kind == "multilabel":
        y[:, (special >= 0.22) & (special < 0.26)] = np.nan  # a label nobody annotated
        if rng.random() < 0.5:
            y[rng.random((n, k)) < 0.1] = np.nan
    return y


def _groups(rng: np.random.Generator, n: int) -> np.ndarray | None:
    style = rng.integers(0, 4)
    if style == 0:
        return None
    if style == 1:  # 1-5 images per patient
        sizes = rng.integers(1, 6, n)
    elif style == 2:  # very uneven clusters
        sizes = rng.geometric(0.15, n)
    else:  # few patients: single-class and empty resamples are common
        sizes = np.full(n, max(1, n // int(rng.integers(2, 6))))
    patient = np.repeat(np.arange(n), sizes)[:n]
    patient[-1] = n  # at least two patients
    return rng.permutation(patient).astype(str)


def case(i: int) -> dict[str, Any]:
    """The i-th problem: inputs, metric spec and bootstrap options (a pure function of i)."""
    rng = np.random.default_rng(10_000 + i)
    name, options, kinds = METRIC_SPECS[i % len(METRIC_SPECS)]
    kind = kinds[int(rng.integers(0, len(kinds)))]
    n = int(rng.choice([8, 30, 90, 250]))
    k = 1 if kind == "binary" else int(rng.integers(2, 6) if kind == "multilabel" else rng.integers(3, 6))
    decimals = [None, 1, 2, 3][int(rng.integers(0, 4))]
    y = _targets(rng, kind, n, k)
    s = _scores(rng, kind, n, k, y, decimals)
    if kind == "binary":
        s, y = s[:, 0], np.nan_to_num(y[:, 0])
    return {
        "name": name,
        "options": dict(options),
        "kind": kind,
        "pred": s,
        "target": y,
        "groups": _groups(rng, n),
        "n_resamples": int(rng.integers(20, 90)),
        "method": "bca" if rng.random() < 0.2 else "percentile",
        "seed": int(rng.integers(0, 1000)),
        "append_mean": bool(rng.random() < 0.6),
    }


def run_case(i: int, bootstrap_ci: Any, create_metric: Any) -> dict[str, np.ndarray]:
    """``bootstrap_ci`` of case ``i`` through the metric's bound ``functional`` (the path the
    run summary takes): estimate, low, high, n_valid and std_error as float64 arrays."""
    import torch

    c = case(i)
    metric = create_metric(c["name"], **c["options"])
    res = bootstrap_ci(metric.functional, torch.from_numpy(c["pred"]), torch.from_numpy(c["target"]),
                       n_resamples=c["n_resamples"], method=c["method"], groups=c["groups"], seed=c["seed"],
                       append_mean=c["append_mean"])
    return {k: np.asarray(getattr(res, k), dtype=np.float64).reshape(-1)
            for k in ("estimate", "low", "high", "n_valid", "std_error")}


SUMMARY_METRICS: list[tuple[str, dict[str, Any]]] = [
    ("auroc", {}), ("auprc", {}), ("sensitivity", {"threshold": 0.5}), ("specificity", {"threshold": 0.5}),
    ("ece", {}), ("auroc", {"average": "macro"}), ("f1", {}), ("sensitivity_at_specificity", {"specificity": 0.9}),
]


def summary_inputs(n: int = 3000, k: int = 6, seed: int = 5) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, str]]:
    """A multi-label run's scores, targets, sample ids and patient of each id (ties, unlabelled)."""
    rng = np.random.default_rng(seed)
    y = (rng.random((n, k)) < np.linspace(0.02, 0.3, k)).astype(np.float64)
    s = np.round(1 / (1 + np.exp(-(rng.normal(size=(n, k)) + 1.5 * y))), 3)
    y[rng.random((n, k)) < 0.05] = np.nan
    ids = [f"s{i}" for i in range(n)]
    patient = rng.integers(0, n // 3, n)
    return s, y, ids, {ids[i]: f"p{patient[i]}" for i in range(n)}


def run_summary(summarize: Any, create_metric: Any, n_resamples: int = 200) -> dict[str, Any]:
    """``summarize`` of the :data:`SUMMARY_METRICS` on :func:`summary_inputs`, fed in batches."""
    import pandas as pd
    import torch

    s, y, ids, patients = summary_inputs()
    metrics = {}
    for j, (name, options) in enumerate(SUMMARY_METRICS):
        m = create_metric(name, **options)
        for a in range(0, len(ids), 512):
            m.update(torch.from_numpy(s[a : a + 512]), torch.from_numpy(y[a : a + 512]), ids=ids[a : a + 512])
        metrics[f"{name}_{j}"] = m
    return summarize(metrics, pd.DataFrame({"id": ids, "status": "ok"}), patients=patients,
                     n_resamples=n_resamples, seed=3)
