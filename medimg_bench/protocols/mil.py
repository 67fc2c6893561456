"""``protocol=mil``: slide-level labels from tile embeddings (multiple-instance learning).

Tile embeddings come from the embedding cache (one file per split, as the probes use), grouped
per slide by the tile dataset's ``slide_id``. Two aggregators:

* ``abmil`` — kaiko-ai/eva's ``ABMIL`` head (``src/eva/vision/models/networks/abmil.py``,
  gated attention of Ilse et al. 2018): input projection 128, attention hidden 128, MLP
  128 → 64 → out, no dropout;
* ``mean`` — the mean of a slide's tile embeddings through the same projection and MLP.

Training follows eva's ``configs/vision/pathology/offline/classification/camelyon16.yaml``:
AdamW lr 1e-3 betas (0.9, 0.999) (torch's default weight decay 0.01), batch 32 slides,
at most 100 epochs, best-on-validation weights by balanced accuracy, early stopping after 20
epochs without improvement; one output with ``BCEWithLogitsLoss`` for two classes, else
cross-entropy. Slide-level AUROC and balanced accuracy come with patient-clustered CIs.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["ABMIL", "MeanPoolMIL", "Bags", "group_bags", "train_mil", "MILResult", "MILSettings", "predict_bags", "top_attention_tiles", "run_mil", "build_aggregator", "unscored_slides"]


def _mlp(input_size: int, output_size: int, hidden: Sequence[int], dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    prev = input_size
    for size in hidden:  # Linear → ReLU → Dropout, as eva's MLP
        layers += [nn.Linear(prev, size), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout > 0 else [])
        prev = size
    layers.append(nn.Linear(prev, output_size))
    return nn.Sequential(*layers)


class _Projected(nn.Module):
    def __init__(self, input_size: int, projected: int | None, dropout: float) -> None:
        super().__init__()
        if projected:
            self.projector: nn.Module = nn.Sequential(nn.Linear(input_size, projected), nn.Dropout(dropout))
        else:
            self.projector = nn.Dropout(dropout)
        self.width = projected or input_size


class ABMIL(_Projected):
    """Gated-attention MIL (eva's ``ABMIL``): ``forward(x (B, N, D), mask (B, N) True = tile)``
    returns logits ``(B, output_size)``; ``attention`` holds the last weights ``(B, N)``."""

    def __init__(self, input_size: int, output_size: int, *, projected_input_size: int | None = 128,
                 hidden_size_attention: int = 128, hidden_sizes_mlp: Sequence[int] = (128, 64),
                 dropout_input_embeddings: float = 0.0, dropout_attention: float = 0.0,
                 dropout_mlp: float = 0.0) -> None:
        super().__init__(input_size, projected_input_size, dropout_input_embeddings)
        w, h = self.width, hidden_size_attention
        self.attention_a = nn.Sequential(nn.Linear(w, h), nn.Dropout(dropout_attention), nn.Tanh())
        self.attention_b = nn.Sequential(nn.Linear(w, h), nn.Dropout(dropout_attention), nn.Sigmoid())
        self.attention_c = nn.Linear(h, 1)
        self.classifier = _mlp(w, output_size, hidden_sizes_mlp, dropout_mlp)
        self.attention: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is None and bool(torch.isneginf(x).any()):  # eva pads bags with -inf rows
            mask = ~torch.isneginf(x).all(-1)
        if mask is not None:
            x = x.masked_fill(~mask[..., None], 0.0)
        h = self.projector(x)
        logits = self.attention_c(self.attention_a(h) * self.attention_b(h))[..., 0]  # (B, N)
        if mask is not None:
            logits = logits.masked_fill(~mask, float("-inf"))
        a = torch.softmax(logits, dim=1)
        self.attention = a.detach()
        return self.classifier(torch.einsum("bn,bnd->bd", a, h))


class MeanPoolMIL(_Projected):
    """The baseline: mean of the (projected) tile embeddings of a slide, then eva's MLP."""

    def __init__(self, input_size: int, output_size: int, *, projected_input_size: int | None = 128,
                 hidden_sizes_mlp: Sequence[int] = (128, 64), dropout_input_embeddings: float = 0.0,
                 dropout_mlp: float = 0.0, **_: Any) -> None:
        super().__init__(input_size, projected_input_size, dropout_input_embeddings)
        self.classifier = _mlp(self.width, output_size, hidden_sizes_mlp, dropout_mlp)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.projector(x)
        if mask is None:
            return self.classifier(h.mean(1))
        m = mask[..., None].to(h.dtype)
        return self.classifier((h * m).sum(1) / m.sum(1).clamp_min(1.0))


AGGREGATORS = {"abmil": ABMIL, "mean": MeanPoolMIL}


def build_aggregator(name: str, input_size: int, output_size: int, **options: Any) -> nn.Module:
    """An aggregator by name (``abmil``, ``mean``)."""
    if name not in AGGREGATORS:
        raise ValueError(f"mil: aggregator={name!r}; known: {sorted(AGGREGATORS)}")
    return AGGREGATORS[name](input_size, output_size, **options)


@dataclass
class Bags:
    """One bag of tile embeddings per slide: ``x[i]`` (n_i, D), ``y`` (S,) int, ``patients``."""

    slide_ids: list[str]
    x: list[torch.Tensor]
    y: torch.Tensor
    patients: list[str]
    tile_ids: list[list[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.slide_ids)


def group_bags(emb: Any, manifest: Any) -> Bags:
    """Group embeddings (ids = tile ids of ``manifest``) by the manifest's ``slide_id``; the
    slide's ``label`` and ``patient_id`` come from its tiles (all tiles of a slide must agree)."""
    m = manifest.set_index(manifest["id"].astype(str))
    for col in ("slide_id", "label"):
        if col not in m.columns:
            raise ValueError(f"mil: the dataset's manifest has no {col!r} column (a slide-level tile dataset: "
                             f"camelyon16, wsi_tiles with labels_csv)")
    slides = m.loc[emb.ids, "slide_id"].astype(str).to_numpy()
    order: dict[str, list[int]] = {}
    for i, s in enumerate(slides):
        order.setdefault(s, []).append(i)
    ys, pats, xs = [], [], []
    for s, idx in order.items():
        rows = m.loc[[emb.ids[i] for i in idx]]
        labels = set(rows["label"].tolist())
        if len(labels) != 1:
            raise ValueError(f"mil: slide {s!r} has tiles with different labels {sorted(labels)}")
        ys.append(int(labels.pop()))
        pats.append(str(rows["patient_id"].iloc[0]) if "patient_id" in rows else s)
        xs.append(emb.x[torch.as_tensor(idx)])
    tiles = [[emb.ids[i] for i in idx] for idx in order.values()]
    return Bags(list(order), xs, torch.as_tensor(ys, dtype=torch.long), pats, tiles)


@torch.no_grad()
def top_attention_tiles(model: nn.Module, bags: Bags, *, k: int = 5, device: str | torch.device = "cpu") -> list[list[str]]:
    """The ``k`` tile ids of each slide with the highest ABMIL attention (highest first)."""
    model.eval()
    out = []
    for x, ids in zip(bags.x, bags.tile_ids):
        model(x[None].to(device))
        a = model.attention[0].cpu()
        out.append([ids[i] for i in torch.argsort(a, descending=True)[:k].tolist()])
    return out


def _pad(xs: Sequence[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(x) for x in xs)
    out = torch.zeros(len(xs), n, xs[0].shape[1], device=device)
    mask = torch.zeros(len(xs), n, dtype=torch.bool, device=device)
    for i, x in enumerate(xs):
        out[i, : len(x)] = x.to(device)
        mask[i, : len(x)] = True
    return out, mask


@torch.no_grad()
def predict_bags(model: nn.Module, bags: Bags, *, num_classes: int, batch_size: int = 32,
                 device: str | torch.device = "cpu") -> torch.Tensor:
    """Class probabilities ``(S, num_classes)`` of every slide (two classes: ``[1 - p, p]``)."""
    model.eval()
    out = []
    for j in range(0, len(bags), batch_size):
        x, mask = _pad(bags.x[j:j + batch_size], torch.device(device))
        logits = model(x, mask).float()
        if num_classes == 2:
            p = torch.sigmoid(logits[:, 0])
            out.append(torch.stack([1 - p, p], 1).cpu())
        else:
            out.append(torch.softmax(logits, 1).cpu())
    return torch.cat(out)


def balanced_accuracy(probs: torch.Tensor, y: torch.Tensor) -> float:
    """Mean recall over the classes present in ``y`` (prediction = argmax; for two classes the
    0.5 threshold, as eva's ``BinaryBalancedAccuracy``)."""
    pred = probs.argmax(1)
    recalls = [float((pred[y == k] == k).float().mean()) for k in torch.unique(y).tolist()]
    return float(np.mean(recalls)) if recalls else math.nan


@dataclass
class MILResult:
    """The trained aggregator (best-on-validation weights), best epoch and the curve."""

    model: nn.Module
    best_epoch: int
    best_val: float
    epochs: int
    val_curve: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class MILSettings:
    """eva's camelyon16 settings (see the module docstring); ``head`` holds aggregator options."""

    aggregator: str = "abmil"
    epochs: int = 100
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    patience: int | None = 20
    head: Mapping[str, Any] = field(default_factory=dict)


def train_mil(train: Bags, val: Bags, *, num_classes: int, settings: MILSettings | None = None, seed: int = 0,
              device: str | torch.device = "cpu") -> MILResult:
    """Train an aggregator on ``train`` bags (shuffled batches of slides, padded and masked),
    validate after every epoch by balanced accuracy, keep the best weights (a later epoch must
    be strictly better) and stop after ``patience`` epochs without improvement."""
    import time

    st = settings or MILSettings()
    aggregator, epochs, batch_size, patience = st.aggregator, st.epochs, st.batch_size, st.patience
    start = time.perf_counter()
    dev = torch.device(device)
    torch.manual_seed(seed)
    dim = int(train.x[0].shape[1])
    model = build_aggregator(aggregator, dim, 1 if num_classes == 2 else num_classes, **dict(st.head or {})).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=st.lr, betas=(0.9, 0.999), weight_decay=st.weight_decay)
    gen = torch.Generator().manual_seed(seed)
    best, best_epoch, best_state, since, curve = -math.inf, 0, copy.deepcopy(model.state_dict()), 0, []
    epoch = 0
    for epoch in range(1, epochs + 1):
        model.train()
        for b in torch.randperm(len(train), generator=gen).split(batch_size):
            x, mask = _pad([train.x[i] for i in b.tolist()], dev)
            y = train.y[b].to(dev)
            logits = model(x, mask)
            if num_classes == 2:
                loss = nn.functional.binary_cross_entropy_with_logits(logits[:, 0], y.float())
            else:
                loss = nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        v = balanced_accuracy(predict_bags(model, val, num_classes=num_classes, device=dev), val.y)
        curve.append((epoch, v))
        if v > best:
            best, best_epoch, best_state, since = v, epoch, copy.deepcopy(model.state_dict()), 0
        else:
            since += 1
            if patience is not None and since >= patience:
                break
    model.load_state_dict(best_state)
    return MILResult(model, best_epoch, best, epoch, curve, time.perf_counter() - start)


# -- the protocol --------------------------------------------------------------------------------
def _bags_of_splits(c: Mapping[str, Any], p: Mapping[str, Any], extra: dict[str, Any],
                    shared: Mapping[str, Any]) -> dict[str, Bags]:
    from medimg_bench.protocols.embeddings import cached_embeddings

    train, val, test = shared["datasets"](c, p)
    enc = shared["encoder"](c, test)
    e = dict(p.get("embeddings") or {})
    kw = {"model_name": shared["model_key"](c), "cache_dir": e.get("cache_dir"), "batch_size": int(e.get("batch_size", 64)),
          "num_workers": int(e.get("num_workers", 0)), "amp": bool(c.get("amp"))}
    splits = {"train": (train, f"{c['dataset']['train_split']}-train"),
              "val": (val, p.get("val_split") or f"{c['dataset']['train_split']}-val"),
              "test": (test, c["dataset"].get("split"))}
    bags, info = {}, {}
    for k, (ds, split) in splits.items():
        emb = cached_embeddings(enc, ds, split=split, **kw)
        bags[k] = group_bags(emb, ds.manifest)
        info[k] = {"tiles": len(emb.ids), "slides": len(bags[k]), "dim": int(emb.x.shape[1]), "source": emb.source,
                   "refused": emb.refused, "failed": emb.failed[:20], "seconds": round(emb.seconds, 3)}
    extra["embeddings"] = info
    extra["classes"] = list(test.classes)
    extra["test_unscored"] = unscored_slides(test, bags["test"])
    extra["test_exclusions"] = [e for e in getattr(test, "exclusions", []) if e.get("kind") != "no_tiles"]
    return bags


def unscored_slides(dataset: Any, bags: Bags) -> list[dict[str, str]]:
    """The slides of ``dataset``'s set that have no bag, as failed rows (``id``, ``patient_id``,
    ``error``): a slide the loader found no tissue tile in (its exclusions of kind
    ``no_tiles``) and a listed slide none of whose tiles was embedded. Nothing leaves the
    test set silently: a slide-level figure is over the scored slides, the rest are counted."""
    have = set(bags.slide_ids)
    out: list[dict[str, str]] = []
    for e in getattr(dataset, "exclusions", []):
        if e.get("kind") == "no_tiles" and e["id"] not in have:
            have.add(e["id"])
            out.append({"id": e["id"], "patient_id": e["id"], "error": f"[load] {e['reason']} ({e['file']})"})
    m = dataset.manifest
    if "slide_id" in m.columns:
        first = m.drop_duplicates("slide_id")
        pats = first["patient_id"] if "patient_id" in first.columns else first["slide_id"]
        for sid, pid in zip(first["slide_id"].astype(str), pats.astype(str)):
            if sid not in have:
                out.append({"id": sid, "patient_id": pid,
                            "error": "[load] no tile of the slide could be embedded (see embeddings.failed)"})
    return out


def _with_unscored(summary: dict[str, Any], samples: Any, unscored: Sequence[Mapping[str, str]],
                   exclusions: Sequence[Mapping[str, str]]) -> tuple[dict[str, Any], Any]:
    """The slide-level summary and table with the unscored slides as failed rows (``n_failed``,
    ``failed_ids``, ``n_samples``) and the set's other exclusions counted (``n_excluded``)."""
    import pandas as pd

    from medimg_bench.engine.summary import exclusion_summary

    if unscored:
        failed = pd.DataFrame([{**dict(u), "status": "failed"} for u in unscored])
        samples = pd.concat([samples, failed], ignore_index=True)
        ids = sorted(set(summary.get("failed_ids") or []) | {u["id"] for u in unscored})
        summary = {**summary, "n_failed": len(ids), "failed_ids": ids,
                   "n_samples": int(samples["id"].nunique())}
    return {**summary, **exclusion_summary(list(exclusions))}, samples


def run_mil(c: Mapping[str, Any], p: Mapping[str, Any], seed: int, extra: dict[str, Any], *,
            shared: Mapping[str, Any]) -> Any:
    """One seed of ``protocol=mil``: train the aggregator, score the test slides. ``shared``:
    the run module's helpers (datasets, encoder, model_key, device, score)."""
    _device, _score = shared["device"], shared["score"]
    if "bags" not in extra:  # embeddings once per run, shared by every seed
        extra["bags"] = _bags_of_splits(c, p, extra, shared)
    bags, classes = extra["bags"], extra["classes"]
    o = dict(p.get("options") or {})
    st = MILSettings(aggregator=str(o.get("aggregator", "abmil")), epochs=int(o.get("epochs", 100)),
                     batch_size=int(o.get("batch_size", 32)), lr=float(o.get("lr", 1e-3)),
                     weight_decay=float(o.get("weight_decay", 0.01)), patience=o.get("patience", 20),
                     head=dict(o.get("head") or {}))
    res = train_mil(bags["train"], bags["val"], num_classes=len(classes), settings=st, seed=seed, device=_device(c))
    te = bags["test"]
    probs = predict_bags(res.model, te, num_classes=len(classes), device=_device(c))
    slide_cfg = {**dict(c), "task": {"name": "classification", "options": {"multilabel": False}},
                 "metrics": p.get("metrics") or c.get("metrics")}
    summary, samples = _score(slide_cfg, probs, te.y, te.slide_ids, te.patients, classes, seed)
    samples["n_tiles"] = samples["id"].map({s: len(x) for s, x in zip(te.slide_ids, te.x)})
    if isinstance(res.model, ABMIL) and te.tile_ids:  # where the head looked: tiles to inspect
        top = dict(zip(te.slide_ids, top_attention_tiles(res.model, te, device=_device(c))))
        samples["top_attention_tiles"] = samples["id"].map(lambda s: ",".join(top[s]))
    summary, samples = _with_unscored(summary, samples, extra.get("test_unscored", []),
                                      extra.get("test_exclusions", []))
    info = {"aggregator": str(o.get("aggregator", "abmil")), "best_epoch": res.best_epoch, "best_val": res.best_val,
            "epochs": res.epochs, "train_slides": len(bags["train"]), "val_slides": len(bags["val"]),
            "test_slides": len(te), "train_seconds": round(res.seconds, 3),
            "seconds_per_slide_epoch": round(res.seconds / max(1, res.epochs * len(bags["train"])), 6)}
    return {"summary": summary, "samples": samples, "info": info}
