"""Linear probe speed and accuracy on cached-size embeddings, ours (eva settings) vs scikit-learn.

    python benchmarks/linear_probe.py [--n 100000] [--dim 768] [--classes 10] [--sep 0.04]
        [--device cpu|cuda] [--no-sklearn]

Builds ``n`` embeddings (Gaussian class means with per-dimension scale ``sep`` plus unit
noise, so the classes overlap and accuracy is below 100 %), split 80/10/10 into train / val /
test. Times :func:`medimg_bench.protocols.probes.train_linear_probe` with the eva protocol
settings (SGD lr 0.000625, momentum 0.9, cosine over 12,500 steps of batch 256, validation once
per epoch, best-on-validation weights, patience 400) and scikit-learn's
``LogisticRegression(max_iter=1000)`` (lbfgs, multinomial, L2 C=1) on the same train split;
prints wall-clock seconds, test accuracy of both and the time ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--sep", type=float, default=0.04)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-sklearn", action="store_true")
    a = ap.parse_args()
    from medimg_bench.protocols.probes import select_metric, train_linear_probe

    g = torch.Generator().manual_seed(0)
    centers = torch.randn(a.classes, a.dim, generator=g) * a.sep
    y = torch.randint(0, a.classes, (a.n,), generator=g)
    x = centers[y] + torch.randn(a.n, a.dim, generator=g)
    n_tr, n_va = int(0.8 * a.n), int(0.1 * a.n)
    xtr, ytr, xva, yva, xte, yte = x[:n_tr], y[:n_tr], x[n_tr:n_tr + n_va], y[n_tr:n_tr + n_va], \
        x[n_tr + n_va:], y[n_tr + n_va:]
    print(f"{a.n:,} x {a.dim} embeddings, {a.classes} classes; train {n_tr:,} / val {n_va:,} / test {len(yte):,}; "
          f"torch threads {torch.get_num_threads()}, device {a.device}")
    t = time.perf_counter()
    probe = train_linear_probe(xtr, ytr, xva, yva, num_classes=a.classes, multilabel=False, seed=0, device=a.device)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    ours_s = time.perf_counter() - t
    ours_acc = select_metric(probe.predict_proba(xte), yte, multilabel=False)
    print(f"medimg_bench linear probe (eva): {ours_s:7.2f} s  test acc {ours_acc:.4f}  "
          f"(steps {probe.steps}, best step {probe.best_step}, val acc {probe.best_val:.4f})")
    if a.no_sklearn:
        return
    from sklearn.linear_model import LogisticRegression

    t = time.perf_counter()
    clf = LogisticRegression(max_iter=1000).fit(xtr.numpy(), ytr.numpy())
    sk_s = time.perf_counter() - t
    sk_acc = float((clf.predict(xte.numpy()) == yte.numpy()).mean())
    print(f"sklearn LogisticRegression:      {sk_s:7.2f} s  test acc {sk_acc:.4f}  (iterations {int(np.max(clf.n_iter_))})")
    print(f"time ratio ours / sklearn: {ours_s / sk_s:.2f}; accuracy difference {ours_acc - sk_acc:+.4f}")


if __name__ == "__main__":
    main()
