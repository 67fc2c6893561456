"""Open-answer judge throughput: a judged VQA run of ``n`` open answers against a loopback judge,
cold (empty response cache) and warm (every judgment cached).

    python benchmarks/judge_throughput.py [--n 1000] [--slots 16] [--latency 0.1] [--batch 250]
        [--repeat 2]

Starts ``tests/models/vlm/chat_server.py`` with ``--max-concurrency slots`` and ``--latency``
seconds per answer, scripted to reply like MedEvalKit's judge (``<judge>0</judge>``): the
server's own limit is ``slots / latency`` judgments per second. The answering model is in
process (instant), the judge is ``openai_vlm`` (``max_concurrency = 2 x slots``, so the server
is the bottleneck) under the ``medevalkit`` rubric. Prints, per run: cold wall time and
judgments per second as a fraction of the server's limit (goal >= 0.8), then the warm run's
wall time (goal < 5 s; the judge is only asked its one-token identity probe). Both are
``medimg_bench.evaluate`` end to end (dataset, task, metrics, bootstrap with 200 resamples); the
CPU seconds of this process are printed beside the wall time (they do not depend on other load).
"judge alone" times the grader on ``n`` answers in one call, without the run around it, and
"bare client" a plain asyncio httpx client sending ``n`` requests to the same server (the
server's delivered rate under the machine's current load: the peer the judge is compared with).
Client and server share the machine's cores, so other load shows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _server(slots: int, latency: float, rules: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(REPO / "tests/models/vlm/chat_server.py"), "--latency",
                             str(latency), "--max-concurrency", str(slots), "--replies", str(rules)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def _dataset(root: Path, n: int):
    import pandas as pd
    from PIL import Image

    from medimg_bench.datasets.vqa.base import VQADataset

    root.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((16, 16), 100, np.uint8)).save(root / "img.png")
    frame = pd.DataFrame({
        "id": [f"q{i}" for i in range(n)], "patient_id": [f"p{i}" for i in range(n)],
        "image_path": ["img.png"] * n, "question": [f"Which structure is shown in case {i}?" for i in range(n)],
        "options": [None] * n, "answer": [f"structure {i % 37}" for i in range(n)], "answer_type": ["open"] * n,
    })
    return VQADataset(frame, root=root, name="judge_bench")


def _answers():
    from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

    class Instant(GenerativeAdapter):
        backend = "instant"

        def __init__(self) -> None:
            super().__init__(name="instant")

        def identity(self) -> dict:
            return {"instant": 1}

        def _generate(self, requests):
            return [GenerationResponse(text=f"it is structure {r.sample_id[1:]}", prompt=r.user) for r in requests]

    return Instant()


def _run(ds, base: str, cache: Path, slots: int, batch: int) -> tuple[float, int, dict]:
    import httpx

    import medimg_bench as mb
    from medimg_bench.tasks.vqa import VQATask

    opts = {"base_url": base + "/v1", "model": "judge", "api_key_env": "none", "cache_path": str(cache),
            "max_concurrency": 2 * slots, "max_retries": 0, "timeout": 60}
    scoring = {"name": "medimg_bench", "judge": {"model": "openai_vlm", "options": opts, "rubric": "medevalkit"}}
    httpx.post(base + "/reset")
    t0, c0 = time.perf_counter(), time.process_time()
    res = mb.evaluate(_answers(), ds, task=VQATask(scoring=scoring), batch_size=batch, progress=False,
                      n_resamples=200)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    stats = httpx.get(base + "/stats").json()
    return dt, int(stats["posts"]), {**res.summary, "_cpu": cpu}


def _grade_only(base: str, cache: Path, slots: int, n: int) -> float:
    """Seconds for the judge alone to grade ``n`` answers in one call (no dataset, no metrics)."""
    from medimg_bench.metrics.text.judge import build_judge
    from medimg_bench.metrics.text.open_judge import load_rubric
    from medimg_bench.tasks._open_judge import OpenAnswerGrader

    judge = build_judge({"model": "openai_vlm", "options": {
        "base_url": base + "/v1", "model": "judge", "api_key_env": "none", "cache_path": str(cache),
        "max_concurrency": 2 * slots, "max_retries": 0, "timeout": 60}})
    grader = OpenAnswerGrader(judge, load_rubric("medevalkit"))
    items = [(f"g{i}", f"Which structure, case {i}?", f"structure {i}", f"it is structure {i}") for i in range(n)]
    t0 = time.perf_counter()
    out = grader.grade(items)
    dt = time.perf_counter() - t0
    assert all(o["error"] is None for o in out)
    return dt


def _raw(base: str, slots: int, n: int) -> float:
    """Seconds for a bare asyncio httpx client to get ``n`` judge-sized answers from the server
    with ``2 x slots`` in flight: what the server delivers under this machine's load right now."""
    import asyncio

    import httpx

    async def go() -> None:
        sem = asyncio.Semaphore(2 * slots)
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=2 * slots), timeout=60) as client:
            async def one(i: int) -> None:
                body = {"model": "raw", "temperature": 0, "max_tokens": 512, "messages": [
                    {"role": "user", "content": f"Standard answer: structure {i}. raw {i}"}]}
                async with sem:
                    r = await client.post(base + "/v1/chat/completions", json=body)
                    r.raise_for_status()
            await asyncio.gather(*(one(i) for i in range(n)))

    t0 = time.perf_counter()
    asyncio.run(go())
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    limit = args.slots / args.latency
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rules = tmp / "rules.json"
        rules.write_text(json.dumps([{"contains": "Standard answer", "replies": ["<think>same</think><judge>0</judge>"]}]))
        proc, base = _server(args.slots, args.latency, rules)
        try:
            ds = _dataset(tmp / "data", args.n)
            _run(_dataset(tmp / "warmup", 8), base, tmp / "warmup.sqlite", args.slots, args.batch)  # imports
            cold, warm = [], []
            for r in range(args.repeat):
                cache = tmp / f"cache{r}.sqlite"
                dt, posts, summary = _run(ds, base, cache, args.slots, args.batch)
                judged = summary["judge_agreement"]["n_answers"]
                cold.append(dt)
                print(f"cold {r}: {dt:.2f} s wall ({summary['_cpu']:.2f} s CPU in this process), {posts} judge posts, {judged} answers judged, "
                      f"{judged / dt:.1f} judgments/s = {judged / dt / limit:.2f} x the server's limit "
                      f"({args.slots} slots / {args.latency} s = {limit:.0f}/s)")
                dt, posts, summary = _run(ds, base, cache, args.slots, args.batch)
                warm.append(dt)
                print(f"warm {r}: {dt:.2f} s wall ({summary['_cpu']:.2f} s CPU), {posts} judge posts (identity probe)")
                raw = _raw(base, args.slots, args.n)
                print(f"bare client {r}: {args.n} answers in {raw:.2f} s = {args.n / raw / limit:.2f} x the "
                      f"server's nominal limit (what the server delivers under this load)")
                g = _grade_only(base, tmp / f"grade{r}.sqlite", args.slots, args.n)
                print(f"judge alone {r}: {args.n} answers in {g:.2f} s = {args.n / g / limit:.2f} x the server's limit, "
                      f"{raw / g:.2f} x the bare client")
        finally:
            proc.kill()
    c, w = statistics.median(cold), statistics.median(warm)
    print(f"median cold {c:.2f} s -> {args.n / c / limit:.2f} x limit (goal >= 0.8); "
          f"median warm {w:.2f} s for {args.n} judged answers (goal < 5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
