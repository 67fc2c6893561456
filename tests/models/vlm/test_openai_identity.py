"""openai_vlm: what the server says about itself is recorded and compared (issue #19 item 2),
response bodies are bounded (item 17), credentials in the URL or ``extra_body`` never leave the
request (items 10, 11)."""

from __future__ import annotations

import json
import pickle
import socket

import httpx
import numpy as np
import pytest

from medimg_bench.models.vlm.base import GenerationRequest
from medimg_bench.models.vlm.openai import OpenAIVLMAdapter


def _admin(url, **identity):
    httpx.post(url.rsplit("/v1", 1)[0] + "/v1/admin", json=identity).raise_for_status()


@pytest.fixture
def server(chat_server):
    yield chat_server
    httpx.post(chat_server.rsplit("/v1", 1)[0] + "/v1/reset")


def _adapter(url, tmp_path=None, **kw):
    opts = {"model": "loopback", "base_url": url, "api_key_env": None, "cache": tmp_path is not None,
            "cache_path": str(tmp_path / "r.sqlite") if tmp_path is not None else None,
            "backoff_base": 0.01, "backoff_max": 0.02, "max_retries": 1, "timeout": 10.0, **kw}
    return OpenAIVLMAdapter(**opts)


def _reqs(n=6, prefix="q"):
    rng = np.random.default_rng(0)
    return [GenerationRequest(images=[rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)],
                              user=f"{prefix} {i}?", sample_id=f"{prefix}{i}") for i in range(n)]


def test_models_entry_is_in_the_fingerprint_and_every_answer(server):
    a = _adapter(server)
    fp = a.fingerprint()
    assert fp["server"] == {"id": "loopback", "root": "/models/loopback-a", "owned_by": "loopback",
                            "max_model_len": 4096}  # vLLM's `created` changes per call: left out
    out = a.generate(_reqs(1))[0]
    assert out.served_by == {"models": fp["server"], "model": "loopback", "system_fingerprint": None}
    assert "server" not in _adapter(server, verify_server=False).fingerprint()


@pytest.mark.parametrize("change", [{"root": "/models/other-weights"},  # vLLM --served-model-name
                                    {"response_model": "loopback-2025-01-01"},  # alias moved
                                    {"system_fingerprint": "fp_new"}])
def test_another_model_behind_the_same_name_is_not_served_from_the_cache(server, tmp_path, change):
    """Issue #19 item 2: 56 of 56 stale answers were served."""
    reqs = _reqs()
    first = _adapter(server, tmp_path)
    first.generate(reqs)
    again = _adapter(server, tmp_path)
    again.generate(reqs)
    assert again.calls == 0 and again.cache.hits == len(reqs)  # same server: served
    _admin(server, **change)
    changed = _adapter(server, tmp_path)
    out = changed.generate(reqs)
    assert changed.calls == len(reqs) and changed.cache.stale == len(reqs) and changed.cache.hits == 0
    assert not any(r.cached for r in out)
    after = _adapter(server, tmp_path)  # the new answers replaced the old ones
    after.generate(reqs)
    assert after.calls == 0 and after.cache.hits == len(reqs)


def test_a_resumed_run_against_another_model_is_refused(server, tmp_path):
    from medimg_bench.engine.checkpoint import key_differences

    before = _adapter(server).fingerprint()
    _admin(server, root="/models/other-weights")
    diffs = key_differences({"model": before}, {"model": _adapter(server).fingerprint()})
    assert diffs == ["model.server.root: saved '/models/loopback-a', now '/models/other-weights'"]


def test_server_down_cached_answers_fail_unless_verification_is_off(server, tmp_path):
    reqs = _reqs(3)
    _adapter(server, tmp_path).generate(reqs)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    strict = _adapter(down, tmp_path)
    assert strict.cache_identity() != _adapter(server, tmp_path).cache_identity()  # another URL
    # the same URL, with the server gone: the stored answers cannot be checked
    moved = _adapter(server, tmp_path)
    moved._base = type(moved._base)(down)
    out = moved.generate(reqs)
    assert all("cannot be checked against the server" in r.error and "verify_server=false" in r.error
               for r in out)
    loose = _adapter(server, tmp_path, verify_server=False)
    loose._base = type(loose._base)(down)
    out = loose.generate(reqs)
    assert [r.error for r in out] == [None] * 3 and all(r.cached for r in out) and loose.calls == 0


def test_models_endpoint_absent_is_recorded(server):
    _admin(server, models_status=404)
    a = _adapter(server)
    assert a.fingerprint()["server"] == {"models_endpoint": "HTTP 404"}
    assert a.generate(_reqs(1))[0].error is None


@pytest.mark.parametrize("fault", ["big", "bigchunked"])
def test_body_over_the_bound_fails_its_sample(server, tmp_path, fault):
    """Issue #19 item 17: 5 MB bodies were read whole, kept and cached."""
    a = _adapter(server, tmp_path, max_response_bytes=1 << 20)
    out = a.generate([GenerationRequest(images=[], user=f"long [[{fault}=3000000]]", sample_id="s17"),
                      GenerationRequest(images=[], user="short", sample_id="ok")])
    assert "max_response_bytes=1048576" in out[0].error and "sample s17" in out[0].error
    assert ("Content-Length" in out[0].error) == (fault == "big")
    assert out[1].error is None and len(a.cache) == 1  # only the good answer is kept
    assert a.calls == 2  # not retried: the same body would come back
    b = _adapter(server, max_response_bytes=4 << 20)
    assert b.generate([GenerationRequest(images=[], user=f"long [[{fault}=3000000]]")])[0].error is None


def test_credentials_in_the_url_and_extra_body_stay_in_the_request(server, tmp_path, caplog):
    """Issue #19 items 10, 11: written to the manifest, the cache and the logs."""
    port = server.split(":")[2].split("/")[0]
    url = f"http://alice:pw-0123456789@127.0.0.1:{port}/v1"
    a = _adapter(url, tmp_path, extra_body={"api_key": "xb-secret-42", "access_token": "tok-9876543",
                                            "top_k": 1})
    assert a.base_url == f"http://***@127.0.0.1:{port}/v1"
    out = a.generate(_reqs(2) + [GenerationRequest(images=[], user="x [[500always]]", sample_id="bad")])
    assert out[0].error is None and "***@" in out[2].error
    ident = json.dumps(a.fingerprint())
    rows = json.dumps(list(a.cache.rows()), default=str)
    for secret in ("pw-0123456789", "alice", "xb-secret-42", "tok-9876543"):
        assert secret not in ident and secret not in rows and secret not in out[2].error
        assert secret not in caplog.text
    for f in tmp_path.glob("r.sqlite*"):  # the database and its WAL
        assert b"pw-0123456789" not in f.read_bytes() and b"xb-secret-42" not in f.read_bytes(), f
    assert a.fingerprint()["extra_body"] == {"access_token": "***", "api_key": "***", "top_k": 1}
    assert b"pw-0123456789" not in pickle.dumps(a)  # a copy in another process has no credentials
    plain = pickle.loads(pickle.dumps(_adapter(server)))  # ... and one without any still works
    assert plain.generate(_reqs(1))[0].error is None
