"""Probes on cached embeddings: a linear head trained as eva does, and a cosine kNN classifier
with temperature-weighted votes as in DINO.

Linear probe (eva, ``configs/vision/pathology/offline/classification/bach.yaml``): a
``torch.nn.Linear`` head, cross-entropy, SGD (momentum 0.9, weight decay 0) at lr 0.000625,
cosine annealing to 0 over ``max_steps`` = 12,500 steps of batch 256, validation once per epoch,
the checkpoint with the best validation metric kept, early stopping after ``patience`` = 400
validations without improvement. Multi-label targets use one sigmoid per class (binary
cross-entropy, NaN labels ignored) and macro AUROC on validation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from medimg_bench.metrics.classification import macro_rank_auroc

__all__ = ["LinearProbe", "train_linear_probe", "knn_predict", "select_metric"]


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

    def predict_proba(self, x: torch.Tensor, *, chunk: int = 65536) -> torch.Tensor:
        """Class probabilities ``(N, K)``: softmax (multi-class) or sigmoid (multi-label)."""
        outs = []
        for s in range(0, x.shape[0], chunk):
            logits = x[s:s + chunk].float() @ self.weight.T + self.bias
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
    x = x_train.float().to(dev)
    y = y_train.to(dev)
    if multilabel:
        y = y.float()
    else:
        if y.is_floating_point() and bool(y.isnan().any()):
            keep = ~y.isnan()
            x, y = x[keep], y[keep]
        y = y.long()
    n, d = x.shape
    if n == 0:
        raise ValueError("linear probe: no labelled training embedding")
    # seeded init with torch.nn.Linear's default bound; plain tensors and closed-form gradients
    # (softmax / sigmoid cross-entropy of a linear map) with torch.optim.SGD's momentum update
    # rule: the same steps as Linear + SGD + CosineAnnealingLR, without autograd overhead
    bound = 1 / math.sqrt(d)
    w = (torch.rand(num_classes, d, generator=g) * 2 * bound - bound).to(dev)
    b = (torch.rand(num_classes, generator=g) * 2 * bound - bound).to(dev)
    buf_w, buf_b = torch.zeros_like(w), torch.zeros_like(b)
    bs = min(batch_size, n)
    steps_per_epoch = max(1, n // bs)
    val_every = val_every or steps_per_epoch
    xv, yv = x_val.float().to(dev), y_val.to(dev)
    best = (-math.inf, 0, w.clone(), b.clone())
    curve: list[tuple[int, float]] = []
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
        if multilabel:
            t = y[idx]
            known = ~t.isnan()
            grad = (torch.sigmoid(logits) - torch.nan_to_num(t)) * known / known.sum().clamp_min(1)
        else:
            grad = torch.softmax(logits, dim=1)
            grad[rows, y[idx]] -= 1.0
            grad /= bs
        gw = grad.T @ xb
        gb = grad.sum(0)
        if weight_decay:
            gw += weight_decay * w
            gb += weight_decay * b
        if momentum:
            buf_w.mul_(momentum).add_(gw)
            buf_b.mul_(momentum).add_(gb)
            gw, gb = buf_w, buf_b
        w.sub_(step_lr * gw)
        b.sub_(step_lr * gb)
        step += 1
        if step % val_every == 0 or step == max_steps:
            logits_v = torch.addmm(b, xv, w.T)
            pv = torch.sigmoid(logits_v) if multilabel else torch.softmax(logits_v, 1)
            v = select_metric(pv, yv, multilabel=multilabel)
            curve.append((step, v))
            if v > best[0]:
                best = (v, step, w.clone(), b.clone())
                bad = 0
            else:
                bad += 1
                if patience is not None and bad >= patience:
                    break
    return LinearProbe(best[2].cpu(), best[3].cpu(), multilabel, best[1], best[0], step, curve)


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
