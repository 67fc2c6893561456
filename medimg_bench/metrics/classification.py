"""Classification metrics: ranking (AUROC, AUPRC, operating points) and thresholded counts.

Inputs (torch tensors on any device, or numpy arrays; outputs are float64 tensors on the
input's device, numpy inputs give CPU tensors):

* binary: scores ``(N,)`` and 0/1 targets ``(N,)``;
* multi-class: scores ``(N, K)`` and integer targets ``(N,)`` in ``[0, K)`` (one-vs-rest);
* multi-label: scores ``(N, K)`` and multi-hot targets ``(N, K)``; a NaN target means
  "unlabelled" and drops that sample from that label only (CheXpert-style).

Ranking metrics sort every label once, all labels together (numpy's vectorised sort on CPU,
``torch.sort`` on CUDA) and count ties with cumulative sums over the distinct score values, so
tied scores count ½ exactly as in scikit-learn. A label whose value is undefined (one class
present, no positives, a zero denominator) is NaN with a warning naming it; ``"macro"`` and
``"weighted"`` averages skip NaN labels.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from medimg_bench.metrics._utils import as_tensor
from medimg_bench.metrics.base import Metric, checked_once
from medimg_bench.registry import register_metric

__all__ = [
    "macro_rank_auroc",
    "auroc",
    "auprc",
    "average_precision",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "confusion_counts",
    "weighted_ranking",
    "prepare_inputs",
    "accuracy",
    "balanced_accuracy",
    "f1",
    "ppv",
    "sensitivity",
    "specificity",
    "AUROC",
    "AUPRC",
    "Accuracy",
    "BalancedAccuracy",
    "F1",
    "Sensitivity",
    "Specificity",
    "SensitivityAtSpecificity",
]

_AVERAGES = (None, "macro", "micro", "weighted")


# -- input handling -------------------------------------------------------------------------------
def prepare_inputs(pred: Any, target: Any) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Scores and labels as float64 ``(N, L)`` tensors (labels 0/1/NaN) and the task kind.

    Multi-class integer targets become one-hot columns; rows with a NaN class are NaN in every
    column. Raises ``ValueError`` naming the problem for bad shapes or values.
    """
    s = as_tensor(pred, name="pred")
    y = as_tensor(target, name="target")
    if s.ndim not in (1, 2) or y.ndim not in (1, 2):
        raise ValueError(f"pred must be (N,) or (N, K) and target (N,) or (N, K); got {tuple(s.shape)} and {tuple(y.shape)}")
    if s.shape[0] != y.shape[0]:
        raise ValueError(f"pred and target lengths differ: {s.shape[0]} vs {y.shape[0]}")
    if s.shape[0] == 0:
        raise ValueError("pred and target are empty")
    s = s.detach().to(torch.float64)
    y = y.detach().to(device=s.device, dtype=torch.float64)
    finite = np.isfinite(s.numpy()).all() if s.device.type == "cpu" else bool(torch.isfinite(s).all())
    if not finite:
        raise ValueError("pred contains NaN or inf scores")
    if s.ndim == 1 or (s.ndim == 2 and y.ndim == 2):
        s2 = s[:, None] if s.ndim == 1 else s
        y2 = y[:, None] if y.ndim == 1 else y
        if s2.shape != y2.shape:
            raise ValueError(f"pred shape {tuple(s.shape)} does not match target shape {tuple(y.shape)}")
        if not _binary_values(y2):
            value = y2[~((y2 == 0) | (y2 == 1) | y2.isnan())][0].item()
            raise ValueError(f"target has value {value} that is not a class; expected 0, 1 or NaN")
        kind = "binary" if s.ndim == 1 else "multilabel"
        return s2, y2, kind
    k = s.shape[1]
    labelled = ~y.isnan()
    yl = y[labelled]
    if ((yl < 0) | (yl >= k) | (yl != yl.round())).any():
        value = yl[(yl < 0) | (yl >= k) | (yl != yl.round())][0].item()
        raise ValueError(f"target has value {value} that is not a class in [0, {k})")
    onehot = torch.zeros_like(s)
    onehot[labelled] = torch.nn.functional.one_hot(yl.long(), k).to(torch.float64)
    onehot[~labelled] = float("nan")
    return s, onehot, "multiclass"


def _binary_values(y: torch.Tensor) -> bool:
    """Whether every entry of ``y`` is 0, 1 or NaN."""
    if y.device.type == "cpu":
        yn = y.numpy()
        return bool(((yn == 0) | (yn == 1) | (yn != yn)).all())
    return bool(((y == 0) | (y == 1) | y.isnan()).all())


def check_average(average: str | None) -> None:
    if average not in _AVERAGES:
        raise ValueError(f"average must be one of None, 'macro', 'micro', 'weighted'; got {average!r}")


# class names of the metric being computed, so warnings name classes rather than indices
_LABEL_NAMES: contextvars.ContextVar[Sequence[str] | None] = contextvars.ContextVar(
    "medimg_bench_label_names", default=None
)


def label_names(mask: torch.Tensor) -> list[Any]:
    """Names (or indices) of the labels where ``mask`` is true."""
    idx = mask.reshape(-1).nonzero().flatten().tolist()
    names = _LABEL_NAMES.get()
    if names is not None and len(names) == mask.numel():
        return [names[i] for i in idx]
    return idx


def _warn_undefined(values: torch.Tensor, metric: str, why: str) -> None:
    undefined = values.isnan()
    if undefined.any():
        warnings.warn(f"{metric} undefined ({why}) for label(s) {label_names(undefined)}; NaN, "
                      "left out of averages", stacklevel=3)


def average_values(values: torch.Tensor, support: torch.Tensor | None, average: str | None, kind: str) -> torch.Tensor:
    """Reduce per-label ``values`` (L,): ``None`` keeps them, macro/weighted skip NaN labels.
    ``values`` (b, L) (one row per bootstrap resample) gives (b, L) or (b, 1)."""
    if values.ndim == 2:
        from medimg_bench.metrics._resample import average_rows

        return average_rows(values, support, average, kind)
    if average is None:
        return values[0] if kind == "binary" else values
    defined = ~values.isnan()
    if not defined.any():
        return torch.tensor(float("nan"), dtype=torch.float64, device=values.device)
    if average == "macro":
        return values[defined].mean()
    w = support[defined].to(torch.float64)  # type: ignore[index]
    return (values[defined] * w).sum() / w.sum()


# -- sorting and tie groups -----------------------------------------------------------------------
# The group arithmetic below runs on numpy arrays for CPU inputs (numpy's SIMD sort and cheap
# boolean indexing are several times faster than torch's on CPU) and on torch tensors for CUDA
# inputs; the helpers only use operations both libraries share.
Array = Any


_NUMPY_ON_CPU = True  # tests switch this off to run the torch (CUDA) code path on CPU


def _numpy_backend(s: torch.Tensor) -> bool:
    return s.device.type == "cpu" and _NUMPY_ON_CPU


def _argsort_columns(s: torch.Tensor) -> torch.Tensor:
    """Ascending argsort of each row of ``s`` (L, N), on ``s``'s device."""
    if _numpy_backend(s):
        return torch.from_numpy(np.argsort(s.numpy(), axis=1))
    return torch.sort(s, dim=1).indices


def _sort_labels(s: torch.Tensor, y: torch.Tensor) -> tuple[Array, Array, Array]:
    """Each label's scores sorted ascending, its label codes in that order (0 negative,
    1 positive, 2 unlabelled) and the mask of tie-group ends; all (L, N)."""
    n, n_labels = s.shape
    if _numpy_backend(s):
        st = np.ascontiguousarray(s.numpy().T)
        yn = y.numpy()
        codes = (yn == 1).astype(np.int8)
        codes[np.isnan(yn)] = 2
        codes = np.ascontiguousarray(codes.T).ravel()
        order = np.argsort(st, axis=1)
        ss = np.sort(st, axis=1)  # cheaper than gathering the scores through ``order``
        ys = codes[order + (np.arange(n_labels) * n)[:, None]]
        end = np.ones(ss.shape, dtype=bool)
        np.not_equal(ss[:, 1:], ss[:, :-1], out=end[:, :-1])
        return ss, ys, end
    st = s.T.contiguous()
    codes = torch.where(y.isnan(), 2.0, y).to(torch.int8).T.contiguous()
    ss, order = torch.sort(st, dim=1)
    ys = codes.gather(1, order)
    end = torch.ones_like(ss, dtype=torch.bool)
    end[:, :-1] = ss[:, 1:] != ss[:, :-1]
    return ss, ys, end


def _tie_groups(s: torch.Tensor, y: torch.Tensor, sorted_: tuple | None = None) -> dict[str, Array]:
    """Per-label tie groups of ``s``/``y`` (N, L), distinct scores in ascending order.

    Returns flat arrays over all groups of all labels (label by label): ``value`` (the score),
    ``pos``/``neg`` (counts in the group), ``pos_below``/``neg_below`` (counts with a strictly
    lower score), ``n_pos``/``n_neg`` (the label's totals, repeated per group), ``starts`` (first
    group of each label), ``label`` and per label ``label_pos``/``label_neg``. Unlabelled (NaN)
    samples count as neither class.
    """
    n_labels = s.shape[1]
    ss, ys, end = sorted_ if sorted_ is not None else _sort_labels(s, y)
    if isinstance(ss, np.ndarray):
        cum_pos = np.cumsum(ys == 1, axis=1, dtype=np.int64)
        cum_neg = np.cumsum(ys == 0, axis=1, dtype=np.int64)
        n_groups = end.sum(1)
        label = np.repeat(np.arange(n_labels), n_groups)
        idx = np.flatnonzero(end)
        cp = cum_pos.ravel()[idx].astype(np.float64)
        cn = cum_neg.ravel()[idx].astype(np.float64)
        value = ss.ravel()[idx]
        starts = np.cumsum(n_groups) - n_groups
        first = np.zeros(cp.shape, dtype=bool)
        label_pos, label_neg = cum_pos[:, -1].astype(np.float64), cum_neg[:, -1].astype(np.float64)
    else:
        cum_pos = (ys == 1).to(torch.float64).cumsum(1)
        cum_neg = (ys == 0).to(torch.float64).cumsum(1)
        n_groups = end.sum(1)
        label = torch.repeat_interleave(torch.arange(n_labels, device=ss.device), n_groups)
        cp, cn, value = cum_pos[end], cum_neg[end], ss[end]
        starts = torch.cumsum(n_groups, 0) - n_groups
        first = torch.zeros_like(cp, dtype=torch.bool)
        label_pos, label_neg = cum_pos[:, -1], cum_neg[:, -1]
    first[starts] = True
    pos_below = _where(first, 0.0, _shift(cp))
    neg_below = _where(first, 0.0, _shift(cn))
    return {
        "label": label,
        "starts": starts,
        "value": value,
        "pos": cp - pos_below,
        "neg": cn - neg_below,
        "pos_below": pos_below,
        "neg_below": neg_below,
        "n_pos": label_pos[label],
        "n_neg": label_neg[label],
        "label_pos": label_pos,
        "label_neg": label_neg,
    }


def _where(cond: Array, a: Any, b: Any) -> Array:
    return np.where(cond, a, b) if isinstance(cond, np.ndarray) else torch.where(cond, a, b)


def _shift(x: Array) -> Array:
    """``x`` moved one place right (the first entry is then meaningless)."""
    return np.roll(x, 1) if isinstance(x, np.ndarray) else torch.roll(x, 1)


def _safe(den: Array) -> Array:
    """A denominator with zeros replaced by one (the caller masks those entries)."""
    return den + (den == 0)


def _segment(x: Array, g: dict[str, Array], reduce: str) -> Array:
    """Per-label sum or max of group values ``x``."""
    if isinstance(x, np.ndarray):
        ufunc = np.add if reduce == "sum" else np.maximum
        return ufunc.reduceat(x, g["starts"])
    out = torch.zeros_like(g["label_pos"])
    if reduce == "sum":
        return out.index_add_(0, g["label"], x)
    return out.scatter_reduce_(0, g["label"], x, reduce="amax", include_self=False)


def _to_tensor(x: Array, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.asarray(x, dtype=np.float64)) if isinstance(x, np.ndarray) else x.to(device)


def _auroc_columns(s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """AUROC per column, the Mann-Whitney U with ties ½, NaN where one class is absent."""
    if _numpy_backend(s):
        return _auroc_columns_numpy(s, y)
    g = _tie_groups(s, y)
    u = _segment(g["pos"] * (g["neg_below"] + 0.5 * g["neg"]), g, "sum")
    denom = g["label_pos"] * g["label_neg"]
    return _to_tensor(_where(denom > 0, u / _safe(denom), float("nan")), s.device)


def _auroc_columns_numpy(s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """CPU AUROC without an argsort: sort each label's labelled scores and its positives.

    For a positive with score v, ``lo``/``hi`` count the labelled scores < v and ≤ v; summed
    over the positives ``(lo + hi) / 2`` counts every (positive, sample) pair with ties ½, and
    the (positive, positive) pairs contribute exactly P²/2, so U = Σ (lo + hi) / 2 − P²/2.
    """
    n, n_labels = s.shape
    yn = y.numpy()
    unlabelled = np.ascontiguousarray(np.isnan(yn).T)
    is_pos = np.ascontiguousarray((yn == 1).T)
    n_pos = is_pos.sum(1)
    n_lab = n - unlabelled.sum(1)
    # few large temporaries, sorted in place: page faults on fresh memory cost as much as a sort
    ranked = np.array(s.numpy().T, order="C", copy=True)
    positives = np.where(is_pos, ranked, np.inf)
    if unlabelled.any():
        ranked[unlabelled] = np.inf
    ranked.sort(axis=1)
    positives.sort(axis=1)
    twice_u = np.zeros(n_labels, dtype=np.float64)
    for j in range(n_labels):
        row, pos = ranked[j, : n_lab[j]], positives[j, : n_pos[j]]
        lo = np.searchsorted(row, pos, side="left")
        if (row[1:] == row[:-1]).any():
            both = int(lo.sum()) + int(np.searchsorted(row, pos, side="right").sum())
        else:  # no ties: hi = lo + 1
            both = 2 * int(lo.sum()) + int(n_pos[j])
        twice_u[j] = both - int(n_pos[j]) ** 2  # exact integer arithmetic before the division
    denom = n_pos.astype(np.float64) * (n_lab - n_pos)
    return torch.from_numpy(np.where(denom > 0, twice_u / 2 / _safe(denom), np.nan))


def _ap_columns(s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Average precision per column (scikit-learn's step sum), NaN where no positive exists."""
    g = _tie_groups(s, y)
    tp = g["n_pos"] - g["pos_below"]  # predicted positive at threshold = this group's score
    fp = g["n_neg"] - g["neg_below"]
    prec = _where(tp + fp > 0, tp / _safe(tp + fp), 0.0)
    ap = _segment(g["pos"] * prec, g, "sum")
    return _to_tensor(_where(g["label_pos"] > 0, ap / _safe(g["label_pos"]), float("nan")), s.device)


def _flatten_micro(s: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return s.reshape(-1, 1), y.reshape(-1, 1)


def _ranking(pred: Any, target: Any, average: str | None, fn: Any, name: str, why: str) -> torch.Tensor:
    check_average(average)
    s, y, kind = prepare_inputs(pred, target)
    if average == "micro":
        out = fn(*_flatten_micro(s, y))
        _warn_undefined(out, name, why)
        return out[0]
    per_label = fn(s, y)
    _warn_undefined(per_label, name, why)
    support = (y == 1).sum(0) if average == "weighted" else None
    return average_values(per_label, support, average, kind)


def auroc(pred: Any, target: Any, *, average: str | None = "macro") -> torch.Tensor:
    """Area under the ROC curve (ties count ½, as scikit-learn's ``roc_auc_score``).

    Returns a 0-d tensor, or ``(K,)`` per label with ``average=None``. Multi-class is
    one-vs-rest; ``"weighted"`` weights labels by their number of positives; ``"micro"`` pools
    every labelled (sample, label) pair. Labels with one class present are NaN (warned).
    """
    return _ranking(pred, target, average, _auroc_columns, "auroc", "only one class present")


def auprc(pred: Any, target: Any, *, average: str | None = "macro") -> torch.Tensor:
    """Average precision ``Σ_n (R_n − R_{n−1}) P_n`` over distinct thresholds (scikit-learn's).

    Returns a 0-d tensor, or ``(K,)`` with ``average=None``. Labels without positives are NaN
    (scikit-learn returns 0 with a warning there) and left out of the averages.
    """
    return _ranking(pred, target, average, _ap_columns, "auprc", "no positive sample")


average_precision = auprc


def _operating_point(pred: Any, target: Any, level: float, fixed: str, average: str | None) -> torch.Tensor:
    if not 0 <= level <= 1:
        raise ValueError(f"{fixed} must be in [0, 1], got {level}")
    check_average(average)
    if average in ("micro", "weighted"):
        raise ValueError(f"average must be None or 'macro' for operating points, got {average!r}")
    s, y, kind = prepare_inputs(pred, target)
    g = _tie_groups(s, y)
    sens = (g["n_pos"] - g["pos_below"]) / _safe(g["n_pos"])  # positive when score >= group's
    spec = g["neg_below"] / _safe(g["n_neg"])
    if fixed == "specificity":
        cand = _where(spec >= level - 1e-12, sens, 0.0)
    else:
        cand = _where(sens >= level - 1e-12, spec, 0.0)
    best = _to_tensor(_segment(cand, g, "max"), s.device)
    # the empty classifier (sensitivity 0, specificity 1) is an operating point too
    if fixed == "sensitivity" and level <= 0:
        best = torch.ones_like(best)
    defined = _to_tensor((g["label_pos"] > 0) & (g["label_neg"] > 0), s.device).bool()
    best = torch.where(defined, best, float("nan"))
    _warn_undefined(best, f"{'sensitivity' if fixed == 'specificity' else 'specificity'}_at_{fixed}", "only one class present")
    return average_values(best, (y == 1).sum(0), average, kind)


def sensitivity_at_specificity(
    pred: Any, target: Any, *, specificity: float, average: str | None = "macro"
) -> torch.Tensor:
    """Highest sensitivity over thresholds whose specificity is ≥ ``specificity`` (0-d or (K,))."""
    return _operating_point(pred, target, specificity, "specificity", average)


def specificity_at_sensitivity(
    pred: Any, target: Any, *, sensitivity: float, average: str | None = "macro"
) -> torch.Tensor:
    """Highest specificity over thresholds whose sensitivity is ≥ ``sensitivity`` (0-d or (K,))."""
    return _operating_point(pred, target, sensitivity, "sensitivity", average)


def _weighted_groups(cp: Array, cn: Array, metric: str) -> tuple[Array, Array]:
    """AUROC / AP per row from cumulative positive and negative weights at the tie-group ends."""
    zeros = cp[:, :1] * 0
    cat = np.concatenate if isinstance(cp, np.ndarray) else torch.cat
    cp_below = cat([zeros, cp[:, :-1]], 1)
    cn_below = cat([zeros, cn[:, :-1]], 1)
    p_tot, n_tot = cp[:, -1], cn[:, -1]
    pos_g = cp - cp_below
    if metric == "auroc":
        num = (pos_g * (cn_below + 0.5 * (cn - cn_below))).sum(1)
        den = p_tot * n_tot
    else:
        tp, fp = p_tot[:, None] - cp_below, n_tot[:, None] - cn_below
        prec = _where(tp + fp > 0, tp / _safe(tp + fp), 0.0)
        num, den = (pos_g * prec).sum(1), p_tot
    return _where(den > 0, num / _safe(den), float("nan")), p_tot


def _weighted_column_numpy(
    s: np.ndarray, y: np.ndarray, w: np.ndarray, metric: str, step: int
) -> tuple[np.ndarray, np.ndarray]:
    """One label on CPU: values and positive weight for each row of ``w`` (B, N)."""
    valid = np.flatnonzero(~np.isnan(y))
    order = np.argsort(s[valid])
    ss, is_pos = s[valid][order], y[valid][order] == 1
    ties = bool((ss[1:] == ss[:-1]).any())
    ends = np.flatnonzero(np.r_[ss[1:] != ss[:-1], True])
    cols = valid[order]
    pos_cols = np.flatnonzero(is_pos)
    vals, p_tot = np.full(w.shape[0], np.nan), np.zeros(w.shape[0])
    for start in range(0, w.shape[0], step):
        wc = w[start : start + step].take(cols, axis=1)
        if metric == "auroc" and not ties:
            # without ties U = Σ over positives of (their weight × negative weight below them)
            cn = np.cumsum(np.where(is_pos, 0.0, wc), axis=1)
            wp = wc[:, pos_cols]
            num = np.einsum("ij,ij->i", wp, cn[:, pos_cols])
            pt = wp.sum(1)
            den = pt * (wc.sum(1) - pt)
            v = np.where(den > 0, num / _safe(den), np.nan)
        else:
            cp = np.cumsum(np.where(is_pos, wc, 0.0), axis=1)[:, ends]
            cn = np.cumsum(np.where(is_pos, 0.0, wc), axis=1)[:, ends]
            v, pt = _weighted_groups(cp, cn, metric)
        vals[start : start + step], p_tot[start : start + step] = v, pt
    return vals, p_tot


def weighted_ranking(
    pred: Any, target: Any, weights: Any, *, metric: str = "auroc", average: str | None = "macro",
    chunk_elements: int = 4_000_000,
) -> torch.Tensor:
    """AUROC or AUPRC for every row of integer sample ``weights`` (B, N) at once.

    A weight of ``k`` counts a sample ``k`` times, so a row of bootstrap counts gives the metric of
    that resample exactly. Each label is sorted once; the resamples only re-weight the cumulative
    counts. Returns ``(B, L)`` with ``average=None`` (``(B,)`` for binary), else ``(B,)``.
    """
    if metric not in ("auroc", "auprc"):
        raise ValueError(f"metric must be 'auroc' or 'auprc', got {metric!r}")
    check_average(average)
    s, y, kind = prepare_inputs(pred, target)
    w = as_tensor(weights, name="weights").to(device=s.device, dtype=torch.float64)
    if w.ndim != 2 or w.shape[1] != s.shape[0]:
        raise ValueError(f"weights must be (B, {s.shape[0]}), got {tuple(w.shape)}")
    if average == "micro":
        n, k = s.shape
        s, y = _flatten_micro(s, y)
        w = w.repeat_interleave(k, dim=1)
    out = torch.full((w.shape[0], s.shape[1]), float("nan"), dtype=torch.float64, device=s.device)
    n_pos = torch.zeros_like(out)
    step = max(1, chunk_elements // max(1, s.shape[0]))
    for j in range(s.shape[1]):
        valid = ~y[:, j].isnan()
        if not valid.any():
            continue
        if _numpy_backend(s):
            vals, ps = _weighted_column_numpy(s[:, j].numpy(), y[:, j].numpy(), w.numpy(), metric, step)
            out[:, j], n_pos[:, j] = torch.from_numpy(vals), torch.from_numpy(ps)
            continue
        sj, yj = s[valid, j], y[valid, j]
        order = torch.sort(sj).indices
        ss, is_pos = sj[order], (yj[order] == 1).to(torch.float64)
        ends = torch.ones_like(ss, dtype=torch.bool)
        ends[:-1] = ss[1:] != ss[:-1]
        ends = ends.nonzero().flatten()
        wj = w[:, valid.nonzero().flatten()[order]]
        for start in range(0, w.shape[0], step):
            wc = wj[start : start + step]
            cp = (wc * is_pos).cumsum(1)[:, ends]
            cn = (wc * (1 - is_pos)).cumsum(1)[:, ends]
            vals, p_tot = _weighted_groups(cp, cn, metric)
            out[start : start + step, j] = vals
            n_pos[start : start + step, j] = p_tot
    if average == "micro" or (average is None and kind == "binary"):
        return out[:, 0]
    if average is None:
        return out
    defined = ~out.isnan()
    wts = defined.to(torch.float64) if average == "macro" else n_pos * defined
    return (out.nan_to_num() * wts).sum(1) / wts.sum(1)


# -- thresholded metrics --------------------------------------------------------------------------
def confusion_counts(pred: Any, target: Any, *, threshold: float = 0.5) -> dict[str, Any]:
    """One-vs-rest confusion counts per label: ``tp``, ``fp``, ``tn``, ``fn`` as float64 ``(L,)``.

    Binary and multi-label scores are positive when ``score >= threshold`` (pass probabilities,
    or logits with ``threshold=0``); multi-class predictions are the arg-max class. Also returns
    ``kind`` and, for multi-class, ``correct`` (the number of samples whose class is right).
    """
    s, y, kind = prepare_inputs(pred, target)
    hard = _decisions(s, kind, threshold)
    labelled = ~y.isnan()
    yv = torch.where(labelled, y, 0.0)
    lab = labelled.to(torch.float64)
    tp = (hard * yv).sum(0)
    fp = (hard * (1 - yv) * lab).sum(0)
    fn = ((1 - hard) * yv).sum(0)
    tn = ((1 - hard) * (1 - yv) * lab).sum(0)
    out: dict[str, Any] = {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "kind": kind}
    if kind == "multiclass":
        out["correct"] = tp.sum()
    return out


def _decisions(s: torch.Tensor, kind: str, threshold: float) -> torch.Tensor:
    """0/1 decisions (N, L): arg-max class for multi-class, ``score >= threshold`` otherwise."""
    if kind == "multiclass":
        return torch.nn.functional.one_hot(s.argmax(1), s.shape[1]).to(torch.float64)
    return (s >= threshold).to(torch.float64)


def _ratio(num: torch.Tensor, den: torch.Tensor, zero_division: float) -> torch.Tensor:
    return torch.where(den > 0, num / den.clamp_min(1e-300), zero_division)


# name → (numerator, denominator) from confusion counts, and why the denominator can be zero
_FORMULAS: dict[str, tuple[Any, str]] = {
    "sensitivity": (lambda c: (c["tp"], c["tp"] + c["fn"]), "no positive sample"),
    "specificity": (lambda c: (c["tn"], c["tn"] + c["fp"]), "no negative sample"),
    "precision": (lambda c: (c["tp"], c["tp"] + c["fp"]), "nothing predicted positive"),
    "f1": (lambda c: (2 * c["tp"], 2 * c["tp"] + c["fp"] + c["fn"]), "TP + FP + FN = 0"),
}


def _warn_zero_division(den: torch.Tensor, metric: str, why: str, zero_division: float) -> None:
    zero = den.reshape(-1) == 0
    if zero.any():
        value = "NaN, left out of averages" if zero_division != zero_division else f"set to {zero_division}"
        warnings.warn(f"{metric} undefined ({why}) for label(s) {label_names(zero)}; {value}",
                      stacklevel=5)


def _counted_value(c: dict[str, Any], metric: str, *, average: str | None, zero_division: float,
                   warn: bool = True) -> torch.Tensor:
    """``metric`` (a key of ``_FORMULAS``) from confusion counts ``c`` (tensors (L,)), averaged;
    labels with a zero denominator get ``zero_division`` and a warning naming them."""
    formula, why = _FORMULAS[metric]
    if average == "micro":
        c = {k: c[k].sum(-1) for k in ("tp", "fp", "tn", "fn")}
    num, den = formula(c)
    if warn:
        _warn_zero_division(den, metric, why, zero_division)
    per_label = _ratio(num, den, zero_division)
    if average == "micro":
        return per_label
    return average_values(per_label, c["tp"] + c["fn"], average, c["kind"])


def _counted(pred: Any, target: Any, metric: str, *, threshold: float, average: str | None,
             zero_division: float) -> torch.Tensor:
    check_average(average)
    c = confusion_counts(pred, target, threshold=threshold)
    return _counted_value(c, metric, average=average, zero_division=zero_division)


def _sens(c: dict, z: float) -> torch.Tensor:
    return _ratio(c["tp"], c["tp"] + c["fn"], z)


def _spec(c: dict, z: float) -> torch.Tensor:
    return _ratio(c["tn"], c["tn"] + c["fp"], z)


def sensitivity(
    pred: Any, target: Any, *, threshold: float = 0.5, average: str | None = "macro",
    zero_division: float = float("nan"),
) -> torch.Tensor:
    """Sensitivity (recall, TPR) ``TP / (TP + FN)`` per label or averaged (a fraction);
    ``zero_division`` (NaN) with a warning naming the label where it has no positive."""
    return _counted(pred, target, "sensitivity", threshold=threshold, average=average,
                    zero_division=zero_division)


def specificity(
    pred: Any, target: Any, *, threshold: float = 0.5, average: str | None = "macro",
    zero_division: float = float("nan"),
) -> torch.Tensor:
    """Specificity (TNR) ``TN / (TN + FP)`` per label or averaged (a fraction);
    ``zero_division`` (NaN) with a warning naming the label where it has no negative."""
    return _counted(pred, target, "specificity", threshold=threshold, average=average,
                    zero_division=zero_division)


def precision(
    pred: Any, target: Any, *, threshold: float = 0.5, average: str | None = "macro",
    zero_division: float = float("nan"),
) -> torch.Tensor:
    """Precision (PPV) ``TP / (TP + FP)`` per label or averaged; ``zero_division`` (NaN) with a
    warning where nothing is predicted positive."""
    return _counted(pred, target, "precision", threshold=threshold, average=average,
                    zero_division=zero_division)


def f1(
    pred: Any, target: Any, *, threshold: float = 0.5, average: str | None = "macro",
    zero_division: float = float("nan"),
) -> torch.Tensor:
    """F1 ``2TP / (2TP + FP + FN)`` per label or averaged; ``zero_division`` (NaN) with a
    warning when TP + FP + FN = 0.

    Equals scikit-learn's ``f1_score(..., zero_division=np.nan)``; binary input gives the F1 of
    the positive class.
    """
    return _counted(pred, target, "f1", threshold=threshold, average=average,
                    zero_division=zero_division)


# ``medimg_bench.metrics.precision`` is the segmentation metric; the classification one is
# exported as ``ppv`` (and reachable as ``classification.precision``)
ppv = precision


def accuracy(
    pred: Any, target: Any, *, threshold: float = 0.5, average: str | None = "micro"
) -> torch.Tensor:
    """Fraction of correct decisions.

    ``"micro"`` (default): binary and multi-class = fraction of samples right; multi-label =
    fraction of labelled (sample, label) pairs right (not scikit-learn's exact-match subset
    accuracy). Per label (``None``/macro/weighted): multi-label = accuracy of each label,
    multi-class = recall of each class (the torchmetrics convention).
    """
    check_average(average)
    return _accuracy_value(confusion_counts(pred, target, threshold=threshold), average)


def _accuracy_value(c: dict[str, Any], average: str | None, warn: bool = True) -> torch.Tensor:
    if c["kind"] == "multiclass":
        if average == "micro":
            n = c["tp"].sum(-1) + c["fn"].sum(-1)
            if warn and not (n > 0).all():
                warnings.warn("accuracy undefined (no labelled sample); NaN", stacklevel=3)
            return _ratio(c["correct"], n, float("nan"))
        if warn:
            _warn_zero_division(c["tp"] + c["fn"], "accuracy (class recall)", "no sample of the class",
                                float("nan"))
        return average_values(_sens(c, float("nan")), c["tp"] + c["fn"], average, c["kind"])
    total = c["tp"] + c["tn"] + c["fp"] + c["fn"]
    if average == "micro":
        if warn and total.sum() == 0:
            warnings.warn("accuracy undefined (no labelled sample); NaN", stacklevel=3)
        return _ratio((c["tp"] + c["tn"]).sum(-1), total.sum(-1), float("nan"))
    if warn:
        _warn_zero_division(total, "accuracy", "no labelled sample", float("nan"))
    per = _ratio(c["tp"] + c["tn"], total, float("nan"))
    return average_values(per, c["tp"] + c["fn"], average, c["kind"])


def balanced_accuracy(
    pred: Any, target: Any, *, threshold: float = 0.5, average: str | None = "macro"
) -> torch.Tensor:
    """Balanced accuracy: binary/multi-label ``(sensitivity + specificity) / 2`` per label;
    multi-class the mean recall over the classes present in ``target`` (scikit-learn's).

    ``average=None`` gives the per-label (or per-class recall) values; labels whose value is
    undefined (a class absent) are NaN, warned, and skipped by the macro mean.
    """
    if average == "micro":
        raise ValueError("balanced_accuracy has no micro average; use None, 'macro' or 'weighted'")
    check_average(average)
    return _balanced_value(confusion_counts(pred, target, threshold=threshold), average)


def _balanced_value(c: dict[str, Any], average: str | None, warn: bool = True) -> torch.Tensor:
    if c["kind"] == "multiclass":
        per = _sens(c, float("nan"))
        # scikit-learn: the mean recall over the classes present; absent classes are expected
        return average_values(per, c["tp"] + c["fn"], average, c["kind"])
    per = (_sens(c, float("nan")) + _spec(c, float("nan"))) / 2
    if warn:
        _warn_undefined(per, "balanced_accuracy", "one class absent")
    return average_values(per, c["tp"] + c["fn"], average, c["kind"])


# -- stateful forms -------------------------------------------------------------------------------
class ScoreMetric(Metric):
    """Dataset-level metric that keeps the scores and targets and evaluates them at ``compute``.

    ``functional(preds, targets)`` gives a 1-D tensor: one value per label with
    ``average=None`` (the default for label-wise metrics), a single value otherwise; it is
    silent (the bootstrap calls it on every resample). ``compute()`` warns, once per call and
    naming the classes, where a value is undefined. ``cluster_weighted`` is the bootstrap's fast
    path (see ``metrics/_resample.py``).
    """

    per_sample = False
    higher_is_better = True
    value_range = (0.0, 1.0)
    input_kind = "scores"
    concat_updates = True  # update appends the batch's scores, targets and ids

    def __init__(self, *, average: str | None = None, class_names: Sequence[str] | None = None, **options: Any) -> None:
        super().__init__(class_names=class_names)
        check_average(average)
        self.average = average
        self.options = options
        self.add_state("preds", [], dist_reduce_fx="cat")
        self.add_state("targets", [], dist_reduce_fx="cat")

    def _fn(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def update(
        self, preds: Any, targets: Any, meta: Sequence[dict] | None = None, *, ids: Sequence[str] | None = None
    ) -> None:
        p = as_tensor(preds, name="pred").detach()
        t = as_tensor(targets, name="target").detach()
        if p.ndim == 0 or t.ndim == 0:
            raise ValueError(f"{self.name}: pred and target need a batch dimension, got shapes "
                             f"{tuple(p.shape)} and {tuple(t.shape)}")
        if p.shape[0] != t.shape[0]:
            raise ValueError(f"{self.name}: pred and target lengths differ: {p.shape[0]} vs {t.shape[0]}")
        if p.is_floating_point() and not checked_once("finite", preds, lambda: _all_finite(p)):
            bad = (~torch.isfinite(p)).reshape(p.shape[0], -1).any(1).nonzero().flatten().tolist()
            where = [ids[i] for i in bad] if ids is not None else bad
            raise ValueError(f"{self.name}: NaN or inf scores for sample(s) {where[:5]}")
        if self.preds and (p.shape[1:] != self.preds[0].shape[1:] or t.shape[1:] != self.targets[0].shape[1:]):
            raise ValueError(
                f"{self.name}: batch shapes pred {tuple(p.shape)} / target {tuple(t.shape)} differ from the "
                f"first batch's {tuple(self.preds[0].shape)} / {tuple(self.targets[0].shape)}"
            )
        self._add_ids(ids, p.shape[0])
        self.preds.append(p)
        self.targets.append(t)

    def state_arrays(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.preds:
            raise ValueError(f"{self.name}: compute() called before any update()")
        return torch.cat(self.preds), torch.cat(self.targets)

    def functional(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = self._fn(preds, targets)
        return out.reshape(-1)

    def compute(self) -> torch.Tensor:
        token = _LABEL_NAMES.set(self.class_names)
        try:
            return self._fn(*self.state_arrays()).reshape(-1)
        finally:
            _LABEL_NAMES.reset(token)

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        """Bootstrap fast path: a function from cluster counts ``(b, G)`` to values ``(b, out)``,
        or None when the metric has none (the bootstrap then resamples rows). A function with
        ``estimates = True`` also gives the full-data value (every count one) to rounding."""
        return None


def _all_finite(t: torch.Tensor) -> bool:
    """``torch.isfinite(t).all()`` (numpy's on the CPU: ~10× faster for a few thousand rows)."""
    if t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64, torch.float16):
        try:
            return bool(np.isfinite(t.numpy()).all())
        except (RuntimeError, TypeError):  # e.g. a tensor numpy cannot view
            pass
    return bool(torch.isfinite(t).all())


def _ranking_cluster_fn(
    pred: Any, target: Any, cluster: Any, n_clusters: int, *, metric: str, average: str | None,
    level: float = 0.0,
) -> Any:
    """Cluster-count fast path of AUROC / AUPRC / sensitivity at specificity (see ``_resample``):
    one plan per (scores, targets, clusters), shared by the metrics of a joint bootstrap."""
    from medimg_bench.metrics._resample import RankingPlan, average_rows, shared

    s, y, kind = prepare_inputs(pred, target)
    cl = np.asarray(cluster)
    if average == "micro":
        cl = np.repeat(cl, s.shape[1])
        s, y = _flatten_micro(s, y)
    plan = shared("ranking", (s, y, cl, n_clusters), lambda: RankingPlan(s, y, cl, n_clusters))
    what = ("sens_at_spec", float(level)) if metric == "sensitivity_at_specificity" else metric
    plan.request(what)

    def fn(counts: torch.Tensor) -> torch.Tensor:
        values, n_pos = plan.values(counts, what)
        if average == "micro":
            return values[:, :1]
        return average_rows(values, n_pos, average, kind)

    fn.estimates = True  # type: ignore[attr-defined]  # counts of one give the full-data value
    return fn


def _counts_cluster_fn(self: ScoreMetric, pred: Any, target: Any, cluster: Any, n_clusters: int) -> Any:
    """Cluster-count fast path of a confusion-count metric: weighted counts for a block of
    resamples in one product, then the metric's own formula on all of them at once."""
    from medimg_bench.metrics._resample import confusion_plan, shared

    s, y, kind = prepare_inputs(pred, target)
    hard = _decisions(s, kind, self.options.get("threshold", 0.5))
    cl = np.asarray(cluster)
    counts_of = shared("confusion", (hard, y, cl, n_clusters), lambda: confusion_plan(hard, y, cl, n_clusters))

    def fn(counts: torch.Tensor) -> torch.Tensor:
        c: dict[str, Any] = dict(counts_of(counts))
        c["kind"] = kind
        if kind == "multiclass":
            c["correct"] = c["tp"].sum(-1)
        return self._from_counts(c).reshape(counts.shape[0], -1)

    fn.estimates = True  # type: ignore[attr-defined]  # counts of one give the full-data value
    return fn


class _RankingMetric(ScoreMetric):
    """A metric of the ranking of scores (AUROC, AUPRC): functional, weighted and
    cluster-count forms of the same ``ranking``."""

    ranking = ""  # "auroc" or "auprc"

    def _fn(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        fn = auroc if self.ranking == "auroc" else auprc
        return fn(preds, targets, average=self.average)

    def weighted_functional(self, preds: Any, targets: Any, weights: torch.Tensor) -> torch.Tensor:
        """Values for each row of sample ``weights`` (B, N) at once."""
        out = weighted_ranking(preds, targets, weights, metric=self.ranking, average=self.average)
        return out.reshape(out.shape[0], -1)

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        return _ranking_cluster_fn(preds, targets, cluster, n_clusters, metric=self.ranking, average=self.average)


@register_metric("auroc", tags=("classification",))
class AUROC(_RankingMetric):
    """Stateful AUROC (per label by default); see :func:`auroc`."""

    name = "auroc"
    ranking = "auroc"


@register_metric("auprc", tags=("classification",))
class AUPRC(_RankingMetric):
    """Stateful average precision (per label by default); see :func:`auprc`."""

    name = "auprc"
    ranking = "auprc"


class _FromCounts(ScoreMetric):
    """A metric computed from confusion counts at a threshold (bootstrap: cluster fast path)."""

    def _fn(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self._from_counts(confusion_counts(preds, targets, threshold=self.options["threshold"]), warn=True)

    def _from_counts(self, c: dict[str, Any], warn: bool = False) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        return _counts_cluster_fn(self, preds, targets, cluster, n_clusters)


@register_metric("accuracy", tags=("classification",))
class Accuracy(_FromCounts):
    """Stateful accuracy (``average="micro"`` by default); see :func:`accuracy`."""

    name = "accuracy"

    def __init__(self, *, average: str | None = "micro", threshold: float = 0.5, class_names: Sequence[str] | None = None) -> None:
        super().__init__(average=average, class_names=class_names, threshold=threshold)

    def _from_counts(self, c: dict[str, Any], warn: bool = False) -> torch.Tensor:
        return _accuracy_value(c, self.average, warn=warn)


@register_metric("balanced_accuracy", tags=("classification",))
class BalancedAccuracy(_FromCounts):
    """Stateful balanced accuracy (``average="macro"`` by default); see :func:`balanced_accuracy`."""

    name = "balanced_accuracy"

    def __init__(self, *, average: str | None = "macro", threshold: float = 0.5, class_names: Sequence[str] | None = None) -> None:
        if average == "micro":
            raise ValueError("balanced_accuracy has no micro average; use None, 'macro' or 'weighted'")
        super().__init__(average=average, class_names=class_names, threshold=threshold)

    def _from_counts(self, c: dict[str, Any], warn: bool = False) -> torch.Tensor:
        return _balanced_value(c, self.average, warn=warn)


class _Counted(_FromCounts):
    def __init__(
        self, *, average: str | None = None, threshold: float = 0.5, zero_division: float = float("nan"),
        class_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(average=average, class_names=class_names, threshold=threshold)
        self.zero_division = float(zero_division)

    def _from_counts(self, c: dict[str, Any], warn: bool = False) -> torch.Tensor:
        return _counted_value(c, self.name, average=self.average, zero_division=self.zero_division, warn=warn)


@register_metric("f1", tags=("classification",))
class F1(_Counted):
    """Stateful F1 (per label by default); see :func:`f1`."""

    name = "f1"


@register_metric("sensitivity", tags=("classification",))
class Sensitivity(_Counted):
    """Stateful sensitivity (per label by default); see :func:`sensitivity`."""

    name = "sensitivity"


@register_metric("specificity", tags=("classification",))
class Specificity(_Counted):
    """Stateful specificity (per label by default); see :func:`specificity`."""

    name = "specificity"


@register_metric("sensitivity_at_specificity", tags=("classification",))
class SensitivityAtSpecificity(ScoreMetric):
    """Stateful sensitivity at a fixed specificity (per label by default)."""

    name = "sensitivity_at_specificity"

    def __init__(self, *, specificity: float = 0.9, average: str | None = None, class_names: Sequence[str] | None = None) -> None:
        super().__init__(average=average, class_names=class_names, specificity=specificity)

    def _fn(self, preds: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return sensitivity_at_specificity(preds, targets, average=self.average, **self.options)

    def cluster_weighted(self, preds: Any, targets: Any, cluster: Any, n_clusters: int) -> Any:
        if self.average not in (None, "macro"):
            return None
        return _ranking_cluster_fn(preds, targets, cluster, n_clusters, metric="sensitivity_at_specificity",
                                   average=self.average, level=self.options["specificity"])


def macro_rank_auroc(scores: torch.Tensor, y: torch.Tensor) -> float:
    """Mean over classes of the rank-based AUROC (ties averaged), skipping classes with one label
    value; NaN labels ignored. A model-selection score (probes, ``fit``'s ``select_on=auroc``)."""
    vals = []
    for k in range(scores.shape[1]):
        yk, sk = y[:, k], scores[:, k].double()
        ok = ~yk.isnan()
        yk, sk = yk[ok] >= 0.5, sk[ok]
        n_pos, n_neg = int(yk.sum()), int((~yk).sum())
        if n_pos == 0 or n_neg == 0:
            continue
        order = torch.argsort(sk)
        ranks = torch.empty_like(sk)
        ranks[order] = torch.arange(1, len(sk) + 1, dtype=torch.float64)
        uniq, inv = torch.unique(sk, return_inverse=True)  # average ranks of ties
        sums = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inv, ranks)
        cnt = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inv, torch.ones_like(ranks))
        ranks = (sums / cnt)[inv]
        vals.append(float((ranks[yk].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)))
    return float(sum(vals) / len(vals)) if vals else float("nan")
