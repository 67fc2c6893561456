"""Probes on synthetic embeddings whose right answer is known."""

import math

import numpy as np
import pytest
import torch

from medimg_bench.metrics.classification import macro_rank_auroc
from medimg_bench.protocols.probes import (
    knn_predict,
    select_metric,
    train_linear_probe,
)


def _blobs(n, d=32, k=4, sep=4.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(k, d, generator=g) * sep
    y = torch.randint(0, k, (n,), generator=g)
    return centers[y] + torch.randn(n, d, generator=g), y


def test_linear_probe_separable_classes_reach_100_percent():
    x, y = _blobs(900)
    probe = train_linear_probe(x[:600], y[:600], x[600:700], y[600:700], num_classes=4, multilabel=False,
                               max_steps=400, batch_size=64, lr=0.01, patience=None)
    acc = select_metric(probe.predict_proba(x[700:]), y[700:], multilabel=False)
    assert acc >= 0.99 and probe.best_val >= 0.99


def test_linear_probe_random_labels_stay_at_chance():
    x, _ = _blobs(1600, sep=0.0)
    y = torch.randint(0, 4, (1600,), generator=torch.Generator().manual_seed(1))
    probe = train_linear_probe(x[:1000], y[:1000], x[1000:1200], y[1000:1200], num_classes=4, multilabel=False,
                               max_steps=300, batch_size=64, lr=0.01)
    acc = select_metric(probe.predict_proba(x[1200:]), y[1200:], multilabel=False)
    assert abs(acc - 0.25) < 0.08, acc


def test_linear_probe_multilabel_and_model_selection_on_validation():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(800, 16, generator=g)
    y = torch.stack([(x[:, 0] > 0), (x[:, 1] > 0.5)], 1).float()
    y[::7, 1] = float("nan")  # unlabelled entries are ignored
    probe = train_linear_probe(x[:500], y[:500], x[500:600], y[500:600], num_classes=2, multilabel=True,
                               max_steps=300, batch_size=50, lr=0.05, val_every=10)
    assert probe.best_step in [s for s, _ in probe.val_curve]
    assert probe.best_val == max(v for _, v in probe.val_curve)
    assert macro_rank_auroc(probe.predict_proba(x[600:]), y[600:]) > 0.97


def test_early_stopping_stops_after_patience_validations():
    x, y = _blobs(400)
    probe = train_linear_probe(x[:300], y[:300], x[300:], y[300:], num_classes=4, multilabel=False,
                               max_steps=10_000, batch_size=100, lr=0.05, patience=3, val_every=1)
    assert probe.steps < 10_000
    assert len(probe.val_curve) - 1 - [s for s, _ in probe.val_curve].index(probe.best_step) == 3


def test_macro_auroc_equals_sklearn():
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    s = torch.tensor(rng.integers(0, 5, (200, 3)) / 4.0)  # ties
    y = torch.tensor(rng.integers(0, 2, (200, 3))).float()
    ref = np.mean([sklearn.roc_auc_score(y[:, k], s[:, k]) for k in range(3)])
    assert math.isclose(macro_rank_auroc(s, y), ref, rel_tol=1e-12)


def test_knn_separable_and_random():
    x, y = _blobs(600)
    probs = knn_predict(x[:400], y[:400], x[400:], num_classes=4, multilabel=False, k=10)
    assert torch.allclose(probs.sum(1), torch.ones(200), atol=1e-5)
    assert select_metric(probs, y[400:], multilabel=False) >= 0.99
    xr, _ = _blobs(1200, sep=0.0)
    yr = torch.randint(0, 4, (1200,), generator=torch.Generator().manual_seed(3))
    acc = select_metric(knn_predict(xr[:900], yr[:900], xr[900:], num_classes=4, multilabel=False), yr[900:],
                        multilabel=False)
    assert abs(acc - 0.25) < 0.1, acc


def test_knn_votes_are_temperature_weighted_cosine():
    xt = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    yt = torch.tensor([0, 1, 1])
    q = torch.tensor([[2.0, 0.2]])
    probs = knn_predict(xt, yt, q, num_classes=2, multilabel=False, k=2, temperature=0.5)
    cos = torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(xt, dim=1).T
    top = cos[0].topk(2)
    w = (top.values / 0.5).exp()
    expected1 = float(w[(yt[top.indices] == 1)].sum() / w.sum())
    assert math.isclose(float(probs[0, 1]), expected1, rel_tol=1e-5)


@pytest.mark.parametrize("multilabel", [False, True])
def test_closed_form_steps_equal_linear_sgd_cosine_with_autograd(multilabel):
    """The probe's hand-written update is torch.nn.Linear + SGD(momentum, wd) + cosine LR."""
    n, d, k, bs, steps, lr = 50, 6, 3, 16, 7, 0.3
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(n, d, generator=gen)
    y = (torch.rand(n, k, generator=gen) > 0.5).float() if multilabel else torch.randint(0, k, (n,), generator=gen)
    probe = train_linear_probe(x, y, x[:10], y[:10], num_classes=k, multilabel=multilabel, max_steps=steps,
                               batch_size=bs, lr=lr, momentum=0.9, weight_decay=0.01, patience=None,
                               val_every=1000, seed=2)
    g = torch.Generator().manual_seed(2)
    bound = 1 / math.sqrt(d)
    head = torch.nn.Linear(d, k)
    with torch.no_grad():
        head.weight.copy_(torch.rand(k, d, generator=g) * 2 * bound - bound)
        head.bias.copy_(torch.rand(k, generator=g) * 2 * bound - bound)
    opt = torch.optim.SGD(head.parameters(), lr=lr, momentum=0.9, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=0.0)
    perm, pos = torch.randperm(n, generator=g), 0
    for _ in range(steps):
        if pos + bs > n:
            perm, pos = torch.randperm(n, generator=g), 0
        idx = perm[pos:pos + bs]
        pos += bs
        out = head(x[idx])
        loss = (torch.nn.functional.binary_cross_entropy_with_logits(out, y[idx]) if multilabel
                else torch.nn.functional.cross_entropy(out, y[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    assert torch.allclose(probe.weight, head.weight.detach(), atol=1e-5)
    assert torch.allclose(probe.bias, head.bias.detach(), atol=1e-5)
