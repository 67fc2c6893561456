"""hf_vlm generation: batched (left padding) vs one request at a time.

    python benchmarks/hf_generation.py --device cuda [--path /models/Qwen2.5-VL-7B-Instruct]
        [--n 64] [--n-single 16] [--batch 16] [--max-new-tokens 64] [--image 448] [--dtype auto]

Without ``--path`` the tiny random LLaVA is built into a temporary folder (offline). Sends ``n``
requests (one ``image`` x ``image`` RGB picture and a short question each, greedy decoding) with
``batch_size=batch`` and ``n-single`` of them with ``batch_size=1``; prints requests/s and
generated tokens/s of both, the speed-up, and how many of the ``n-single`` answers are identical
both ways. Needs torch, transformers, numpy, Pillow (no other extra); the response cache is off.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUESTIONS = ["Is there a pleural effusion?", "Which organ is shown in this image?",
             "Describe the abnormality in one sentence.", "Is this a CT or an MRI scan?",
             "Where is the lesion located?", "How many nodules are visible?"]


def main(argv: list[str] | None = None) -> int:
    import torch

    from medimg_bench.models.vlm.base import GenerationRequest, GenerationSettings
    from medimg_bench.models.vlm.hf import HFVLMAdapter

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--path", default=None, help="model folder (default: the tiny random LLaVA)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--n-single", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--image", type=int, default=448)
    args = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    path = args.path
    if path is None:
        from medimg_bench.models.vlm.tiny import build_tiny_vlm

        path = str(build_tiny_vlm(Path(tmp.name) / "tiny_vlm"))
    rng = np.random.default_rng(0)
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens)
    reqs = [GenerationRequest(images=[rng.integers(0, 255, (args.image, args.image, 3), dtype=np.uint8)],
                              user=QUESTIONS[i % len(QUESTIONS)], settings=settings, sample_id=str(i))
            for i in range(args.n)]

    def run(batch: int, requests: list[GenerationRequest]) -> tuple[float, int, list[str]]:
        model.batch_size = batch
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(requests)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        errors = [r.error for r in out if r.error]
        if errors:
            raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
        return dt, sum(r.tokens_out or 0 for r in out), [r.text for r in out]

    model = HFVLMAdapter(path=path, dtype=args.dtype, cache=False, batch_size=args.batch).to(args.device)
    run(min(args.batch, 4), reqs[:4])  # warm-up (kernels, allocator)
    t_b, tok_b, text_b = run(args.batch, reqs)
    t_1, tok_1, text_1 = run(1, reqs[:args.n_single])
    same = sum(a == b for a, b in zip(text_b[:args.n_single], text_1))
    rb, r1 = args.n / t_b, args.n_single / t_1
    dev = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    print(f"model {path} ({model.dtype}) on {dev}; {args.image}x{args.image} image, "
          f"max_new_tokens {args.max_new_tokens}, greedy")
    print(f"batch {args.batch:3d}: {args.n:4d} requests in {t_b:7.2f} s = {rb:7.2f} req/s, "
          f"{tok_b / t_b:8.1f} tokens/s")
    print(f"batch   1: {args.n_single:4d} requests in {t_1:7.2f} s = {r1:7.2f} req/s, "
          f"{tok_1 / t_1:8.1f} tokens/s")
    print(f"speed-up {rb / r1:.1f}x in requests/s; identical answers batched vs single: "
          f"{same}/{args.n_single}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
