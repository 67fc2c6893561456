"""Shared helpers of the VLM tests: a counting fake adapter and request builders."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from medimg_bench.models.vlm.base import (
    GenerationRequest,
    GenerationResponse,
    GenerativeAdapter,
)

HERE = Path(__file__).resolve().parent


class CountingAdapter(GenerativeAdapter):
    """Answers ``reply to <user>`` and counts every request it is asked; ``[[fail]]`` in the
    prompt gives an error response."""

    backend = "fake"

    def __init__(self, tag: str = "m1") -> None:
        super().__init__(name="fake")
        self.tag = tag
        self.calls = 0

    def identity(self):
        return {"model": f"fake-{self.tag}"}

    def _generate(self, requests):
        self.calls += len(requests)
        out = []
        for r in requests:
            if "[[fail]]" in r.user:
                out.append(GenerationResponse(prompt=r.rendered_prompt(), error="boom"))
            else:
                out.append(GenerationResponse(text=f"reply to {r.user} ({len(r.images)} images)",
                                              prompt=r.rendered_prompt(), tokens_out=3))
        return out


def make_requests(n: int, *, prefix: str = "q", images: int = 1, **kw) -> list[GenerationRequest]:
    rng = np.random.default_rng(0)
    return [GenerationRequest(images=[rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)
                                      for _ in range(images)],
                              user=f"{prefix} {i}?", sample_id=f"{prefix}{i}", **kw)
            for i in range(n)]


class SlowStreamingAdapter(CountingAdapter):
    """Like :class:`CountingAdapter` (same identity) but hands each response over after
    ``delay`` seconds, one by one, as a served model would."""

    def __init__(self, tag: str = "m1", delay: float = 0.02) -> None:
        super().__init__(tag)
        self.delay = delay

    def _generate_streaming(self, requests, on_response):
        import time

        out = []
        for i, r in enumerate(requests):
            time.sleep(self.delay)
            resp = self._generate([r])[0]
            on_response(i, resp)
            out.append(resp)
        return out


def start_chat_server(*args: str, env: dict | None = None):
    """Start chat_server.py; returns (process, port)."""
    proc = subprocess.Popen([sys.executable, str(HERE / "chat_server.py"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    deadline = time.time() + 30
    line = ""
    while time.time() < deadline:
        line = proc.stdout.readline()
        if line.startswith("PORT "):
            return proc, int(line.split()[1])
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError(f"chat server did not start: {line!r} {proc.stderr.read()}")
