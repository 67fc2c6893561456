"""Plots a task draws for a run (matplotlib with the Agg backend; no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["plot_roc", "plot_per_class"]


_MM_METRICS = {"hd95", "hausdorff", "hausdorff_distance", "assd", "masd"}


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _literal(text: object) -> str:
    """``text`` as matplotlib shows it literally: ``$`` escaped, so a class named ``$x_{$`` is
    not parsed as mathtext (an unbalanced formula raises while the figure is drawn)."""
    return str(text).replace("$", r"\$")


def plot_roc(samples: pd.DataFrame, path: Path, *, title: str = "") -> Path | None:
    """ROC curve per class from the ``score``/``label`` columns; returns the PNG path."""
    from sklearn.metrics import roc_auc_score, roc_curve

    if not {"score", "label", "class"} <= set(samples.columns):
        return None
    ok = samples[(samples["status"] == "ok") & samples["label"].notna()]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 5), dpi=100)
    for cname, grp in ok.groupby("class", sort=False):
        y = grp["label"].to_numpy()
        if len(np.unique(y)) < 2:
            continue
        fpr, tpr, _ = roc_curve(y, grp["score"].to_numpy())
        ax.plot(fpr, tpr, label=f"{_literal(cname)} (AUC {roc_auc_score(y, grp['score']):.3f})")
    ax.plot([0, 1], [0, 1], "k--", lw=0.8)
    ax.set(xlabel="1 − specificity", ylabel="sensitivity", title=_literal(f"ROC {title}".strip()), xlim=(0, 1), ylim=(0, 1.01))
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_per_class(samples: pd.DataFrame, column: str, path: Path, *, title: str = "") -> Path | None:
    """Box plot of a per-sample metric per class, with the mean marked; returns the PNG path."""
    if column not in samples.columns or "class" not in samples.columns:
        return None
    ok = samples[samples["status"] == "ok"]
    groups = [(c, g[column].dropna().to_numpy(dtype=float)) for c, g in ok.groupby("class", sort=False)]
    groups = [(c, v) for c, v in groups if len(v)]
    if not groups:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(groups)), 4), dpi=100)
    ax.boxplot([v for _, v in groups], tick_labels=[_literal(c) for c, _ in groups], showmeans=True)
    unit = " (mm)" if column in _MM_METRICS else ""
    ax.set(ylabel=_literal(f"{column}{unit}"), title=_literal(f"{column} per class {title}".strip()))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
