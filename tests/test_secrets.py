"""The redaction rules (medimg_bench/_secrets.py): by key name at any depth, by look whatever the
key, inside strings (overrides, URLs, JSON text, log lines)."""

from __future__ import annotations

import json
import logging

from medimg_bench._secrets import (
    SecretFilter,
    is_secret_key,
    looks_like_secret,
    redact_secrets,
    redact_text,
    redact_url,
    secret_values,
)

OPENAI = "sk-proj-" + "a1B2c3D4" * 4
HF = "hf_" + "Q" * 30


def test_key_names():
    for k in ("api_key", "OPENAI_API_KEY", "x-api-key", "hf_token", "access_token", "client_secret",
              "password", "db_passwd", "Authorization", "credentials", "private_key", "cookie"):
        assert is_secret_key(k), k
    for k in ("label_key", "api_key_env", "hf_token_env", "max_new_tokens", "tokenizer", "key", "monkey",
              "n_tokens"):
        assert not is_secret_key(k), k


def test_nested_keys_and_values_by_look():
    cfg = {"model": {"options": {"extra_body": {"api_key": "abcd1234", "access_token": "tok-5678",
                                                "top_k": 1, "nested": {"password": "pw-9999"}},
                                 "base_url": "http://alice:s3cr3t@host:8000/v1",
                                 "note": f"use {OPENAI}"}},
           "overrides": ["+model.options.api_key=sk-test-123", "seed=1"]}
    out = redact_secrets(cfg)
    body = out["model"]["options"]["extra_body"]
    assert body == {"api_key": "***", "access_token": "***", "top_k": 1, "nested": {"password": "***"}}
    assert out["model"]["options"]["base_url"] == "http://***@host:8000/v1"
    assert out["model"]["options"]["note"] == "use ***"
    assert out["overrides"] == ["+model.options.api_key=***", "seed=1"]
    text = json.dumps(out)
    for s in ("abcd1234", "tok-5678", "pw-9999", "s3cr3t", "alice", OPENAI, "sk-test-123"):
        assert s not in text, s


def test_strings():
    assert redact_url("https://u:p@example.org/v1?x=1") == "https://***@example.org/v1?x=1"
    assert redact_url("https://example.org/v1") == "https://example.org/v1"
    assert redact_text('{"api_key": "abc123", "top_k": 1}') == '{"api_key": "***", "top_k": 1}'
    assert redact_text("GET /v1?access_token=abc123&page=2") == "GET /v1?access_token=***&page=2"
    assert redact_text("headers: Authorization: Bearer abcdefgh123") .count("abcdefgh123") == 0
    assert redact_text(f"hub {HF} ok") == "hub *** ok"
    assert redact_text("max_new_tokens=5 tokenizer=x label_key=y") == "max_new_tokens=5 tokenizer=x label_key=y"
    assert looks_like_secret("http://a:b@h") and looks_like_secret(OPENAI) and not looks_like_secret("hello")
    vals = secret_values({}, ["+model.options.extra_body={api_key:abcd1234,top_k:1}",
                              "model.options.base_url=http://bob:pw12345@h/v1"])
    assert {"abcd1234", "pw12345"} <= vals


def test_log_filter_redacts_messages_and_arguments(caplog):
    log = logging.getLogger("medimg_bench.test_secrets")
    filt = SecretFilter({"plain-value-1"})
    caplog.handler.addFilter(filt)
    try:
        with caplog.at_level(logging.INFO):
            log.info("retry %s with key %s", "http://u:pw12@h/v1", "plain-value-1")
    finally:
        caplog.handler.removeFilter(filt)
    assert "pw12" not in caplog.text and "plain-value-1" not in caplog.text and "http://***@h/v1" in caplog.text
