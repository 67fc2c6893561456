"""openai_vlm against a real loopback HTTP server process: answers, every injected fault,
retries, bounded concurrency, the API key's handling, the cache."""

from __future__ import annotations

import json
import logging
import pickle
import socket
import time

import httpx
import numpy as np
import pytest

import medimg_bench as mb
from medimg_bench.models.vlm.base import GenerationRequest, GenerationSettings
from medimg_bench.models.vlm.cache import ResponseCache
from medimg_bench.models.vlm.openai import OpenAIVLMAdapter


def _img(seed=0, shape=(12, 10, 3)):
    return np.random.default_rng(seed).integers(0, 255, shape, dtype=np.uint8)


def _adapter(url, **kw):
    opts = {"model": "loopback", "base_url": url, "api_key_env": None, "cache": False,
            "backoff_base": 0.01, "backoff_max": 0.05, "max_retries": 3, "timeout": 10.0, **kw}
    return OpenAIVLMAdapter(**opts)


def _req(text, n_images=1, sid="", **kw):
    return GenerationRequest(images=[_img(i) for i in range(n_images)], user=text, sample_id=sid, **kw)


def _stats(url):
    return httpx.get(url.rsplit("/v1", 1)[0] + "/v1/stats").json()


def test_answers_in_order_with_images_placed(chat_server):
    a = _adapter(chat_server)
    out = a.generate([
        _req("what is shown?"),
        _req("compare <image> with <image>", n_images=2),
        GenerationRequest(images=[_img(0, (16, 16)), _img(1, (3, 8, 8)), _img(2, (9, 9, 1))],
                          user="five frames: <image> then", system="You are a radiologist."),
        _req("no image here", n_images=0),
    ])
    assert [r.error for r in out] == [None] * 4
    assert out[0].text == "echo: what is shown? | images=1"
    assert out[1].text == "echo: compare  with  | images=2"
    assert out[2].text == "echo: five frames:  then | images=3"
    assert out[3].text == "echo: no image here | images=0"
    assert out[0].finish_reason == "stop" and out[0].tokens_out == 6 and out[0].latency_s > 0
    assert json.loads(out[2].prompt)["system"] == "You are a radiologist."


def test_python_api_create_model(chat_server):
    a = mb.create_model("openai_vlm", base_url=chat_server, model="loopback", api_key_env="none",
                        cache=False)
    assert a.generate([_req("hi")])[0].text == "echo: hi | images=1"
    assert a.settings == GenerationSettings()


@pytest.mark.parametrize("fault, attempts", [("[[429x2]]", 3), ("[[500x1]]", 2), ("[[dropx1]]", 2)])
def test_transient_faults_are_retried(chat_server, fault, attempts):
    a = _adapter(chat_server)
    out = a.generate([_req(f"retry me {fault}")])[0]
    assert out.error is None and out.text.startswith("echo: retry me")
    assert a.calls == attempts


def test_server_failing_after_retries_names_url_and_status(chat_server):
    a = _adapter(chat_server, max_retries=2)
    out = a.generate([_req("always broken [[500always]]", sid="s7")])[0]
    assert out.text == "" and a.calls == 3
    assert chat_server + "/chat/completions" in out.error
    assert "HTTP 500" in out.error and "3 attempts" in out.error and "s7" in out.error


def test_client_error_is_not_retried(chat_server):
    a = _adapter(chat_server)
    out = a.generate([_req("bad [[400]]")])[0]
    assert a.calls == 1 and "HTTP 400" in out.error and chat_server in out.error


def test_slow_response_times_out_then_retries(chat_server):
    a = _adapter(chat_server, timeout=0.3)
    out = a.generate([_req("slow once [[slowx1=1.0]]")])[0]
    assert out.error is None and a.calls == 2
    b = _adapter(chat_server, timeout=0.3, max_retries=0)
    out = b.generate([_req("slow again [[slowx5=1.0]]")])[0]
    assert "timed out after 0.3 s" in out.error and chat_server in out.error


@pytest.mark.parametrize("fault, expect", [("[[malformed]]", "malformed JSON"),
                                           ("[[noshape]]", "unexpected response")])
def test_bad_bodies_become_error_responses(chat_server, fault, expect):
    a = _adapter(chat_server)
    out = a.generate([_req(f"broken {fault}"), _req("fine")])
    assert expect in out[0].error and "HTTP 200" in out[0].error and chat_server in out[0].error
    assert out[1].error is None and out[1].text == "echo: fine | images=1"


@pytest.mark.parametrize("fault, expect", [
    ("[[empty]]", "the answer is empty"), ("[[blank]]", "the answer is empty"), ("[[zwsp]]", "the answer is empty"),
    ("[[null]]", "the answer is null"), ("[[object]]", "content is a JSON dict, not text"),
    ("[[number]]", "content is a JSON int, not text"), ("[[imgparts]]", "the answer is empty"),
])
def test_empty_or_non_text_answer_is_an_error_never_cached(chat_server, tmp_path, fault, expect):
    """Issue #19 item 9: an empty answer from an HTTP 200 was scored and cached; an object was
    accepted through str()."""
    a = _adapter(chat_server, cache=True, cache_path=str(tmp_path / "r.sqlite"))
    out = a.generate([_req(f"say nothing {fault}", sid="s9")])[0]
    assert out.text == "" and expect in out.error and "sample s9" in out.error and "HTTP 200" in out.error
    assert len(a.cache) == 0  # not cached: a re-run asks again
    b = _adapter(chat_server, cache=True, cache_path=str(tmp_path / "r.sqlite"))
    b.generate([_req(f"say nothing {fault}", sid="s9")])
    assert b.calls == 1


def test_text_parts_are_joined(chat_server):
    out = _adapter(chat_server).generate([_req("in parts [[parts]]")])[0]
    assert out.error is None and out.text == "echo: in parts [[parts]] | images=1"


def test_unreachable_server_names_the_url(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    a = _adapter(url, max_retries=1)
    out = a.generate([_req("anyone?")])[0]
    assert f"{url}/chat/completions failed after 2 attempts" in out.error
    assert "connection error" in out.error


def test_bounded_concurrency(chat_server):
    deadline = time.time() + 10
    while _stats(chat_server)["in_flight"] and time.time() < deadline:  # earlier timed-out calls
        time.sleep(0.05)
    httpx.post(chat_server.rsplit("/v1", 1)[0] + "/reset")
    a = _adapter(chat_server, max_concurrency=4)
    out = a.generate([_req(f"parallel {i} [[slowx1=0.15]]") for i in range(16)])
    assert all(r.error is None for r in out)
    peak = _stats(chat_server)["max_in_flight"]
    assert 2 <= peak <= 4


def test_bad_request_fails_alone(chat_server):
    a = _adapter(chat_server)
    out = a.generate([
        GenerationRequest(images=[np.zeros((2, 2, 2, 2), np.uint8)], user="x", sample_id="bad1"),
        _req("two placeholders <image> <image> for one image", sid="bad2"),
        _req("fine"),
        _req("choose", options=["yes", "no"], sid="mc"),
    ])
    assert "bad1" in out[0].error and "shape" in out[0].error
    assert "bad2" in out[1].error and "placeholders" in out[1].error
    assert out[2].error is None
    assert "option likelihoods" in out[3].error
    assert a.calls == 1


def test_missing_api_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("MB_NO_SUCH_KEY_VAR", raising=False)
    for remote in ("https://api.openai.com/v1", "http://10.1.2.3:8000/v1", "http://gpu-node:8000/v1"):
        with pytest.raises(ValueError, match="MB_NO_SUCH_KEY_VAR"):
            OpenAIVLMAdapter(model="m", base_url=remote, api_key_env="MB_NO_SUCH_KEY_VAR")
    # a server on this machine (the README's vLLM line): no key set, none sent, no error
    for local in ("http://127.0.0.1:1/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1"):
        a = OpenAIVLMAdapter(model="m", base_url=local, api_key_env="MB_NO_SUCH_KEY_VAR", cache=False)
        assert a._headers().get("Authorization") is None
    with pytest.raises(ValueError, match="model.options.model"):
        OpenAIVLMAdapter(base_url="http://127.0.0.1:1/v1", api_key_env=None)


def test_api_key_is_sent_but_never_stored_or_logged(keyed_server, tmp_path, monkeypatch, caplog):
    url, key = keyed_server
    monkeypatch.setenv("MB_TEST_KEY_VAR", key)
    caplog.set_level(logging.DEBUG)
    cache_path = tmp_path / "r.sqlite"
    a = _adapter(url, api_key_env="MB_TEST_KEY_VAR", cache=True, cache_path=str(cache_path))
    out = a.generate([_req("with key"), _req("limited [[429x1]]"), _req("rejected [[400]]")])
    assert out[0].text == "echo: with key | images=1" and out[1].error is None
    assert "HTTP 400" in out[2].error
    assert _stats(url)["unauthorised"] == 0
    a.cache.close()
    leaks = {
        "repr": repr(a), "fingerprint": json.dumps(a.fingerprint()), "logs": caplog.text,
        "responses": json.dumps([r.to_dict() for r in out]), "pickle": pickle.dumps(a).hex(),
        "vars": repr(vars(a)),
    }
    for suffix in ("", "-wal", "-shm"):
        p = tmp_path / f"r.sqlite{suffix}"
        if p.exists():
            leaks[p.name] = p.read_bytes().decode("latin-1")
    assert "retrying" in caplog.text  # the 429 was logged ...
    for where, text in leaks.items():
        assert key not in text, f"API key leaked into {where}"  # ... without the key
    b = _adapter(url, api_key_env=None)
    out = b.generate([_req("no key")])[0]
    assert "HTTP 401" in out.error and b.calls == 1
    assert "the server wants an API key and none was sent" in out.error  # what to do, on the line
    monkeypatch.delenv("MB_UNSET_KEY_VAR", raising=False)  # the default's case on a loopback server
    c = _adapter(url, api_key_env="MB_UNSET_KEY_VAR")
    assert "model.options.api_key_env" in c.generate([_req("unset")])[0].error


def test_cached_rerun_makes_no_http_call(chat_server, tmp_path):
    a = _adapter(chat_server, cache=True, cache_path=str(tmp_path / "r.sqlite"))
    reqs = [_req(f"cache me {i}", sid=str(i)) for i in range(10)] + [_req("x [[500always]]")]
    first = a.generate(reqs)
    calls = a.calls
    b = _adapter(chat_server, cache=True, cache_path=str(tmp_path / "r.sqlite"))
    second = b.generate(reqs[:10])
    # no request is sent again; one one-token probe asks the server what it is now
    assert b.calls == 0 and b.probes == 1 and [r.text for r in second] == [r.text for r in first[:10]]
    again = b.generate(reqs[10:])  # the failure was not cached: asked again
    assert b.calls == calls - 10 and again[0].error
    other = _adapter(chat_server, cache=True, cache_path=str(tmp_path / "r.sqlite"), model="m2")
    other.generate(reqs[:2])
    assert other.calls == 2  # another model never gets these answers
    assert isinstance(a.cache, ResponseCache)


def test_nondeterministic_requests_reach_the_server(chat_server, tmp_path):
    hot = GenerationSettings(temperature=0.8, seed=None)
    a = _adapter(chat_server, cache=True, cache_path=str(tmp_path / "r.sqlite"))
    t1 = a.generate([_req("sample", settings=hot)])[0].text
    t2 = a.generate([_req("sample", settings=hot)])[0].text
    assert a.calls == 2 and t1 != t2


_KILLED_CLIENT = """
import sys
from medimg_bench.models.vlm.openai import OpenAIVLMAdapter
from tests.models.vlm.test_openai import _req
a = OpenAIVLMAdapter(model="loopback", base_url=sys.argv[1], api_key_env=None, max_concurrency=2,
                     cache_path=sys.argv[2])
a.generate([_req(f"resume {i}", sid=str(i)) for i in range(300)])
print("finished")
"""


def test_killed_client_resumes_without_asking_again(tmp_path):
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    from pathlib import Path

    from tests.models.vlm._helpers import start_chat_server

    def rows():
        if not path.exists():
            return 0
        conn = sqlite3.connect(str(path), timeout=30)
        try:
            return conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        except sqlite3.OperationalError:
            return 0
        finally:
            conn.close()

    server, port = start_chat_server("--latency", "0.05")
    url = f"http://127.0.0.1:{port}/v1"
    path = tmp_path / "r.sqlite"
    try:
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_CLIENT, url, str(path)],
                                cwd=Path(__file__).resolve().parents[3], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while time.time() < deadline and rows() < 20:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert "finished" not in out, err
        saved = rows()
        assert 20 <= saved < 300
        a = _adapter(url, max_concurrency=8, cache=True, cache_path=str(path))
        resumed = a.generate([_req(f"resume {i}", sid=str(i)) for i in range(300)])
        assert a.calls == 300 - saved and sum(r.cached for r in resumed) == saved
        assert [r.text for r in resumed] == [f"echo: resume {i} | images=1" for i in range(300)]
    finally:
        server.kill()
        server.wait()


def test_generate_called_inside_a_running_event_loop(chat_server):
    import asyncio

    a = _adapter(chat_server)

    async def notebook_cell():
        return a.generate([_req("from a notebook")])

    out = asyncio.run(notebook_cell())
    assert out[0].text == "echo: from a notebook | images=1"
