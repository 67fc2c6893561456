"""Embeddings of a dataset split from a frozen encoder, computed once and cached.

The cache is one safetensors file per (model config name, dataset, split) holding ``x``
``(N, D)`` float32 and ``y`` (labels), with ids, patients and the full key in its metadata:
the encoder's identity (architecture, weights SHA-256, preprocessing), the dataset's name,
split and fingerprint (manifest, every file's content, loader options). A file whose key differs in any field is refused with the fields that
differ and recomputed. Files are written to a temporary name and moved into place under a file
lock, so concurrent runs (a sweep's seeds) compute once and never read a half-written file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench._fs import atomic_path

__all__ = ["Embeddings", "extract_embeddings", "cached_embeddings", "cache_key", "default_cache_dir"]

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$MEDIMG_BENCH_CACHE/embeddings`` (default ``~/.cache/medimg_bench/embeddings``)."""
    base = os.environ.get("MEDIMG_BENCH_CACHE") or (Path.home() / ".cache" / "medimg_bench")
    return Path(base) / "embeddings"


@dataclass
class Embeddings:
    """Embeddings ``x`` (N, D) float32, labels ``y`` (N,) or (N, K), ``ids`` and ``patients``;
    ``failed`` lists ids that could not be loaded; ``source`` says "cache" or "computed" and
    ``refused`` why an existing cache was not used (None if it was, or there was none)."""

    x: torch.Tensor
    y: torch.Tensor
    ids: list[str]
    patients: list[str]
    failed: list[str] = field(default_factory=list)
    source: str = "computed"
    refused: str | None = None
    seconds: float = 0.0

    def take(self, idx: Any) -> Embeddings:
        idx = torch.as_tensor(np.asarray(idx, dtype=np.int64))
        return Embeddings(self.x[idx], self.y[idx], [self.ids[i] for i in idx.tolist()],
                          [self.patients[i] for i in idx.tolist()], source=self.source)


def cache_key(encoder: Any, dataset: Any, split: str | None) -> dict[str, Any]:
    """The fields an embeddings cache must match: encoder identity (weights SHA-256,
    preprocessing) and the dataset's name, split, fingerprint and its parts — the manifest, the
    content of every file it names and the loader options (``dataset_identity``), so files
    shuffled or re-written under the same names, or another ``normalize``, are refused."""
    from medimg_bench.datasets.base import dataset_identity

    ident = dataset_identity(dataset)
    return {"encoder": encoder.identity(), "dataset": getattr(dataset, "name", type(dataset).__name__),
            "split": split, "dataset_fingerprint": ident.get("fingerprint"),
            "dataset_identity": {k: v for k, v in ident.items() if k != "fingerprint"}}


def _diff(saved: Any, now: Any, prefix: str = "") -> list[str]:
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(saved) | set(now)):
            out += _diff(saved.get(k), now.get(k), f"{prefix}{k}.")
        return out
    return [] if saved == now else [f"{prefix.rstrip('.')}: saved {saved!r}, now {now!r}"]


@torch.inference_mode()
def extract_embeddings(
    encoder: Any, dataset: Any, *, batch_size: int = 64, num_workers: int = 0, amp: bool = False,
    progress: bool = False,
) -> Embeddings:
    """Run ``encoder`` over every sample of ``dataset`` (unreadable samples are skipped and
    listed in ``failed``). Returns :class:`Embeddings` on the CPU."""
    import time

    from medimg_bench.datasets.check import SkipErrors, skip_collate

    start = time.perf_counter()
    loader = torch.utils.data.DataLoader(
        SkipErrors(dataset), batch_size=batch_size, shuffle=False, num_workers=num_workers,
        collate_fn=skip_collate, pin_memory=encoder.device.type == "cuda",
        persistent_workers=False,
    )
    xs, ys, ids, pats = [], [], [], []
    dev = encoder.device
    dtype = torch.bfloat16 if dev.type == "cpu" else torch.float16
    for batch in loader:
        if batch is None:
            continue
        images = batch["image"]
        if isinstance(images, list):
            raise ValueError(f"{getattr(dataset, 'name', 'dataset')}: images of different sizes in one batch "
                             f"(ids {list(batch['id'])[:3]}); set the encoder's image_size or batch_size=1")
        with torch.autocast(dev.type, dtype=dtype, enabled=amp):
            emb = encoder.forward(encoder.prepare(images))
        xs.append(emb.float().to("cpu", non_blocking=True))
        ys.append(torch.as_tensor(batch["label"]).float())
        ids += [str(i) for i in batch["id"]]
        pats += [str(m.get("patient_id", i)) for m, i in zip(batch.get("meta") or [{}] * len(batch["id"]),
                                                            batch["id"])]
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    if not xs:
        raise ValueError(f"{getattr(dataset, 'name', 'dataset')}: no sample could be loaded for embeddings")
    seen = set(ids)
    failed = [i for i in dataset.ids if i not in seen] if hasattr(dataset, "ids") else []
    patient_of = _patient_map(dataset)
    pats = [patient_of.get(i, p) for i, p in zip(ids, pats)]
    return Embeddings(torch.cat(xs), torch.cat(ys), ids, pats, failed=failed,
                      seconds=time.perf_counter() - start)


def _patient_map(dataset: Any) -> dict[str, str]:
    m = getattr(dataset, "manifest", None)
    if m is None or "patient_id" not in getattr(m, "columns", []):
        return {}
    return dict(zip(m["id"].astype(str), m["patient_id"].astype(str)))


def cached_embeddings(
    encoder: Any, dataset: Any, *, split: str | None, model_name: str, cache_dir: str | Path | None = None,
    batch_size: int = 64, num_workers: int = 0, amp: bool = False,
) -> Embeddings:
    """Embeddings of ``dataset`` from the cache when its key matches (see module docstring),
    else computed and stored. ``source``/``refused`` on the result say which happened and why."""
    from filelock import FileLock
    from safetensors import safe_open
    from safetensors.torch import save_file

    key = cache_key(encoder, dataset, split)
    key = {**key, "amp": bool(amp)}
    folder = Path(cache_dir) if cache_dir else default_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stem = "__".join(_slug(s) for s in (model_name, key["dataset"], str(split)))
    path = folder / f"{stem}.safetensors"
    with FileLock(str(path) + ".lock"):
        refused = None
        if path.exists():
            try:
                with safe_open(str(path), framework="pt") as f:
                    meta = f.metadata() or {}
                    saved_key = json.loads(meta.get("key", "{}"))
                    diffs = _diff(saved_key, json.loads(json.dumps(key)))
                    if not diffs:
                        out = Embeddings(f.get_tensor("x"), f.get_tensor("y"), json.loads(meta["ids"]),
                                         json.loads(meta["patients"]), failed=json.loads(meta.get("failed", "[]")),
                                         source="cache")
                        log.info("embeddings from cache %s", path)
                        return out
                    refused = f"cache {path} was made with other inputs: " + "; ".join(diffs[:6])
            except Exception as exc:  # unreadable / truncated file: recompute
                refused = f"cache {path} is unreadable ({type(exc).__name__}: {exc})"
            log.warning("%s; recomputing", refused)
        emb = extract_embeddings(encoder, dataset, batch_size=batch_size, num_workers=num_workers, amp=amp)
        emb.refused = refused
        meta = {"key": json.dumps(key, sort_keys=True), "ids": json.dumps(emb.ids),
                "patients": json.dumps(emb.patients), "failed": json.dumps(emb.failed),
                "key_sha256": hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()}
        with atomic_path(path, fsync=False) as tmp:
            save_file({"x": emb.x.contiguous(), "y": emb.y.contiguous()}, str(tmp), metadata=meta)
        return emb


def _slug(s: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in s)[:80]
