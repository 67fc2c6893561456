"""openai_vlm throughput: many requests in flight vs one at a time, against a loopback server.

    python benchmarks/vlm_openai.py [--latency 0.05] [--concurrency 32] [--n 1024] [--n-serial 40]
        [--image 64] [--repeat 3]

Starts ``tests/models/vlm/chat_server.py`` on 127.0.0.1 with ``latency`` seconds added to every
answer, sends ``n-serial`` requests with ``max_concurrency=1`` and ``n`` requests with
``max_concurrency=concurrency`` (each with one ``image`` x ``image`` RGB picture, PNG-encoded as
the adapter always does; cache off), ``repeat`` times each, and prints requests per second of
both (medians), the speed-up and the speed-up as a fraction of ``concurrency``. Goal: speed-up
>= 0.8 x concurrency. Client and server share the machine's cores, so other load shows.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests/models/vlm/chat_server.py"),
                             "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def _run(url: str, n: int, concurrency: int, image: int, tag: str) -> tuple[float, int]:
    from medimg_bench.models.vlm.base import GenerationRequest, GenerationSettings
    from medimg_bench.models.vlm.openai import OpenAIVLMAdapter

    a = OpenAIVLMAdapter(model="loopback", base_url=url, api_key_env=None, cache=False,
                         max_concurrency=concurrency, max_retries=0, timeout=30)
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (image, image, 3), dtype=np.uint8)
    reqs = [GenerationRequest(images=[img], user=f"{tag} question {i}?",
                              settings=GenerationSettings(max_new_tokens=16)) for i in range(n)]
    t0 = time.perf_counter()
    out = a.generate(reqs)
    dt = time.perf_counter() - t0
    return dt, sum(r.error is not None for r in out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--n-serial", type=int, default=40)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    proc, url = _server(args.latency)
    serial, parallel = [], []
    try:
        _run(url, 8, 8, args.image, "warm-up")
        for k in range(args.repeat):
            t1, e1 = _run(url, args.n_serial, 1, args.image, f"serial{k}")
            tc, ec = _run(url, args.n, args.concurrency, args.image, f"parallel{k}")
            serial.append((args.n_serial / t1, e1))
            parallel.append((args.n / tc, ec))
    finally:
        proc.kill()
        proc.wait()
    r1 = float(np.median([r for r, _ in serial]))
    rc = float(np.median([r for r, _ in parallel]))
    speedup = rc / r1
    print(f"server latency {args.latency * 1000:.0f} ms, {args.image}x{args.image} RGB image per request, "
          f"median of {args.repeat}")
    print(f"one at a time : {args.n_serial:5d} requests: {r1:7.1f} req/s "
          f"(runs: {', '.join(f'{r:.1f}' for r, _ in serial)}; errors {sum(e for _, e in serial)})")
    print(f"{args.concurrency:3d} in flight : {args.n:5d} requests: {rc:7.1f} req/s "
          f"(runs: {', '.join(f'{r:.1f}' for r, _ in parallel)}; errors {sum(e for _, e in parallel)})")
    goal = 0.8 * args.concurrency
    print(f"speed-up {speedup:.1f}x = {speedup / args.concurrency:.2f} x {args.concurrency} "
          f"(goal >= {goal:.1f}x: {'met' if speedup >= goal else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
