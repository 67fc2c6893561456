"""``openai_vlm``: any OpenAI-compatible chat-completions server (vLLM, SGLang, Ollama, hosted APIs).

Requests go out concurrently over ``httpx`` (async), at most ``max_concurrency`` in flight. Images
are sent as base64 PNG data URLs in the user message, where the prompt's ``<image>`` placeholders
put them. 429, 5xx, timeouts and connection errors are retried ``max_retries`` times with
exponential backoff and jitter (a ``Retry-After`` header is honoured up to ``backoff_max``). What
still fails becomes a response with ``error`` naming the URL and the HTTP status; a malformed body
is an error response, never an exception.

A 200 whose answer is empty (``content: ""`` or ``null``) or not text (a JSON object or list
as ``content``) is an error response, never an answer: it is not scored and not cached, so a
re-run asks again. A body larger than ``max_response_bytes`` (default 4 MiB) fails its sample
while it is read; nothing beyond the bound is kept in memory.

What the server says about itself is recorded and compared: ``GET {base_url}/models`` once per
adapter (the served model's entry: ``id``, ``root``, ``parent``, ``owned_by``,
``max_model_len``) goes into the fingerprint (checkpoints, shard merges, the manifest), and
every answer carries ``served_by`` — that entry plus the response's ``model`` and
``system_fingerprint``. A cached answer is served again only when the server now reports the
same (see ``cache.py``); ``verify_server=false`` serves cached answers unchecked (and leaves the
server out of the fingerprint), for re-scoring with the server gone.

The API key is read from the environment variable named by ``api_key_env`` (``null`` for
servers that need none; when the variable is unset and ``base_url`` is on this machine —
localhost, 127.0.0.0/8, ::1 — no key is sent, as local vLLM / Ollama servers want; a 401 / 403
answer then says a key is wanted). It is sent in the ``Authorization`` header and nowhere else: not in
``repr``, ``identity`` (hence not in manifests or cache keys), the cache, or log messages.
Credentials in ``base_url`` (``http://user:pw@host/v1``) are used for the requests (HTTP basic
auth) and shown everywhere else as ``http://***@host/v1``; secret-named keys of ``extra_body``
are sent but appear as ``***`` in the identity, and their values are redacted from every error
message (a server that echoes the request body in a 401 included).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import io
import json
import logging
import os
import random
import time
from collections.abc import Sequence
from typing import Any

from medimg_bench._secrets import redact_text, redact_url
from medimg_bench.models.vlm.base import (
    IMAGE_TOKEN,
    GenerationRequest,
    GenerationResponse,
    GenerativeAdapter,
    OnResponse,
    none_if_null,
    served_key,
    settings_from_options,
    to_pil_rgb,
)
from medimg_bench.models.vlm.requests import is_blank
from medimg_bench.registry import register_model

__all__ = ["OpenAIVLMAdapter", "encode_image_data_url", "DEFAULT_MAX_RESPONSE_BYTES"]

log = logging.getLogger(__name__)

_INLINE_PIXELS = 256 * 256  # below this many pixels per request, encode on the loop thread
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def _is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (localhost, 127.0.0.0/8, ::1)."""
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
DEFAULT_MAX_RESPONSE_BYTES = 4 << 20
_ERROR_BODY_BYTES = 1 << 16  # what is kept of a non-200 body (for its message)
# the fields of a /v1/models entry that say which weights answer (vLLM's ``created`` is the
# time of the listing and changes on every call)
_MODEL_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len")


class _TooLarge(Exception):
    pass


async def _read_body(response: Any, limit: int, *, truncate: bool = False) -> bytes:
    """The body of a streamed ``httpx`` response, at most ``limit`` bytes: beyond it
    ``_TooLarge`` (or, with ``truncate``, the first ``limit`` bytes)."""
    declared = response.headers.get("content-length")
    if not truncate and declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge(f"Content-Length {int(declared)}")
    buf = bytearray()
    async for chunk in response.aiter_bytes():
        buf += chunk
        if len(buf) > limit:
            if truncate:
                return bytes(buf[:limit])
            raise _TooLarge(f"more than {limit} bytes received")
    return bytes(buf)


def _retry_after(headers: Any) -> float | None:
    try:
        ra = headers.get("retry-after")
        return float(ra) if ra is not None else None
    except ValueError:
        return None


def _content_text(message: Any) -> tuple[str | None, str | None]:
    """``(text, None)`` of a chat message's ``content``, or ``(None, why it is not an answer)``:
    null, empty, or not text (a JSON object, numbers, a list without text parts)."""
    if not isinstance(message, dict):
        return None, f"'message' is a JSON {type(message).__name__}, not an object"
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts
        if not all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content):
            return None, "content parts are not text parts"
        content = "".join(p.get("text", "") for p in content if p.get("type", "text") == "text")
    if content is None:
        extra = next((f" ({k}: {json.dumps(message[k])[:120]})" for k in ("refusal", "tool_calls")
                      if message.get(k)), "")
        return None, f"the answer is null (no content){extra}"
    if not isinstance(content, str):
        return None, f"content is a JSON {type(content).__name__}, not text: {json.dumps(content)[:120]}"
    if is_blank(content):  # zero-width characters (U+200B) included
        return None, "the answer is empty"
    return content, None


class _Secret:
    """Holds the API key; prints as ``***`` and does not pickle."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    def get(self) -> str | None:
        return self._value

    def __repr__(self) -> str:
        return "***" if self._value else "None"

    def __reduce__(self) -> Any:
        return (_Secret, (None,))


def _limited(chunks: Any, limit: int) -> Any:
    """Yield ``chunks`` (bytes) while their total stays within ``limit``; ``_TooLarge`` beyond."""
    n = 0
    for c in chunks:
        n += len(c)
        if n > limit:
            raise _TooLarge(f"more than {limit} bytes received")
        yield c


def _pixels(image: Any) -> int:
    if hasattr(image, "width") and hasattr(image, "height"):  # PIL
        return int(image.width) * int(image.height)
    return int(getattr(image, "size", 0) or 0)  # arrays: number of elements


def encode_image_data_url(image: Any, *, where: str = "") -> str:
    """A ``data:image/png;base64,...`` URL of ``image`` (PIL or array; see ``to_pil_rgb``)."""
    buf = io.BytesIO()
    to_pil_rgb(image, where=where).save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _user_content(request: GenerationRequest) -> list[dict[str, Any]]:
    return _content(request.user, request.images, request.sample_id or "?")


def chat_messages(request: GenerationRequest) -> list[dict[str, Any]]:
    """OpenAI-style chat messages of ``request``: system, the earlier turns of its ``history``
    (user content, assistant reply), then the user turn."""
    sid = request.sample_id or "?"
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for k, turn in enumerate(request.history or ()):
        messages.append({"role": "user", "content": _content(turn.user, turn.images, f"{sid} (turn {k})")})
        messages.append({"role": "assistant", "content": turn.reply})
    messages.append({"role": "user", "content": _user_content(request)})
    return messages


def _content(user: str, images: Any, sid: str) -> list[dict[str, Any]]:
    parts = user.split(IMAGE_TOKEN)
    n_placed = len(parts) - 1
    n = len(images)
    if n_placed > n:
        raise ValueError(f"sample {sid}: the prompt has {n_placed} {IMAGE_TOKEN} placeholders "
                         f"but the request has {n} images")
    urls = [encode_image_data_url(im, where=f"sample {sid}, image {i}")
            for i, im in enumerate(images)]
    content: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": u}}
                                     for u in urls[:n - n_placed]]
    placed = urls[n - n_placed:]
    for i, text in enumerate(parts):
        if text:
            content.append({"type": "text", "text": text})
        if i < n_placed:
            content.append({"type": "image_url", "image_url": {"url": placed[i]}})
    return content


def _fast_failed_sniffio_import() -> None:
    """httpcore tries ``import sniffio`` for every lock it makes; when sniffio is not installed
    each failed attempt searches ``sys.path`` again (~14 per request). Recording the absence in
    ``sys.modules`` makes the same ``ImportError`` immediate. Nothing changes when it is installed."""
    import importlib.util
    import sys

    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


@register_model("openai_vlm", tags=("generative", "vlm", "openai"))
class OpenAIVLMAdapter(GenerativeAdapter):
    """An OpenAI-compatible chat-completions endpoint.

    Args:
        model: the model name the server knows (``model`` field of the request).
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions`` is added).
        api_key_env: environment variable holding the key (``None`` or ``"none"``: send no key;
            on the command line write ``model.options.api_key_env=none``). Unset for a server on
            this machine (loopback ``base_url``): no key is sent; unset for any other: an error.
        max_concurrency: requests in flight at once.
        max_retries: retries after the first attempt on 429/5xx/timeouts/connection errors.
        timeout: seconds one attempt may take in all.
        backoff_base, backoff_max: the n-th retry waits ``min(backoff_max, backoff_base * 2**n)``
            seconds times a random factor in [0.5, 1].
        max_tokens_field: ``max_tokens`` or ``max_completion_tokens`` (newer hosted models).
        extra_body: more JSON fields for every request (e.g. ``{"top_k": 1}``).
        trust_env: let httpx read proxy settings from the environment.
        max_response_bytes: the largest response body accepted (bytes, after decompression);
            a larger one fails its sample as it is read.
        verify_server: record the server's ``/v1/models`` entry in the fingerprint and serve a
            cached answer only when the server reports what it reported when it answered.
        max_new_tokens, temperature, top_p, seed: default generation settings.
        cache, cache_path, cache_nondeterministic: the response cache.
    """

    backend = "openai"

    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        "api_key_env": "which variable holds the key: decides no answer",
        **{k: "how requests are sent (concurrency, retries, time limits, proxies): an answer is the "
              "server's whatever the schedule" for k in ("max_concurrency", "max_retries", "timeout",
                                                         "backoff_base", "backoff_max", "trust_env")},
        "max_response_bytes": "a larger response fails its sample; it never changes an answer",
        "verify_server": "whether the server is asked what it serves: its report (`server`) is compared on its own",
    }

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        max_retries: int = 5,
        timeout: float = 120.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_tokens_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
        trust_env: bool = True,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        verify_server: bool = True,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        cache: bool = True,
        cache_path: str | None = None,
        cache_nondeterministic: bool = False,
        name: str = "",
    ) -> None:
        super().__init__(name=name or "openai_vlm", settings=settings_from_options(
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed))
        if not model:
            raise ValueError("openai_vlm needs the served model's name: model.options.model=NAME")
        if not str(base_url).startswith(("http://", "https://")):
            raise ValueError(f"openai_vlm: base_url must start with http:// or https://, got {base_url!r}")
        if int(max_concurrency) < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if int(max_retries) < 0 or float(timeout) <= 0:
            raise ValueError(f"need max_retries >= 0 and timeout > 0, got {max_retries}, {timeout}")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(f"max_tokens_field must be max_tokens or max_completion_tokens, "
                             f"got {max_tokens_field!r}")
        if int(max_response_bytes) < 1024:
            raise ValueError(f"max_response_bytes must be >= 1024, got {max_response_bytes}")
        self.model = str(model)
        real = str(base_url).rstrip("/")
        self._base = _Secret(real)  # may hold user info: used for requests, never shown
        self.base_url = redact_url(real)
        self.url = self.base_url + "/chat/completions"
        self.max_response_bytes = int(max_response_bytes)
        self.verify_server = bool(verify_server)
        self._models: dict[str, Any] | None = None  # the server's /v1/models entry, once
        self._seen: set[str] = set()  # served_by of the answers received live
        if logging.getLogger("httpx").level == logging.NOTSET:  # not one INFO line per request
            logging.getLogger("httpx").setLevel(logging.WARNING)
        api_key_env = none_if_null(api_key_env)
        self.api_key_env = api_key_env
        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key and _is_loopback(real):  # a server on this machine (vLLM, Ollama…) rarely wants one
                log.info("openai_vlm: %s is not set; no API key is sent to %s (a server on this machine)",
                         api_key_env, self.base_url)
            elif not key:
                raise ValueError(
                    f"openai_vlm: the API key environment variable {api_key_env} is not set; "
                    f"export {api_key_env}=... or set model.options.api_key_env=null for a "
                    "server that needs no key")
        self._key = _Secret(key)
        self.max_concurrency = int(max_concurrency)
        self.max_retries = int(max_retries)
        self.timeout = float(timeout)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.trust_env = bool(trust_env)
        self.calls = 0  # HTTP attempts made by this object (retries included)
        self.probes = 0  # identity probes (see ``probe_served``)
        self.attach_cache(cache=cache, cache_path=cache_path,
                          cache_nondeterministic=cache_nondeterministic)

    @property
    def verifies_served(self) -> bool:  # type: ignore[override]
        return self.verify_server

    def identity(self) -> dict[str, Any]:
        """The declared parameters (``base_url`` without user info, secret-named ``extra_body``
        keys as ``***``) and how images are sent."""
        ident = super().identity()
        ident["base_url"] = self.base_url  # user info taken out
        return {**ident, "image_format": "png"}

    def server_identity(self) -> dict[str, Any] | None:
        """The server's ``/v1/models`` entry for this model (fetched once), or ``None`` with
        ``verify_server=false``."""
        return self._models_entry() if self.verify_server else None

    def served_identities(self) -> set[str]:
        return set(self._seen)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._key.get():
            headers["Authorization"] = f"Bearer {self._key.get()}"
        return headers

    def _models_entry(self) -> dict[str, Any]:
        if self._models is None:
            self._models = self._fetch_models()
        return self._models

    def _fetch_models(self) -> dict[str, Any]:
        """``GET {base_url}/models``: the entry of ``self.model`` reduced to the fields that name
        the weights; ``{"models_endpoint": why}`` when the list cannot be had,
        ``{"listed": False, ...}`` when the model is not in it."""
        status, raw, problem = self._sync_request("GET", "/models")
        if status != 200:
            if status is None:
                log.warning("%s/models: %s; the server's identity is unknown", self.base_url, problem)
            return {"models_endpoint": problem}
        try:
            listed = [m for m in json.loads(raw)["data"] if isinstance(m, dict)]
        except (ValueError, KeyError, TypeError) as exc:
            return {"models_endpoint": f"unexpected body ({type(exc).__name__})"}
        entry = next((m for m in listed if m.get("id") == self.model), None)
        if entry is None:
            return {"listed": False, "served": sorted(str(m.get("id")) for m in listed)[:20]}
        return {k: entry[k] for k in _MODEL_FIELDS if entry.get(k) is not None}

    def probe_served(self) -> str | None:
        """One minimal request (``ping``, one token, no image) to learn what the server reports
        about itself now (``served_by``); returns why it failed, or None."""
        self.probes += 1
        self._models_entry()
        body = {"model": self.model, "messages": [{"role": "user", "content": "ping"}],
                self.max_tokens_field: 1, "temperature": 0.0, **self.extra_body}
        status, raw, problem = self._sync_request("POST", "/chat/completions", body)
        if status != 200:
            return f"{self.url}: {problem}"
        try:
            data = json.loads(raw)
            served = {"models": self._models, "model": data.get("model"),
                      "system_fingerprint": data.get("system_fingerprint")}
        except (ValueError, AttributeError) as exc:
            return f"{self.url}: unexpected body ({type(exc).__name__})"
        self._seen.add(served_key(served))
        return None

    def _sync_request(self, method: str, path: str, body: dict[str, Any] | None = None
                      ) -> tuple[int | None, bytes, str]:
        """``(status, body, problem)`` of one request to ``base_url + path``, retried like a chat
        request on connection errors, timeouts, 429 and 5xx; the body bounded like answers."""
        import httpx

        status: int | None = None
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))
            try:
                with httpx.Client(timeout=self.timeout, trust_env=self.trust_env) as client, \
                        client.stream(method, self._base.get() + path, headers=self._headers(),
                                      content=None if body is None else json.dumps(body).encode()) as r:
                    status = r.status_code
                    raw = b"".join(_limited(r.iter_bytes(), self.max_response_bytes))
            except (httpx.HTTPError, _TooLarge) as exc:
                status, problem = None, self._redact(f"{type(exc).__name__}: {exc}")
                continue
            if status == 200:
                return 200, raw, ""
            problem = f"HTTP {status}"
            if status not in _RETRY_STATUS and status < 500:
                break
        return status, b"", problem or "no answer"

    def _key_hint(self) -> str:
        """What to do about a 401 / 403: which key was (not) sent."""
        if not self._key.get():
            return ("the server wants an API key and none was sent: export it in a variable and set "
                    "model.options.api_key_env=THAT_VARIABLE")
        return f"the server refused the key in {self.api_key_env}"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_key"] = _Secret(None)  # a copy in another process reads the variable again
        state["_base"] = _Secret(None)  # credentials in the URL stay in this process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._base = _Secret(self.base_url)  # the shown URL: without its credentials, if it had any
        if self.api_key_env:
            self._key = _Secret(os.environ.get(self.api_key_env))

    # -- one request ------------------------------------------------------------------------------
    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        s = request.settings
        body: dict[str, Any] = {"model": self.model, "messages": chat_messages(request),
                                self.max_tokens_field: s.max_new_tokens,
                                "temperature": s.temperature, "top_p": s.top_p}
        if s.seed is not None:
            body["seed"] = s.seed
        body.update(self.extra_body)
        return body

    def _redact(self, text: str) -> str:
        """``text`` without the key, the URL's credentials or anything that looks like one."""
        key = {self._key.get()} if self._key.get() else set()
        return redact_text(text, key | self.option_secrets())  # user info: by look

    def _snippet(self, raw: bytes | str, n: int) -> str:
        """The first ``n`` characters of a server's text, redacted before it is cut (a secret
        the cut splits would no longer match its value)."""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        return self._redact(text)[:n]

    def _parse(self, raw: bytes, status: int, prompt: str, latency: float, sid: str = "?") -> GenerationResponse:
        where = f"sample {sid}: {self.url} (HTTP {status})"
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            snippet = self._snippet(raw, 200)
            return GenerationResponse(prompt=prompt, latency_s=latency,
                                      error=self._redact(f"{where}: malformed JSON ({exc}): {snippet!r}"))
        try:
            if isinstance(data, dict) and data.get("error") and not data.get("choices"):
                raise ValueError(f"server error: {self._snippet(json.dumps(data['error']), 300)}")
            choice = data["choices"][0]
            text, problem = _content_text(choice["message"])
            if problem is not None:  # never an answer: not scored, not cached, asked again next run
                return GenerationResponse(prompt=prompt, latency_s=latency, error=self._redact(
                    f"{where}: {problem}; finish_reason {choice.get('finish_reason')!r}"))
            usage = data.get("usage") or {}
            served = {"models": self._models, "model": data.get("model"),
                      "system_fingerprint": data.get("system_fingerprint")}
            self._seen.add(served_key(served))
            return GenerationResponse(
                text=text.strip(), prompt=prompt, latency_s=latency,  # type: ignore[union-attr]
                tokens_in=usage.get("prompt_tokens"), tokens_out=usage.get("completion_tokens"),
                finish_reason=choice.get("finish_reason"), served_by=served)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            return GenerationResponse(prompt=prompt, latency_s=latency, error=self._redact(
                f"{where}: unexpected response ({type(exc).__name__}: {exc}): "
                f"{self._snippet(json.dumps(data), 200) if not isinstance(data, bytes) else ''}"))

    async def _one(self, client: Any, request: GenerationRequest) -> GenerationResponse:
        prompt = request.rendered_prompt()
        sid = request.sample_id or "?"
        if request.options is not None:
            return GenerationResponse(prompt=prompt, error=(
                f"sample {sid}: openai_vlm cannot score option likelihoods (the API returns no "
                "prompt log-probabilities); use hf_vlm or free generation"))
        try:  # PNG encoding of large pictures goes to a thread (zlib releases the GIL)
            big = sum(_pixels(im) for im in request.all_images()) > _INLINE_PIXELS
            body = await asyncio.to_thread(self._payload, request) if big else self._payload(request)
        except Exception as exc:  # unreadable image, bad placeholder count
            return GenerationResponse(prompt=prompt, error=str(exc))
        content = json.dumps(body).encode()
        headers = self._headers()
        attempt = 0
        while True:
            t0 = time.perf_counter()
            self.calls += 1
            status, raw, retry_after, problem = await self._attempt(client, content, headers)
            latency = time.perf_counter() - t0
            if status == 200 and problem is None:
                return self._parse(raw, 200, prompt, latency, sid)
            if status == 200 or (status is not None and status not in _RETRY_STATUS and status < 500):
                problem = problem or f"HTTP {status}: {self._snippet(raw, 200)!r}"
                if status in (401, 403):
                    problem += f" — {self._key_hint()}"
                return GenerationResponse(prompt=prompt, latency_s=latency, error=self._redact(
                    f"sample {sid}: {self.url} returned {problem}"))
            problem = problem or f"HTTP {status}: {self._snippet(raw, 200)!r}"
            if attempt >= self.max_retries:
                return GenerationResponse(prompt=prompt, latency_s=latency, error=self._redact(
                    f"sample {sid}: {self.url} failed after {attempt + 1} attempts; last: {problem}"))
            delay = min(self.backoff_max, self.backoff_base * 2 ** attempt) * (0.5 + random.random() / 2)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_max))
            log.info("%s: %s (sample %s, attempt %d of %d); retrying in %.2f s", self.url,
                     self._redact(problem), sid, attempt + 1, self.max_retries + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1

    async def _attempt(self, client: Any, content: bytes, headers: dict[str, str]
                       ) -> tuple[int | None, bytes, float | None, str | None]:
        """One POST: ``(status, body, Retry-After, problem)``; the body of a 200 is read up to
        ``max_response_bytes`` (beyond it: status 200 with a problem, not retried), an error
        body up to 64 KiB; ``status`` is None for a timeout or a connection error."""
        import httpx

        async def post() -> tuple[int | None, bytes, float | None, str | None]:
            async with client.stream("POST", self._base.get() + "/chat/completions", content=content,
                                     headers=headers) as r:
                if r.status_code != 200:
                    raw = await _read_body(r, _ERROR_BODY_BYTES, truncate=True)
                    return r.status_code, raw, _retry_after(r.headers), None
                try:
                    return 200, await _read_body(r, self.max_response_bytes), None, None
                except _TooLarge as exc:
                    return 200, b"", None, (
                        f"a response body over max_response_bytes={self.max_response_bytes} ({exc}); "
                        "the sample fails (raise model.options.max_response_bytes if answers are "
                        "really that long)")

        try:
            return await asyncio.wait_for(post(), timeout=self.timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            return None, b"", None, f"timed out after {self.timeout:g} s"
        except httpx.HTTPError as exc:  # connection refused/reset, protocol errors
            return None, b"", None, f"connection error ({type(exc).__name__}: {exc})"

    async def _run(self, requests: list[GenerationRequest], on_response: OnResponse) -> list[GenerationResponse]:
        import httpx

        _fast_failed_sniffio_import()
        out: list[GenerationResponse | None] = [None] * len(requests)
        todo = iter(range(len(requests)))  # shared by the workers; next() never interleaves
        timeout = httpx.Timeout(self.timeout, pool=None)
        # one TLS context for all workers (loading the CA bundle costs ~30 ms per client)
        ssl_context = httpx.create_ssl_context(trust_env=self.trust_env)

        async def worker() -> None:
            # one client with one connection per worker: httpx's pool scans every connection for
            # every request, which costs more CPU than the request itself at 32 in flight
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            async with httpx.AsyncClient(limits=limits, timeout=timeout, verify=ssl_context,
                                         trust_env=self.trust_env) as client:
                for i in todo:
                    try:
                        resp = await self._one(client, requests[i])
                    except Exception as exc:  # anything unforeseen fails this request alone
                        resp = GenerationResponse(prompt=requests[i].rendered_prompt(), error=self._redact(
                            f"sample {requests[i].sample_id or '?'}: {self.url}: "
                            f"{type(exc).__name__}: {exc}"))
                    out[i] = resp
                    on_response(i, resp)

        await asyncio.gather(*(worker() for _ in range(min(self.max_concurrency, len(requests)))))
        return out  # type: ignore[return-value]

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:
        return self._generate_streaming(requests, lambda i, r: None)

    def _generate_streaming(
        self, requests: Sequence[GenerationRequest], on_response: OnResponse
    ) -> list[GenerationResponse]:
        requests = list(requests)
        if not requests:
            return []
        self._models_entry()  # once: every answer records the server's entry
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the usual case
            return asyncio.run(self._run(requests, on_response))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside a loop (Jupyter)
            return pool.submit(asyncio.run, self._run(requests, on_response)).result()
