"""Probes on cached embeddings: a linear head trained as eva does, the CLIP paper's L-BFGS
logistic regression with its regularisation search, and a cosine kNN classifier with
temperature-weighted votes as in DINO; :func:`diagnose_probe` says when a linear probe did not learn.

Linear probe (eva, ``configs/vision/pathology/offline/classification/bach.yaml``): a
``torch.nn.Linear`` head, cross-entropy, SGD (momentum 0.9, weight decay 0) at lr 0.000625,
cosine annealing to 0 over ``max_steps`` = 12,500 steps of batch 256, validation once per epoch,
the checkpoint with the best validation metric kept, early stopping after ``patience`` = 400
validations without improvement. Multi-label targets use one sigmoid per class (binary
cross-entropy, NaN labels ignored) and macro AUROC on validation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from medimg_bench.metrics.classification import macro_rank_auroc

__all__ = ["LinearProbe", "train_linear_probe", "train_lbfgs_probe", "fit_logistic_regression", "diagnose_probe",
           "knn_predict", "select_metric", "PROBES"]

#: the linear probes ``protocol.options.probe`` names
PROBES = ("eva", "clip_lbfgs")


@dataclass
class LinearProbe:
    """A trained linear head: ``weight`` (K, D), ``bias`` (K,), the step whose validation metric
    was best, that metric's value, steps run and the validation curve ``[(step, value)]``."""

    weight: torch.Tensor
    bias: torch.Tensor
    multilabel: bool
    best_step: int
    best_val: float
    steps: int
    val_curve: list[tuple[int, float]]
    #: the validation metric of the initial weights (eva: step 0; clip_lbfgs: the constant model)
    val_at_init: float = math.nan
    max_steps: int = 0
    kind: str = "eva"
    #: clip_lbfgs: ``[(C, validation metric)]`` in the order tried, and the C chosen
    sweep: list[tuple[float, float]] = field(default_factory=list)
    chosen_c: float | None = None
    #: the weights training started from (eva: the seeded init; clip_lbfgs: zeros)
    init_weight: torch.Tensor | None = None
    init_bias: torch.Tensor | None = None

    def predict_proba(self, x: torch.Tensor, *, chunk: int = 65536) -> torch.Tensor:
        """Class probabilities ``(N, K)``: softmax (multi-class) or sigmoid (multi-label)."""
        outs = []
        for s in range(0, x.shape[0], chunk):
            logits = x[s:s + chunk].to(self.weight.dtype) @ self.weight.T + self.bias  # eva: float32
            outs.append(torch.sigmoid(logits) if self.multilabel else torch.softmax(logits, dim=1))
        return torch.cat(outs)


def select_metric(probs: torch.Tensor, y: torch.Tensor, *, multilabel: bool) -> float:
    """The validation metric used for model selection: accuracy (multi-class, as eva's
    ``val/MulticlassAccuracy``) or macro AUROC (multi-label)."""
    if multilabel:
        return macro_rank_auroc(probs, y)
    ok = ~y.float().isnan()
    return float((probs[ok].argmax(1) == y[ok].long()).float().mean())


def train_linear_probe(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_val: torch.Tensor,
    y_val: torch.Tensor,
    *,
    num_classes: int,
    multilabel: bool,
    max_steps: int = 12500,
    batch_size: int = 256,
    lr: float = 0.000625,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    patience: int | None = 400,
    val_every: int | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> LinearProbe:
    """Train a linear head on embeddings (see module docstring). ``val_every`` steps between
    validations (default one epoch). Returns the :class:`LinearProbe` with the best-on-validation
    weights; the test split is never seen here."""
    dev = torch.device(device)
    g = torch.Generator().manual_seed(seed)
    x, y = _training_set(x_train, y_train, dev, multilabel=multilabel)
    n, d = x.shape
    # seeded init with torch.nn.Linear's default bound; plain tensors and closed-form gradients
    # (softmax / sigmoid cross-entropy of a linear map) with torch.optim.SGD's momentum update
    # rule: the same steps as Linear + SGD + CosineAnnealingLR, without autograd overhead
    bound = 1 / math.sqrt(d)
    w = (torch.rand(num_classes, d, generator=g) * 2 * bound - bound).to(dev)
    b = (torch.rand(num_classes, generator=g) * 2 * bound - bound).to(dev)
    w0, b0 = w.cpu().clone(), b.cpu().clone()
    buf_w, buf_b = torch.zeros_like(w), torch.zeros_like(b)
    bs = min(batch_size, n)
    steps_per_epoch = max(1, n // bs)
    val_every = val_every or steps_per_epoch
    best = (-math.inf, 0, w.clone(), b.clone())
    curve: list[tuple[int, float]] = []
    xv, yv = x_val.float().to(dev), y_val.to(dev)
    init_val = _val_metric(xv, yv, w, b, multilabel)  # for diagnose_probe: did training move it?
    bad = 0
    step = 0
    perm = torch.randperm(n, generator=g).to(dev)
    pos = 0
    rows = torch.arange(bs, device=dev)
    while step < max_steps:
        if pos + bs > n:
            perm = torch.randperm(n, generator=g).to(dev)
            pos = 0
        idx = perm[pos:pos + bs]
        pos += bs
        step_lr = 0.5 * lr * (1 + math.cos(math.pi * step / max_steps))  # CosineAnnealingLR, eta_min 0
        xb = x[idx]
        logits = torch.addmm(b, xb, w.T)
        grad = _logit_gradient(logits, y[idx], rows, multilabel=multilabel)
        _sgd_step(w, b, grad.T @ xb, grad.sum(0), (buf_w, buf_b), lr=step_lr, momentum=momentum,
                  weight_decay=weight_decay)
        step += 1
        if step % val_every == 0 or step == max_steps:
            v = _val_metric(xv, yv, w, b, multilabel)
            curve.append((step, v))
            if v > best[0]:
                best = (v, step, w.clone(), b.clone())
                bad = 0
            else:
                bad += 1
                if patience is not None and bad >= patience:
                    break
    return LinearProbe(best[2].cpu(), best[3].cpu(), multilabel, best[1], best[0], step, curve,
                       val_at_init=init_val, max_steps=max_steps, init_weight=w0, init_bias=b0)


def _training_set(
    x_train: torch.Tensor, y_train: torch.Tensor, dev: torch.device, *, multilabel: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings and targets on ``dev``: float multi-hot (NaN = unknown) or class indices, rows
    with a NaN class dropped."""
    x = x_train.float().to(dev)
    y = y_train.to(dev)
    if multilabel:
        y = y.float()
    else:
        if y.is_floating_point() and bool(y.isnan().any()):
            keep = ~y.isnan()
            x, y = x[keep], y[keep]
        y = y.long()
    if x.shape[0] == 0:
        raise ValueError("linear probe: no labelled training embedding")
    return x, y


def _logit_gradient(
    logits: torch.Tensor, t: torch.Tensor, rows: torch.Tensor, *, multilabel: bool
) -> torch.Tensor:
    """d(mean loss)/d(logits): sigmoid cross-entropy over known labels, or softmax cross-entropy
    over the batch."""
    if multilabel:
        known = ~t.isnan()
        return (torch.sigmoid(logits) - torch.nan_to_num(t)) * known / known.sum().clamp_min(1)
    grad = torch.softmax(logits, dim=1)
    grad[rows, t] -= 1.0
    grad /= rows.shape[0]
    return grad


def _sgd_step(
    w: torch.Tensor,
    b: torch.Tensor,
    gw: torch.Tensor,
    gb: torch.Tensor,
    buffers: tuple[torch.Tensor, torch.Tensor],
    *,
    lr: float,
    momentum: float,
    weight_decay: float,
) -> None:
    """One step of torch.optim.SGD's rule (weight decay, then momentum) on ``w``, ``b`` in place."""
    if weight_decay:
        gw += weight_decay * w
        gb += weight_decay * b
    if momentum:
        buf_w, buf_b = buffers
        buf_w.mul_(momentum).add_(gw)
        buf_b.mul_(momentum).add_(gb)
        gw, gb = buf_w, buf_b
    w.sub_(lr * gw)
    b.sub_(lr * gb)


def _val_metric(xv: torch.Tensor, yv: torch.Tensor, w: torch.Tensor, b: torch.Tensor, multilabel: bool) -> float:
    logits = torch.addmm(b, xv, w.T)
    pv = torch.sigmoid(logits) if multilabel else torch.softmax(logits, 1)
    return select_metric(pv, yv, multilabel=multilabel)


def knn_predict(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_query: torch.Tensor,
    *,
    num_classes: int,
    multilabel: bool,
    k: int = 20,
    temperature: float = 0.07,
    chunk: int = 1024,
) -> torch.Tensor:
    """Class probabilities ``(Q, K)`` of a cosine kNN classifier: the ``k`` nearest training
    embeddings vote with weight ``exp(cos / temperature)`` (DINO's ``knn_classifier``);
    multi-label votes average the neighbours' multi-hot labels. Rows sum to 1 (multi-class)."""
    xt = torch.nn.functional.normalize(x_train.float(), dim=1)
    xq = torch.nn.functional.normalize(x_query.float(), dim=1)
    k = min(k, xt.shape[0])
    if multilabel:
        onehot = torch.nan_to_num(y_train.float(), nan=0.0)
    else:
        onehot = torch.nn.functional.one_hot(y_train.long(), num_classes).float()
    out = []
    for s in range(0, xq.shape[0], chunk):
        sim = xq[s:s + chunk] @ xt.T
        top, idx = sim.topk(k, dim=1)
        w = (top / temperature).exp()
        votes = (onehot[idx] * w[..., None]).sum(1)
        out.append(votes / w.sum(1, keepdim=True))
    return torch.cat(out)


# -- the CLIP paper's probe -------------------------------------------------------------------------
def fit_logistic_regression(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    c: float,
    num_classes: int,
    multilabel: bool,
    max_iter: int = 1000,
    init: tuple[torch.Tensor, torch.Tensor] | None = None,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """L2-regularised logistic regression at inverse strength ``c`` fitted with L-BFGS: the
    optimum of scikit-learn's ``LogisticRegression(C=c)`` objective ``c·Σ log-loss + ½‖W‖²``
    (intercept not penalised). Multi-class: multinomial (softmax) for ≥ 3 classes and one binary
    logistic for 2 classes, as scikit-learn fits them; multi-label: one binary logistic per class
    on its labelled samples. ``init``: starting ``(weight, bias)`` in that layout (a neighbouring
    C's solution). Returns ``weight`` (K, D), ``bias`` (K,) such that softmax (sigmoid for
    multi-label) of ``x @ weight.T + bias`` are the class probabilities, and iterations run."""
    dev = torch.device(device)
    x = x.to(dev, torch.float64)
    n, d = x.shape
    binary = not multilabel and num_classes == 2
    if multilabel:
        yy = y.to(dev, torch.float64).reshape(n, num_classes)
        known = (~yy.isnan()).to(torch.float64)
        target = torch.nan_to_num(yy)
    elif binary:  # scikit-learn: one logit, for the second class
        target = (y.reshape(-1).to(dev) == 1).to(torch.float64)[:, None]
        known = torch.ones_like(target)
    else:
        target = torch.nn.functional.one_hot(y.reshape(-1).to(dev).long(), num_classes).to(torch.float64)
        known = None
    k = 1 if binary else num_classes
    rows = known.sum(0).clamp_min(1) if known is not None else torch.full((k,), float(n), device=dev,
                                                                             dtype=torch.float64)
    # each column's objective divided by c·rows (same optimum), solved for u = w / scale: a Jacobi
    # preconditioner from the Hessian's diagonal at w = 0 makes every coordinate's curvature ≈ 1
    q = 0.25 if known is not None else (1 / k) * (1 - 1 / k)
    scale = (q * (x * x).mean(0)[None, :] + 1 / (c * rows[:, None])).rsqrt()  # (k, d)
    bscale = q ** -0.5
    u = torch.zeros(k, d, dtype=torch.float64, device=dev)
    ub = torch.zeros(k, dtype=torch.float64, device=dev)
    if init is not None:
        w0, b0 = init[0].to(u), init[1].to(ub)
        if binary:
            w0, b0 = (w0[1:] - w0[:1]), (b0[1:] - b0[:1])
        u.copy_(w0 / scale), ub.copy_(b0 / bscale)
    u.requires_grad_(True), ub.requires_grad_(True)
    opt = torch.optim.LBFGS([u, ub], lr=1, max_iter=max_iter, history_size=10, tolerance_grad=1e-9,
                            tolerance_change=1e-15, line_search_fn="strong_wolfe")

    @torch.no_grad()
    def closure() -> torch.Tensor:
        w, b = u * scale, ub * bscale
        logits = torch.addmm(b, x, w.T)
        if known is None:  # multinomial
            logp = torch.log_softmax(logits, 1)
            loss = -(target * logp).sum() / n
            g = (logp.exp() - target) / n
        else:
            ll = torch.nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
            loss = ((ll * known).sum(0) / rows).sum()
            g = (torch.sigmoid(logits) - target) * known / rows
        loss = loss + ((w * w).sum(1) / (2 * c * rows)).sum()
        u.grad = (g.T @ x + w / (c * rows[:, None])) * scale
        ub.grad = g.sum(0) * bscale
        return loss

    opt.step(closure)
    iters = int(opt.state[opt._params[0]].get("n_iter", 0))
    w, b = (u * scale).detach(), (ub * bscale).detach()
    if binary:  # softmax over [0, z] = [1 − σ(z), σ(z)]
        w = torch.cat([torch.zeros_like(w), w])
        b = torch.cat([torch.zeros_like(b), b])
    return w, b, iters


def _lambda_search(score: Any, *, low: float = -6.0, high: float = 6.0, per_decade: int = 8) -> float:
    """The CLIP paper's parametric binary search over log10 λ: start at every second decade of
    [``low``, ``high``], then halve the step around the best point until it is 1/``per_decade``
    decade. ``score(log10_lambda)`` (a number or a tuple compared in order) is maximised; exact
    ties keep the larger λ (the simpler model)."""
    tried: dict[float, Any] = {}

    def at(v: float) -> Any:
        v = round(v, 6)
        if v not in tried:
            tried[v] = score(v)
        return tried[v]

    def best_of(points: Sequence[float]) -> float:
        return max(points, key=lambda v: (at(v), v))

    best = best_of([low + 2 * i for i in range(int((high - low) / 2) + 1)])
    step = 2.0
    while step > 1.0 / per_decade + 1e-12:
        step /= 2
        near = [v for v in (best - step, best, best + step) if low - 1e-9 <= v <= high + 1e-9]
        best = best_of(near)
    return best


def train_lbfgs_probe(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    x_val: torch.Tensor,
    y_val: torch.Tensor,
    *,
    num_classes: int,
    multilabel: bool,
    max_iter: int = 1000,
    lambda_range: Sequence[float] = (1e-6, 1e6),
    steps_per_decade: int = 8,
    refit_on_train_val: bool = True,
    device: str | torch.device = "cpu",
) -> LinearProbe:
    """The CLIP paper's linear probe (Radford et al. 2021, appendix A.3): L-BFGS logistic
    regression (at most ``max_iter`` iterations) whose L2 strength λ (C = 1/λ) is chosen on the
    validation split by :func:`_lambda_search` over ``lambda_range``; the chosen C is then refitted
    on train + validation (``refit_on_train_val``, as the paper reports) before the test split is
    scored. Model selection uses :func:`select_metric`."""
    if not multilabel:  # unlabelled samples carry no class: left out of the fits
        x_train, y_train = _labelled(x_train, y_train)
    fits: dict[float, tuple[torch.Tensor, torch.Tensor, int]] = {}
    vals: dict[float, float] = {}
    sweep: list[tuple[float, float]] = []
    xv = x_val.double()

    def score(log_lam: float) -> tuple[float, float]:
        w, b, it = fit_logistic_regression(x_train, y_train, c=10.0 ** (-log_lam), num_classes=num_classes,
                                           multilabel=multilabel, max_iter=max_iter, device=device)
        fits[log_lam] = (w.cpu(), b.cpu(), it)
        vals[log_lam] = _val_metric(xv, y_val, w.cpu().double(), b.cpu().double(), multilabel)
        sweep.append((10.0 ** (-log_lam), vals[log_lam]))
        # ties of the metric (a validation AUROC of 1.0 over a range of C) go to the lower
        # validation log-loss, so the choice is not the most regularised, flattest model
        return vals[log_lam], -_val_log_loss(xv, y_val, w.cpu().double(), b.cpu().double(), multilabel)

    lo, hi = (math.log10(float(v)) for v in lambda_range)
    chosen = round(_lambda_search(score, low=lo, high=hi, per_decade=steps_per_decade), 6)
    c = 10.0 ** (-chosen)
    w, b, iters = fits[chosen]
    if refit_on_train_val:
        xs, ys = (x_val, y_val) if multilabel else _labelled(x_val, y_val)
        xa, ya = torch.cat([x_train.double(), xs.double()]), torch.cat([y_train.double(), ys.double()])
        w, b, iters = fit_logistic_regression(xa, ya, c=c, num_classes=num_classes, multilabel=multilabel,
                                              max_iter=max_iter, device=device)
    zeros = (torch.zeros_like(w.cpu().double()), torch.zeros_like(b.cpu().double()))
    constant = _val_metric(xv, y_val, *zeros, multilabel)
    return LinearProbe(w.cpu(), b.cpu(), multilabel, iters, vals[chosen], iters, [],
                       val_at_init=constant, max_steps=max_iter, kind="clip_lbfgs", sweep=sweep, chosen_c=c,
                       init_weight=zeros[0], init_bias=zeros[1])


def _val_log_loss(xv: torch.Tensor, yv: torch.Tensor, w: torch.Tensor, b: torch.Tensor, multilabel: bool) -> float:
    logits = torch.addmm(b, xv, w.T)
    if multilabel:
        known = ~yv.isnan()
        ll = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.nan_to_num(yv.to(logits)),
                                                                  reduction="none")
        return float((ll * known).sum() / known.sum().clamp_min(1))
    y = yv.reshape(-1)
    keep = ~y.isnan() if y.is_floating_point() else torch.ones_like(y, dtype=torch.bool)
    return float(torch.nn.functional.cross_entropy(logits[keep], y[keep].long()))


def _labelled(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = y.reshape(-1)
    if y.is_floating_point() and bool(y.isnan().any()):
        keep = ~y.isnan()
        return x[keep], y[keep]
    return x, y


# -- did it learn? --------------------------------------------------------------------------------------
def diagnose_probe(
    probe: LinearProbe,
    x_val: torch.Tensor,
    y_val: torch.Tensor,
    *,
    min_weight_change: float = 0.01,
    std_threshold: float = 1e-3,
    early_fraction: float = 0.02,
) -> dict[str, Any]:
    """Whether a linear probe learned anything. ``learned`` is False when training barely moved
    the head (eva: ``‖W − W₀‖ / ‖W₀‖`` of the weight matrix, bias left out, below
    ``min_weight_change`` from its seeded initial weights — SGD steps too small for the
    embeddings' scale), or when its best validation metric
    is no better than a constant predictor's (majority-class accuracy; macro AUROC 0.5) or, for
    eva, than its initial weights'. ``reasons`` says which. ``warnings``: near-constant validation
    probabilities (largest per-class std below ``std_threshold``: their ranking may be fine, but
    a threshold such as 0.5 means nothing) and a best step in the first ``early_fraction`` of the
    steps run (eva's early stopping right after the start)."""
    probs = probe.predict_proba(x_val.float()).double()
    spread = float(probs.std(0).max()) if probs.shape[0] > 1 else 0.0
    change = math.inf
    if probe.init_weight is not None and float(probe.init_weight.norm()) > 0:  # the weights, not the bias:
        w0 = probe.init_weight.double()  # the bias follows the class frequencies at any embedding scale
        change = float((probe.weight.double() - w0).norm() / w0.norm())
    if probe.multilabel:
        constant = 0.5
    else:
        yl = y_val.reshape(-1)
        yl = yl[~yl.isnan()] if yl.is_floating_point() else yl
        constant = float(torch.bincount(yl.long()).max()) / max(1, int(yl.numel()))
    reasons, warnings_ = [], []
    if change < min_weight_change:
        reasons.append(f"training barely moved the head: its weights changed by {change:.2%} of their initial "
                       f"norm (< {min_weight_change:.0%}); the SGD steps are too small for these embeddings")
    if not probe.best_val > constant:
        name = "macro AUROC" if probe.multilabel else "accuracy"
        reasons.append(f"best validation {name} {probe.best_val:.4f} is no better than a constant predictor's "
                       f"({constant:.4f})")
    if probe.kind == "eva" and not probe.best_val > probe.val_at_init:
        reasons.append(f"best validation metric {probe.best_val:.4f} never improved on the initial weights' "
                       f"({probe.val_at_init:.4f} at step 0)")
    if spread < std_threshold:
        warnings_.append(f"near-constant probabilities: largest per-class std on validation {spread:.2g} "
                         f"(< {std_threshold:g}); thresholded metrics (accuracy, sensitivity at 0.5) say little")
    if probe.kind == "eva" and probe.steps >= 50 and probe.best_step <= max(1, early_fraction * probe.steps):
        warnings_.append(f"best validation metric at step {probe.best_step} of {probe.steps} run "
                         f"(max_steps {probe.max_steps}): early stopping right after the start")
    return {"learned": not reasons, "reasons": reasons, "warnings": warnings_, "probe": probe.kind,
            "weight_change": change if math.isfinite(change) else None, "val_pred_std": spread,
            "best_val": probe.best_val, "val_at_init": probe.val_at_init, "constant_val": constant,
            "best_step": probe.best_step, "steps": probe.steps}
