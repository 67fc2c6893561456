"""Shared fixtures. Tests run in parallel (pytest-xdist, 2 workers on 2 cores): one torch thread
per worker avoids oversubscription."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real images); skips the test when it is absent."""
    if not (SHARED_DATA / "totalseg_ct").exists():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (a fresh clone has no ../shared)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-session folder for generated phantoms (never the user's cache)."""
    return tmp_path_factory.mktemp("synthetic")


@pytest.fixture(scope="module")
def chat_server():
    """Base URL (``http://127.0.0.1:PORT/v1``) of a loopback chat-completions server process."""
    from tests.models.vlm._helpers import start_chat_server

    proc, port = start_chat_server()
    yield f"http://127.0.0.1:{port}/v1"
    proc.kill()
    proc.wait()
