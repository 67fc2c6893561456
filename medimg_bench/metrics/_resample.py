"""Cluster-level fast paths for the bootstrap of dataset-level metrics.

A bootstrap resample is a vector of counts ``c`` (how often each patient/cluster is drawn). Every
quantity the classification metrics need from a resample is a sum of per-sample contributions
weighted by the count of the sample's cluster, so it is ``M @ c`` for a fixed matrix ``M``
(rows: the sums needed, columns: clusters) built once from the scores. Products for a block of
resamples are one sparse (or dense, when that is cheaper) matrix product; nothing of size
resamples × samples is ever built.

* confusion counts (sensitivity, specificity, F1, accuracy ...): ``tp/fp/fn/tn`` per label;
* ECE: count, confidence sum and outcome sum per label and bin;
* ranking metrics (AUROC, AUPRC, sensitivity at specificity): each label's samples sorted once
  into tie groups; groups holding a positive stay separate and each run of negative-only groups
  is merged into one entry (the cumulative counts the metrics read at positive groups, and the
  operating points, do not change), then the positive and negative weight per entry.

The values equal those of the resampled data up to floating-point summation order (tested
against a plain loop over resamples). Products run on the scores' device: scipy on the CPU,
``torch`` (cuSPARSE / cuBLAS) on CUDA.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__: list[str] = []  # private module

ClusterFn = Callable[[torch.Tensor], torch.Tensor]

_DENSE_MAX_BYTES = 256 * 2**20
_SCIPY_ON_CPU = True  # tests switch this off to run the torch (CUDA) products on CPU


class ClusterProduct:
    """``M`` (K × G) from per-sample contributions: ``rows`` (which sum), ``clusters`` and
    ``values``; ``__call__(counts (b, G))`` returns the sums ``(K, b)`` as float64 on ``device``."""

    def __init__(
        self, rows: np.ndarray, clusters: np.ndarray, values: np.ndarray | None, *,
        n_rows: int, n_clusters: int, device: torch.device,
    ) -> None:
        import scipy.sparse as sp

        rows = np.asarray(rows, dtype=np.int64)
        vals = np.ones(rows.shape[0]) if values is None else np.asarray(values, dtype=np.float64)
        m = sp.csr_matrix((vals, (rows, np.asarray(clusters, dtype=np.int64))),
                          shape=(n_rows, n_clusters))
        m.sum_duplicates()
        self.shape = (n_rows, n_clusters)
        self.device = device
        dense_bytes = 8 * n_rows * n_clusters
        # a dense product does ~K·G work at BLAS speed, a sparse one ~nnz at gather speed
        self.dense = dense_bytes <= _DENSE_MAX_BYTES and n_rows * n_clusters <= 16 * max(1, m.nnz)
        self.scipy = device.type == "cpu" and _SCIPY_ON_CPU
        if self.scipy:
            self.matrix: Any = m.toarray() if self.dense else m
        elif self.dense:
            self.matrix = torch.from_numpy(m.toarray()).to(device)
        else:
            with warnings.catch_warnings():  # "sparse CSR support is in beta" and the like
                warnings.simplefilter("ignore", UserWarning)
                self.matrix = torch.sparse_csr_tensor(
                    torch.from_numpy(m.indptr).long(), torch.from_numpy(m.indices).long(),
                    torch.from_numpy(m.data), size=self.shape,
                ).to(device)

    def __call__(self, counts: torch.Tensor) -> torch.Tensor:
        if self.scipy:
            c = np.ascontiguousarray(counts.detach().cpu().numpy().T, dtype=np.float64)
            return torch.from_numpy(np.asarray(self.matrix @ c))
        return self.matrix @ counts.to(self.device, torch.float64).T.contiguous()


def average_rows(values: torch.Tensor, support: torch.Tensor | None, average: str | None,
                 kind: str) -> torch.Tensor:
    """Row-wise form of ``classification._average``: ``values`` (b, L) → (b, L) or (b, 1)."""
    if average is None:
        return values[:, :1] if kind == "binary" else values
    defined = ~values.isnan()
    if average == "macro":
        wts = defined.to(torch.float64)
    else:
        wts = support.to(torch.float64) * defined  # type: ignore[union-attr]
    out = (values.nan_to_num() * wts).sum(1) / wts.sum(1)
    return torch.where(defined.any(1), out, float("nan"))[:, None]


def _cluster_of(cluster: np.ndarray, n: int, repeat: int = 1) -> np.ndarray:
    c = np.asarray(cluster, dtype=np.int64)
    if c.shape[0] != n:
        raise ValueError(f"cluster index has {c.shape[0]} entries for {n} samples")
    return np.repeat(c, repeat) if repeat > 1 else c


# -- confusion counts -----------------------------------------------------------------------------
def confusion_plan(hard: torch.Tensor, y: torch.Tensor, cluster: np.ndarray, n_clusters: int
                   ) -> Callable[[torch.Tensor], dict[str, torch.Tensor]]:
    """``counts (b, G)`` → weighted ``tp/fp/fn/tn`` as (b, L) tensors, from 0/1 decisions
    ``hard`` and 0/1/NaN labels ``y`` (N, L)."""
    h = hard.detach().cpu().numpy().astype(bool)
    yn = y.detach().cpu().numpy()
    n, n_labels = yn.shape
    labelled = ~np.isnan(yn)
    code = np.where(h, np.where(yn == 1, 0, 1), np.where(yn == 1, 2, 3))  # tp fp fn tn
    rows = (np.arange(n_labels)[None, :] * 4 + code)[labelled]
    cl = np.broadcast_to(_cluster_of(cluster, n)[:, None], (n, n_labels))[labelled]
    prod = ClusterProduct(rows, cl, None, n_rows=4 * n_labels, n_clusters=n_clusters,
                          device=hard.device)

    def counts_of(counts: torch.Tensor) -> dict[str, torch.Tensor]:
        r = prod(counts).reshape(n_labels, 4, -1)
        return {k: r[:, i].T for i, k in enumerate(("tp", "fp", "fn", "tn"))}

    return counts_of


# -- calibration ----------------------------------------------------------------------------------
def calibration_plan(conf: torch.Tensor, outcome: torch.Tensor, n_bins: int, cluster: np.ndarray,
                     n_clusters: int) -> Callable[[torch.Tensor], tuple[torch.Tensor, ...]]:
    """``counts (b, G)`` → per (b, L, bins): count, confidence sum and outcome sum."""
    cn = conf.detach().cpu().numpy()
    on = outcome.detach().cpu().numpy()
    n, n_labels = cn.shape
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64)
    # the same bucketize as reliability_diagram, so bin edges agree bit for bit
    bins = (torch.bucketize(conf.detach().cpu().contiguous(), edges, right=True) - 1).clamp(0, n_bins - 1).numpy()
    labelled = ~np.isnan(on)
    base = (np.arange(n_labels)[None, :] * n_bins + bins)[labelled] * 3
    cl = np.broadcast_to(_cluster_of(cluster, n)[:, None], (n, n_labels))[labelled]
    rows = np.concatenate([base, base + 1, base + 2])
    vals = np.concatenate([np.ones(base.shape[0]), cn[labelled], on[labelled]])
    prod = ClusterProduct(rows, np.concatenate([cl, cl, cl]), vals, n_rows=3 * n_labels * n_bins,
                          n_clusters=n_clusters, device=conf.device)

    def sums(counts: torch.Tensor) -> tuple[torch.Tensor, ...]:
        r = prod(counts).reshape(n_labels, n_bins, 3, -1).permute(3, 0, 1, 2)
        return r[..., 0], r[..., 1], r[..., 2]

    return sums


# -- ranking --------------------------------------------------------------------------------------
class RankingPlan:
    """Per label, the positive and negative weight of each entry (tie group holding a positive,
    or merged run of negative-only groups) in ascending score order, for any resample counts."""

    def __init__(self, s: torch.Tensor, y: torch.Tensor, cluster: np.ndarray, n_clusters: int) -> None:
        sn = s.detach().cpu().numpy()
        yn = y.detach().cpu().numpy()
        n, n_labels = sn.shape
        cl_all = _cluster_of(cluster, n)
        rows, cols = [], []
        self.offsets = [0]
        for j in range(n_labels):
            idx = np.flatnonzero(~np.isnan(yn[:, j]))
            order = idx[np.argsort(sn[idx, j], kind="stable")]
            ss, pos = sn[order, j], yn[order, j] == 1
            if order.size == 0:
                self.offsets.append(self.offsets[-1])
                continue
            group = np.concatenate([[0], np.cumsum(ss[1:] != ss[:-1])])
            has_pos = np.bincount(group, weights=pos, minlength=int(group[-1]) + 1) > 0
            starts = has_pos.copy()
            starts[0] = True
            starts[1:] |= has_pos[:-1]
            entry = (np.cumsum(starts) - 1)[group]
            rows.append(2 * (self.offsets[-1] + entry) + (~pos))
            cols.append(cl_all[order])
            self.offsets.append(self.offsets[-1] + int(starts.sum()))
        total = self.offsets[-1]
        self.n_labels = n_labels
        self.product = ClusterProduct(
            np.concatenate(rows) if rows else np.zeros(0, np.int64),
            np.concatenate(cols) if cols else np.zeros(0, np.int64),
            None, n_rows=2 * total, n_clusters=n_clusters, device=s.device,
        )

    def cumulative(self, counts: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
        """Per label, cumulative positive and negative weights at each entry's end, (b, E)."""
        r = self.product(counts)
        r = r.reshape(-1, 2, r.shape[-1])
        out: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        for j in range(self.n_labels):
            a, b = self.offsets[j], self.offsets[j + 1]
            if a == b:
                out.append(None)
                continue
            part = r[a:b]
            out.append((part[:, 0].cumsum(0).T, part[:, 1].cumsum(0).T))
        return out
