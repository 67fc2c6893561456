"""Served responses, generated: every way a 200 can carry no answer, a body can be too large, a
server can fail, or a server can be another model than the one that filled the cache. Each case
must end as an error response naming the sample — never an answer scored, never a row cached —
and, once the server is right again, the next run must ask again and score.

Through the engine (``test_engine_tags_and_counts``): such samples are tagged ``[predict]``, and
``summary.json`` / ``manifest.json`` count the answers served from the cache."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from medimg_bench.models.vlm.base import GenerationRequest
from medimg_bench.models.vlm.openai import OpenAIVLMAdapter

# (fault forced on every request, words the error must hold)
NO_ANSWER = [
    ("[[empty]]", "the answer is empty"), ("[[blank]]", "the answer is empty"),
    ("[[null]]", "the answer is null"), ("[[object]]", "content is a JSON dict"),
    ("[[number]]", "content is a JSON int"), ("[[imgparts]]", "the answer is empty"),
    ("[[malformed]]", "malformed JSON"), ("[[noshape]]", "unexpected response"),
]
TOO_LARGE = [("[[big=1500000]]", "max_response_bytes=1048576"),
             ("[[bigchunked=1500000]]", "max_response_bytes=1048576")]
FAILING = [("[[500always]]", "failed after 2 attempts"), ("[[400]]", "HTTP 400"),
           ("[[429x9]]", "failed after 2 attempts")]
CASES = NO_ANSWER + TOO_LARGE + FAILING
# what the server says about itself, changed between the run that filled the cache and this one
IDENTITY_CHANGES = [{"root": "/models/other"}, {"served": "loopback", "root": "/models/x"},
                    {"response_model": "loopback-v2"}, {"system_fingerprint": "fp_2"}]


def _admin(url, **identity):
    httpx.post(url.rsplit("/v1", 1)[0] + "/v1/admin", json=identity).raise_for_status()


@pytest.fixture
def server(chat_server):
    httpx.post(chat_server.rsplit("/v1", 1)[0] + "/v1/reset")
    yield chat_server
    httpx.post(chat_server.rsplit("/v1", 1)[0] + "/v1/reset")


def _adapter(url, tmp_path, **kw):
    return OpenAIVLMAdapter(model="loopback", base_url=url, api_key_env=None, cache_path=str(tmp_path / "r.sqlite"),
                            backoff_base=0.01, backoff_max=0.02, max_retries=1, timeout=10.0,
                            max_response_bytes=1 << 20, **kw)


def _reqs(n=4, tag="q"):
    rng = np.random.default_rng(0)
    return [GenerationRequest(images=[rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)],
                              user=f"{tag} {i}?", sample_id=f"{tag}{i}") for i in range(n)]


@pytest.mark.parametrize("fault, words", CASES, ids=[c[0].strip("[]") for c in CASES])
def test_bad_response_is_an_error_never_cached_and_asked_again(server, tmp_path, fault, words):
    _admin(server, force=fault)
    a = _adapter(server, tmp_path)
    out = a.generate(_reqs())
    assert all(r.error and words in r.error and f"sample q{i}" in r.error and r.text == ""
               for i, r in enumerate(out)), [r.error for r in out]
    assert len(a.cache) == 0
    _admin(server, force="")  # the server recovers
    b = _adapter(server, tmp_path)
    again = b.generate(_reqs())
    assert b.calls == 4 and all(r.error is None and r.text.startswith("echo:") for r in again)


@pytest.mark.parametrize("change", IDENTITY_CHANGES, ids=[next(iter(c)) + str(i) for i, c in enumerate(IDENTITY_CHANGES)])
def test_answers_of_another_server_identity_are_not_served(server, tmp_path, change):
    _adapter(server, tmp_path).generate(_reqs())
    _admin(server, **change)
    b = _adapter(server, tmp_path)
    out = b.generate(_reqs())
    assert b.cache.stale == 4 and b.cache.hits == 0 and not any(r.cached for r in out)


@pytest.mark.parametrize("fault", ["[[500always]]", "[[null]]", "[[malformed]]"])
def test_cached_answers_are_not_served_when_the_probe_fails(server, tmp_path, fault):
    _adapter(server, tmp_path).generate(_reqs())
    _admin(server, force=fault)  # the probe (a chat request) fails or says nothing usable
    b = _adapter(server, tmp_path)
    out = b.generate(_reqs())
    if fault == "[[null]]":  # a null answer to the probe still names the model: answers served
        assert all(r.cached for r in out)
    else:
        assert all("cannot be checked against the server" in r.error for r in out)


def test_engine_tags_and_counts(server, tmp_path, monkeypatch):
    """Server errors fail their samples as [predict] (issue #19 item 15); the cache-hit count is
    in summary.json and manifest.json (item 2)."""
    import medimg_bench as mb

    monkeypatch.setenv("MEDIMG_BENCH_CACHE", str(tmp_path / "cache"))
    ds = mb.create_dataset("synthetic_vqa", split="test", n=3, size=16)
    n = len(ds)

    def run(name):
        # max_failure_rate=None: the failed runs are returned (not raised) to read their records
        res = mb.evaluate(_adapter(server, tmp_path), ds, task="vqa", batch_size=3, progress=False, n_resamples=10,
                          max_failure_rate=None)
        res.save(tmp_path / name, plots=False)
        return (json.loads((tmp_path / name / "summary.json").read_text()),
                json.loads((tmp_path / name / "manifest.json").read_text()), res)

    _admin(server, force="[[null]]")
    summary, _, res = run("down")
    errors = res.samples.loc[res.samples["status"] == "failed", "error"].tolist()
    assert summary["n_failed"] == n and all(e.startswith("[predict]") and "the answer is null" in e for e in errors)
    _admin(server, force="[[500always]]")
    errors = run("broken")[2].samples["error"].dropna().tolist()
    assert len(errors) == n and all(e.startswith("[predict]") and "HTTP 500" in e for e in errors)
    _admin(server, force="")
    summary, manifest, _ = run("live")
    assert summary["n_failed"] == 0 and summary["n_cached_answers"] == 0 and summary["n_answers"] == n
    summary, manifest, _ = run("cached")
    assert summary["n_cached_answers"] == manifest["n_cached_answers"] == n and summary["n_live_answers"] == 0
