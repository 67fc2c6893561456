"""Embedding extraction throughput vs a bare forward loop of the same model.

    python benchmarks/embedding_extraction.py [--model resnet50] [--n 2048] [--size 224]
        [--batch-size 64] [--device cpu|cuda] [--amp] [--repeats 3]

Both sides read the same in-memory dataset (``n`` random 1×size×size images in [0, 1]) through
a ``DataLoader`` with the same batch size. The bare loop is ``module(prepare(x))`` per batch under
``inference_mode``; ours is :func:`medimg_bench.protocols.embeddings.extract_embeddings` (skips
unreadable samples, pools, gathers embeddings, labels, ids and patients on the CPU). Prints
images/s of both (best of ``repeats``) and the ratio ours / bare (goal ≥ 0.90).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class _Images(torch.utils.data.Dataset):
    def __init__(self, n: int, size: int) -> None:
        self.x = torch.rand(n, 1, size, size)
        self.name = "bench_images"

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"id": f"s{i}", "image": self.x[i], "label": torch.tensor(float(i % 2)), "meta": {"patient_id": f"p{i}"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from medimg_bench.datasets.check import skip_collate
    from medimg_bench.models.encoders import build_encoder
    from medimg_bench.protocols.embeddings import extract_embeddings

    enc = build_encoder({"name": "timm", "options": {"model_name": a.model}}, in_channels=1).to(a.device)
    data = _Images(a.n, a.size)
    dev = torch.device(a.device)
    dtype = torch.float16 if dev.type == "cuda" else torch.bfloat16

    def bare() -> float:
        loader = torch.utils.data.DataLoader(data, batch_size=a.batch_size, collate_fn=skip_collate,
                                             pin_memory=dev.type == "cuda")
        t = time.perf_counter()
        with torch.inference_mode():
            for batch in loader:
                with torch.autocast(dev.type, dtype=dtype, enabled=a.amp):
                    out = enc.module(enc.prepare(batch["image"]))
                out.float().cpu()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t

    def ours() -> float:
        t = time.perf_counter()
        emb = extract_embeddings(enc, data, batch_size=a.batch_size, amp=a.amp)
        assert emb.x.shape[0] == a.n
        return time.perf_counter() - t

    bare(), ours()  # warm-up (cudnn autotune, allocator)
    tb = min(bare() for _ in range(a.repeats))
    to = min(ours() for _ in range(a.repeats))
    name = torch.cuda.get_device_name() if dev.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"{a.model} {a.n} x 1x{a.size}x{a.size}, batch {a.batch_size}, amp {a.amp}, {name}")
    print(f"bare forward loop:   {a.n / tb:9.1f} images/s ({tb:.2f} s)")
    print(f"extract_embeddings:  {a.n / to:9.1f} images/s ({to:.2f} s)")
    print(f"ratio ours / bare: {tb / to:.3f} (goal >= 0.90)")


if __name__ == "__main__":
    main()
