"""An ``openai_vlm`` run prints no httpx INFO line per request unless ``verbose=true``."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.models.vlm._helpers import start_chat_server


def _run(tmp_path, port, *extra):
    env = {**os.environ, "MEDIMG_BENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    args = ["run", f"output_dir={tmp_path}/runs", "task=vqa", "dataset=synthetic_vqa", "dataset.options.n=6",
            "dataset.options.size=16", "model=openai_vlm", "model.options.model=loopback",
            "model.options.api_key_env=null", f"model.options.base_url=http://127.0.0.1:{port}/v1",
            "model.options.cache=false", "progress=false", "bootstrap.n_resamples=5", *extra]
    return subprocess.run([sys.executable, "-m", "medimg_bench.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_requests_are_logged_only_when_verbose(tmp_path):
    proc, port = start_chat_server()
    try:
        quiet = _run(tmp_path / "q", port)
        loud = _run(tmp_path / "v", port, "verbose=true")
    finally:
        proc.kill()
        proc.wait()
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert loud.returncode == 0, loud.stderr[-2000:]
    assert "HTTP Request:" not in quiet.stdout + quiet.stderr
    assert "HTTP Request:" in loud.stdout + loud.stderr  # the switch does turn them on
