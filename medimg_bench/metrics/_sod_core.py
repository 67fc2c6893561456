"""Numerical kernels of the salient-object-detection (SOD) toolbox metrics, one image at a time.

Every function mirrors the arithmetic of the MATLAB toolbox of Fan et al. (Inf-Net
``EvaluationTool``, PraNet ``eval/``) as run under GNU Octave, down to the order of its sums where
that order can flip a comparison: MATLAB reduces ``sum(x(:))`` and ``sum(sum(A))`` left to right
in column-major order, so those sums are taken sequentially here (``np.cumsum``) over the
transposed (column-major) pixels. The public entry points are in
:mod:`medimg_bench.metrics.sod_toolbox`.
"""

from __future__ import annotations

import math

import numpy as np

EPS = float(np.finfo(np.float64).eps)  # MATLAB's ``eps``
N_THRESHOLDS = 256


def matlab_thresholds() -> np.ndarray:
    """The 256 values of MATLAB's ``1:-1/255:0``, descending (float64).

    MATLAB's colon operator builds ``a:d:b`` from both ends: element ``k`` (0-based) is
    ``a + k*d`` for ``k < n/2`` and ``b - (n-k)*d`` for the rest (``n`` = 255 intervals). About
    half of these differ in the last bit from ``1 + k*d`` (what Octave's range gives), which is
    enough to move whole grey levels of an 8-bit map across a threshold.
    """
    k = np.arange(N_THRESHOLDS, dtype=np.float64)
    d = -1.0 / 255.0
    t = 1.0 + k * d
    upper = k >= 128  # k > n/2 = 127.5
    t[upper] = 0.0 - (255.0 - k[upper]) * d
    return t


THRESHOLDS = matlab_thresholds()
_ASCENDING = THRESHOLDS[::-1].copy()


def seq_sum(values: np.ndarray) -> float:
    """Left-to-right sum of a 1-D float64 array (MATLAB/Octave ``sum`` of a vector)."""
    if values.size == 0:
        return 0.0
    return float(np.cumsum(values, dtype=np.float64)[-1])


def sum_cm(a: np.ndarray) -> float:
    """``sum(a(:))`` of a 2-D array as MATLAB reduces it (column-major, left to right)."""
    return seq_sum(np.ascontiguousarray(a.T).reshape(-1))


def sum_sum(a: np.ndarray) -> float:
    """``sum(sum(a))``: each column summed top to bottom, then the column sums left to right."""
    if a.size == 0:
        return 0.0
    return seq_sum(np.cumsum(a, axis=0, dtype=np.float64)[-1])


def mean2(a: np.ndarray) -> float:
    """MATLAB ``mean2``: ``sum(a(:)) / numel(a)`` (NaN for an empty array, as 0/0)."""
    n = a.size
    return sum_cm(a) / n if n else math.nan


def mapminmax01(x: np.ndarray) -> np.ndarray:
    """MATLAB ``mapminmax(x, 0, 1)`` of all pixels as one row: ``(x - xmin) * gain + 0`` with
    ``gain = 1 / (xmax - xmin)``; a constant map (or a gain above 1e14) is returned unchanged,
    as MATLAB documents ("if xmax = xmin ... y = x and no change occurs")."""
    xmin, xmax = float(x.min()), float(x.max())
    xrange = xmax - xmin
    gain = 1.0 / xrange if xrange != 0 else math.inf
    if xrange == 0 or not math.isfinite(xrange) or abs(gain) > 1e14:
        return x.astype(np.float64, copy=True)
    return (x - xmin) * gain + 0.0


def threshold_levels(y: np.ndarray, *, strict: bool) -> np.ndarray:
    """For each value, how many of the 256 thresholds it passes (``y >= t``, or ``y > t`` with
    ``strict``), exactly as those comparisons come out: the threshold nearest ``y * 255`` and its
    two neighbours are compared, the others are certainly below or above (each threshold is
    within an ulp of ``j / 255``). One pass over the pixels instead of 256 binarisations."""
    v = y.reshape(-1)
    c = np.clip(np.floor(v * 255.0), 0, 255).astype(np.intp)
    padded = np.concatenate(([-np.inf], _ASCENDING, [np.inf]))  # padded[j + 1] = ascending[j]
    count = c - 1  # thresholds 0 .. c-2 (ascending) are below every such value
    for j in (c - 1, c, c + 1):
        t = padded[j + 1]
        count = count + ((t < v) if strict else (t <= v))
    return np.clip(count, 0, N_THRESHOLDS)


def level_histograms(y: np.ndarray, gt: np.ndarray, *, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    """Foreground and background histograms (length 257) of :func:`threshold_levels`."""
    levels = threshold_levels(y, strict=strict)
    both = np.bincount(levels + (N_THRESHOLDS + 1) * gt.reshape(-1), minlength=2 * (N_THRESHOLDS + 1))
    return both[N_THRESHOLDS + 1:], both[: N_THRESHOLDS + 1]


def positives_per_threshold(hist: np.ndarray) -> np.ndarray:
    """From a level histogram, the count of pixels passing threshold ``k`` (descending order)."""
    at_least = np.cumsum(hist[::-1])[::-1]  # at_least[c] = #pixels passing >= c thresholds
    return at_least[N_THRESHOLDS - np.arange(N_THRESHOLDS)].astype(np.float64)


def fmeasure_counts(tp: np.ndarray, n_pred: np.ndarray, n_gt: float, n: float) -> dict[str, np.ndarray]:
    """``Fmeasure_calu`` from counts (arrays over thresholds): precision, recall (= sensitivity),
    specificity, Dice, F1 and IoU, all 0 wherever TP = 0 (the toolbox's rule)."""
    fn = n_gt - tp
    fp = n_pred - tp
    tn = (n - n_pred) - fn
    ok = tp > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        pre = np.where(ok, tp / n_pred, 0.0)
        rec = np.where(ok, tp / n_gt, 0.0)
        spe = np.where(ok, tn / (tn + fp), 0.0)
        dice = np.where(ok, (2 * tp) / (n_gt + n_pred), 0.0)
        iou = np.where(ok, tp / (fn + n_pred), 0.0)
        f1 = np.where(ok, (2.0 * pre * rec) / (pre + rec), 0.0)
    return {"precision": pre, "sensitivity": rec, "specificity": spe, "dice": dice, "f1": f1, "iou": iou}


def emeasure_counts(n_fm: np.ndarray, tp: np.ndarray, n_gt: float, n: float) -> np.ndarray:
    """``Enhancedmeasure`` of binary maps with ``n_fm`` positives of which ``tp`` are foreground
    (arrays over thresholds): the four pixel kinds take four values, so the score is a weighted
    sum of them."""
    denom = n - 1 + EPS
    if n_gt == 0:  # all-black GT: 1 - FM
        return (n - n_fm) / denom
    if n_gt == n:  # all-white GT: FM
        return n_fm / denom
    mu_fm = n_fm / n
    mu_gt = n_gt / n
    total = np.zeros_like(n_fm)
    counts = {(1, 1): tp, (1, 0): n_fm - tp, (0, 1): n_gt - tp, (0, 0): (n - n_gt) - (n_fm - tp)}
    for (f, g), count in counts.items():
        a_fm = f - mu_fm
        a_gt = g - mu_gt
        align = 2.0 * (a_gt * a_fm) / (a_gt * a_gt + a_fm * a_fm + EPS)
        total = total + count * (((align + 1.0) ** 2) / 4.0)
    return total / denom


def emeasure_binary(fm: np.ndarray, gt: np.ndarray) -> float:
    """``Enhancedmeasure(FM, GT)`` of one binary map (the adaptive E-measure)."""
    n = float(gt.size)
    n_fm = np.array([float(fm.sum())])
    tp = np.array([float((fm & gt).sum())])
    return float(emeasure_counts(n_fm, tp, float(gt.sum()), n)[0])


# -- S-measure (Fan et al., ICCV 2017) ----------------------------------------------------------
def _std(values: np.ndarray) -> float:
    """Octave ``std`` of a vector: ``sqrt(sumsq(x - mean(x)) / (n - 1))`` (0 for one value)."""
    n = values.size
    if n == 1:
        return 0.0
    centred = values - seq_sum(values) / n
    return math.sqrt(seq_sum(centred * centred) / (n - 1))


def _object(pred_values: np.ndarray) -> float:
    x = seq_sum(pred_values) / pred_values.size
    sigma = _std(pred_values)
    return 2.0 * x / (x * x + 1.0 + sigma + EPS)


def _s_object(pred: np.ndarray, gt: np.ndarray) -> float:
    # prediction(GT) in column-major order, as MATLAB indexes it
    p_cm, g_cm = pred.T.reshape(-1), gt.T.reshape(-1)
    o_fg = _object(p_cm[g_cm])
    o_bg = _object(1.0 - p_cm[~g_cm])
    u = mean2(gt.astype(np.float64))
    return u * o_fg + (1 - u) * o_bg


def _ssim(pred: np.ndarray, gt: np.ndarray) -> float:
    hei, wid = pred.shape
    n = wid * hei
    dgt = gt.astype(np.float64)
    x = mean2(pred)
    y = mean2(dgt)
    sigma_x2 = sum_sum((pred - x) ** 2) / (n - 1 + EPS)
    sigma_y2 = sum_sum((dgt - y) ** 2) / (n - 1 + EPS)
    sigma_xy = sum_sum((pred - x) * (dgt - y)) / (n - 1 + EPS)
    alpha = 4 * x * y * sigma_xy
    beta = (x * x + y * y) * (sigma_x2 + sigma_y2)
    if alpha != 0:  # NaN (an empty quadrant) takes this branch too, as in MATLAB
        return alpha / (beta + EPS)
    if beta == 0:
        return 1.0
    return 0.0


def _round_half_away(v: float) -> int:
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


def _s_region(pred: np.ndarray, gt: np.ndarray) -> float:
    rows, cols = gt.shape
    total = float(gt.sum())
    if total == 0:
        x_c, y_c = _round_half_away(cols / 2), _round_half_away(rows / 2)
    else:
        col_mass = gt.sum(axis=0).astype(np.float64) * np.arange(1, cols + 1)
        row_mass = gt.sum(axis=1).astype(np.float64) * np.arange(1, rows + 1)
        x_c = _round_half_away(seq_sum(col_mass) / total)
        y_c = _round_half_away(seq_sum(row_mass) / total)
    area = cols * rows
    w1 = (x_c * y_c) / area
    w2 = ((cols - x_c) * y_c) / area
    w3 = (x_c * (rows - y_c)) / area
    w4 = 1.0 - w1 - w2 - w3
    parts = [(slice(0, y_c), slice(0, x_c)), (slice(0, y_c), slice(x_c, cols)),
             (slice(y_c, rows), slice(0, x_c)), (slice(y_c, rows), slice(x_c, cols))]
    q = [_ssim(pred[r, c], gt[r, c]) for r, c in parts]
    return w1 * q[0] + w2 * q[1] + w3 * q[2] + w4 * q[3]


def s_measure(pred: np.ndarray, gt: np.ndarray, *, alpha: float = 0.5) -> float:
    """``StructureMeasure(pred, gt)``: NaN when the GT's centroid falls on the last row or
    column (an empty quadrant; MATLAB's ``0 * NaN``), as the toolbox returns."""
    y = mean2(gt.astype(np.float64))
    if y == 0:
        return 1.0 - mean2(pred)
    if y == 1:
        return mean2(pred)
    q = alpha * _s_object(pred, gt) + (1 - alpha) * _s_region(pred, gt)
    return 0.0 if q < 0 else q


# -- weighted F-measure (Margolin et al., CVPR 2014) --------------------------------------------
def _gaussian_7x7_sigma5() -> np.ndarray:
    """``fspecial('gaussian', 7, 5)``."""
    ax = np.arange(-3, 4, dtype=np.float64)
    xx, yy = np.meshgrid(ax, ax)
    h = np.exp(-(xx * xx + yy * yy) / (2 * 5.0 * 5.0))
    h[h < EPS * h.max()] = 0
    return h / h.sum()


def weighted_f_measure(pred: np.ndarray, gt: np.ndarray) -> float:
    """``original_WFb(pred, gt)`` (beta = 1): the exact Euclidean distance transform to the
    foreground with its nearest-pixel index, a 7x7 Gaussian (sigma 5) correlation with zero
    padding, and MATLAB's single-precision distances."""
    from scipy import ndimage

    g = gt.astype(bool)
    dgt = g.astype(np.float64)
    e = np.abs(pred - dgt)
    if not g.any():  # no foreground: the weighted recall is a mean over no pixel (the toolbox
        return math.nan  # fails there: bwdist gives no nearest index)
    dist, idx = ndimage.distance_transform_edt(~g, return_indices=True)
    dst = dist.astype(np.float32)
    et = e.copy()
    nearest = e[idx[0], idx[1]]
    et[~g] = nearest[~g]
    ea = ndimage.correlate(et, _gaussian_7x7_sigma5(), mode="constant", cval=0.0)
    min_e_ea = e.copy()
    sel = g & (ea < e)
    min_e_ea[sel] = ea[sel]
    b = np.ones_like(e)
    k = np.float32(math.log(1 - 0.5) / 5)
    # single precision as MATLAB (double .* single is single); exp correctly rounded, as glibc expf
    expo = np.exp((k * dst[~g]).astype(np.float64)).astype(np.float32)
    b[~g] = (np.float32(2.0) - np.float32(1) * expo).astype(np.float64)
    ew = min_e_ea * b
    ew_cm, g_cm = ew.T.reshape(-1), g.T.reshape(-1)
    ew_fg = seq_sum(ew_cm[g_cm])
    tpw = sum_cm(dgt) - ew_fg
    fpw = seq_sum(ew_cm[~g_cm])
    r = 1 - ew_fg / int(g.sum())
    p = tpw / (EPS + tpw + fpw)
    return 2 * (r * p) / (EPS + r + p)
