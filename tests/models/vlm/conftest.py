"""Fixtures for the VLM tests: a counting fake adapter, the tiny model (the loopback chat server
is in ``tests/conftest.py``: the VQA task tests use it too)."""

from __future__ import annotations

import os

import pytest

from tests.models.vlm._helpers import CountingAdapter, start_chat_server


@pytest.fixture
def counting_adapter():
    return CountingAdapter()




@pytest.fixture(scope="module")
def keyed_server():
    """A server that answers only requests carrying the key in $MB_TEST_SERVER_KEY."""
    key = "sk-test-" + os.urandom(8).hex()
    proc, port = start_chat_server("--require-key-env", "MB_TEST_SERVER_KEY",
                               env={"MB_TEST_SERVER_KEY": key})
    yield f"http://127.0.0.1:{port}/v1", key
    proc.kill()
    proc.wait()


@pytest.fixture(scope="session")
def tiny_vlm_path(tmp_path_factory):
    """The tiny random LLaVA, built once per test session."""
    from medimg_bench.models.vlm.tiny import tiny_vlm_dir

    return tiny_vlm_dir(root=tmp_path_factory.mktemp("tiny_vlm_root"))
