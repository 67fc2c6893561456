"""Fixtures for the VLM tests: a counting fake adapter, the loopback chat server, the tiny model."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.models.vlm._helpers import HERE, CountingAdapter


@pytest.fixture
def counting_adapter():
    return CountingAdapter()


def _start_server(*args: str, env: dict | None = None):
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


@pytest.fixture(scope="module")
def chat_server():
    """Base URL (``http://127.0.0.1:PORT/v1``) of a loopback chat-completions server process."""
    proc, port = _start_server()
    yield f"http://127.0.0.1:{port}/v1"
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def keyed_server():
    """A server that answers only requests carrying the key in $MB_TEST_SERVER_KEY."""
    key = "sk-test-" + os.urandom(8).hex()
    proc, port = _start_server("--require-key-env", "MB_TEST_SERVER_KEY",
                               env={"MB_TEST_SERVER_KEY": key})
    yield f"http://127.0.0.1:{port}/v1", key
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def tiny_vlm_path(tmp_path_factory):
    """The tiny random LLaVA, built once per test session."""
    from medimg_bench.models.vlm.tiny import tiny_vlm_dir

    return tiny_vlm_dir(root=tmp_path_factory.mktemp("tiny_vlm_root"))
