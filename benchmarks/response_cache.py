"""Response cache: a fully cached re-run of many requests.

    python benchmarks/response_cache.py [--n 10000] [--image 224] [--batch 16] [--path FILE]

Fills a fresh cache file with ``n`` answers of a stand-in adapter (one ``image`` x ``image`` RGB
picture and a question per request; every response committed on arrival, as in a real run),
then re-runs all ``n`` requests through a new adapter and a new ``ResponseCache`` (as a resumed
process would), ``batch`` requests per ``generate`` call, and checks it made zero model calls.
Prints seconds for the first (filling) run and the cached re-run, split into key computation
(image hashing included) and SQLite look-ups. Goal: cached re-run of 10,000 requests < 10 s on
2 cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    from medimg_bench.models.vlm.base import (
        GenerationRequest,
        GenerationResponse,
        GenerationSettings,
        GenerativeAdapter,
    )
    from medimg_bench.models.vlm.cache import ResponseCache, request_key

    class StandIn(GenerativeAdapter):
        backend = "bench"
        calls = 0

        def identity(self):
            return {"model": "stand-in", "revision": "1"}

        def _generate(self, requests):
            StandIn.calls += len(requests)
            return [GenerationResponse(text=f"answer {r.sample_id}", prompt=r.rendered_prompt(),
                                       tokens_in=40, tokens_out=3, finish_reason="stop")
                    for r in requests]

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--path", default=None, help="cache file (default: a temporary folder)")
    args = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    path = Path(args.path) if args.path else Path(tmp.name) / "responses.sqlite"
    rng = np.random.default_rng(0)
    n_images = 64  # distinct pictures, reused as datasets reuse images across questions
    images = [rng.integers(0, 255, (args.image, args.image, 3), dtype=np.uint8) for _ in range(n_images)]
    settings = GenerationSettings(max_new_tokens=32)
    reqs = [GenerationRequest(images=[images[i % n_images]], settings=settings, sample_id=str(i),
                              user=f"Question {i}: is there a pleural effusion in this image? "
                                   "Answer yes or no.") for i in range(args.n)]

    def run(adapter: GenerativeAdapter) -> float:
        t0 = time.perf_counter()
        for a in range(0, len(reqs), args.batch):
            out = adapter.generate(reqs[a:a + args.batch])
            assert len(out) == len(reqs[a:a + args.batch])
        return time.perf_counter() - t0

    first = StandIn()
    first.cache = ResponseCache(path)
    t_fill = run(first)
    filled_calls = StandIn.calls
    first.cache.close()
    again = StandIn()
    again.cache = ResponseCache(path)
    t_cached = run(again)
    calls = StandIn.calls - filled_calls
    t0 = time.perf_counter()
    fp = again.fingerprint()
    keys = [request_key(fp, r) for r in reqs]
    t_keys = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = again.cache.get_many(keys)
    t_lookup = time.perf_counter() - t0
    assert len(found) == len(set(keys)) == args.n
    size = again.cache.size_bytes()
    print(f"{args.n} requests, {args.image}x{args.image} RGB image each, {args.batch} per call, "
          f"cache file {size / 2**20:.1f} MiB")
    print(f"first run (model stand-in, every response committed): {t_fill:6.2f} s, "
          f"{filled_calls} model calls")
    print(f"fully cached re-run:                                   {t_cached:6.2f} s, "
          f"{calls} model calls (goal < 10 s for 10,000: {'met' if t_cached < 10 else 'NOT met'})")
    print(f"  of which request keys (image SHA-256 included): {t_keys:.2f} s; "
          f"one SQLite look-up of all keys: {t_lookup:.2f} s")
    return 0 if calls == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
