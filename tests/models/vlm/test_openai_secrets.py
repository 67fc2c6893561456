"""A server that echoes the request body in its 401 (issue #35 item 6): the values of
secret-named ``extra_body`` keys never reach a recorded error — the response, samples.parquet,
the checkpoint, summary.json, report.html or the log."""

from __future__ import annotations

import json
import logging

import httpx
import pandas as pd
import pytest

import medimg_bench as mb
from medimg_bench.engine.results import EvaluationFailed
from medimg_bench.models.vlm.base import GenerationRequest
from medimg_bench.models.vlm.openai import OpenAIVLMAdapter

SECRET = "cs-echoed-5550123"
TOKEN = "at-echoed-7770456"


def _adapter(url, **kw):
    return OpenAIVLMAdapter(model="loopback", base_url=url, api_key_env=None, cache=False, max_retries=0,
                            extra_body={"client_secret": SECRET, "auth": {"access_token": TOKEN}, "top_k": 1},
                            **kw)


def test_echoed_401_error_is_redacted_in_the_response(chat_server):
    out = _adapter(chat_server).generate([GenerationRequest(images=[], user="q [[401echo]]", sample_id="s1")])[0]
    assert "HTTP 401" in out.error and "client_secret" in out.error  # the echo reached the message ...
    assert SECRET not in out.error and TOKEN not in out.error  # ... without the secrets
    assert "***" in out.error


def _files_text(root) -> dict[str, str]:
    import torch

    texts = {}
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        if p.suffix == ".parquet":
            texts[str(p)] = pd.read_parquet(p).to_csv()
        elif p.suffix == ".pt":
            texts[str(p)] = json.dumps(torch.load(p, weights_only=True), default=str)
        elif p.suffix == ".safetensors":
            from safetensors.torch import load_file

            texts[str(p)] = p.read_bytes().decode("latin-1") + repr(load_file(p))
        else:
            texts[str(p)] = p.read_bytes().decode("latin-1")
    return texts


def test_echoed_secrets_reach_no_file_and_no_log(chat_server, tmp_path, caplog):
    httpx.post(chat_server.rsplit("/v1", 1)[0] + "/v1/admin", json={"force": "[[401echo]]"})
    try:
        ds = mb.create_dataset("synthetic_vqa", n=3, size=16)
        with caplog.at_level(logging.INFO):
            with pytest.raises(EvaluationFailed) as failed:  # every sample failed: the run says so
                mb.evaluate(_adapter(chat_server), ds, task="vqa", progress=False, n_resamples=5,
                            checkpoint=tmp_path / "ckpt", checkpoint_every=1)
            assert SECRET not in str(failed.value) and TOKEN not in str(failed.value)
            res = failed.value.results
            run = res.save(tmp_path / "run")
            from medimg_bench.report.page import write_report

            write_report(run)
    finally:
        httpx.post(chat_server.rsplit("/v1", 1)[0] + "/v1/reset")
    errors = [e for e in res.samples["error"] if isinstance(e, str)]
    assert len(errors) == len(res.samples) and all("HTTP 401" in e and "client_secret" in e for e in errors)
    texts = {**_files_text(tmp_path), "log": caplog.text}
    assert any(p.endswith("samples.parquet") for p in texts) and any(p.endswith("report.html") for p in texts)
    assert any("client_secret" in t for p, t in texts.items() if p.endswith("report.html"))  # the error is shown
    for where, text in texts.items():
        assert SECRET not in text and TOKEN not in text, f"an echoed secret in {where}"
