"""``openai_vlm``: any OpenAI-compatible chat-completions server (vLLM, SGLang, Ollama, hosted APIs).

Requests go out concurrently over ``httpx`` (async), at most ``max_concurrency`` in flight. Images
are sent as base64 PNG data URLs in the user message, where the prompt's ``<image>`` placeholders
put them. 429, 5xx, timeouts and connection errors are retried ``max_retries`` times with
exponential backoff and jitter (a ``Retry-After`` header is honoured up to ``backoff_max``). What
still fails becomes a response with ``error`` naming the URL and the HTTP status; a malformed body
is an error response, never an exception.

The API key is read from the environment variable named by ``api_key_env`` (``null`` for local
servers that need none). It is sent in the ``Authorization`` header and nowhere else: not in
``repr``, ``identity`` (hence not in manifests or cache keys), the cache, or log messages.
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

from medimg_bench.models.vlm.base import (
    IMAGE_TOKEN,
    GenerationRequest,
    GenerationResponse,
    GenerativeAdapter,
    OnResponse,
    none_if_null,
    settings_from_options,
    to_pil_rgb,
)
from medimg_bench.registry import register_model

__all__ = ["OpenAIVLMAdapter", "encode_image_data_url"]

log = logging.getLogger(__name__)

_INLINE_PIXELS = 256 * 256  # below this many pixels per request, encode on the loop thread
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


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
    parts = request.user.split(IMAGE_TOKEN)
    n_placed = len(parts) - 1
    n = len(request.images)
    sid = request.sample_id or "?"
    if n_placed > n:
        raise ValueError(f"sample {sid}: the prompt has {n_placed} {IMAGE_TOKEN} placeholders "
                         f"but the request has {n} images")
    urls = [encode_image_data_url(im, where=f"sample {sid}, image {i}")
            for i, im in enumerate(request.images)]
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
            on the command line write ``model.options.api_key_env=none``).
        max_concurrency: requests in flight at once.
        max_retries: retries after the first attempt on 429/5xx/timeouts/connection errors.
        timeout: seconds one attempt may take in all.
        backoff_base, backoff_max: the n-th retry waits ``min(backoff_max, backoff_base * 2**n)``
            seconds times a random factor in [0.5, 1].
        max_tokens_field: ``max_tokens`` or ``max_completion_tokens`` (newer hosted models).
        extra_body: more JSON fields for every request (e.g. ``{"top_k": 1}``).
        trust_env: let httpx read proxy settings from the environment.
        max_new_tokens, temperature, top_p, seed: default generation settings.
        cache, cache_path, cache_nondeterministic: the response cache.
    """

    backend = "openai"

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
        self.model = str(model)
        self.base_url = str(base_url).rstrip("/")
        self.url = self.base_url + "/chat/completions"
        api_key_env = none_if_null(api_key_env)
        self.api_key_env = api_key_env
        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
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
        self.attach_cache(cache=cache, cache_path=cache_path,
                          cache_nondeterministic=cache_nondeterministic)

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"model": self.model, "base_url": self.base_url, "image_format": "png"}
        if self.extra_body:
            ident["extra_body"] = json.dumps(self.extra_body, sort_keys=True, default=str)
        if self.max_tokens_field != "max_tokens":
            ident["max_tokens_field"] = self.max_tokens_field
        return ident

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_key"] = _Secret(None)  # a copy in another process reads the variable again
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.api_key_env:
            self._key = _Secret(os.environ.get(self.api_key_env))

    # -- one request ------------------------------------------------------------------------------
    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        s = request.settings
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": _user_content(request)})
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                self.max_tokens_field: s.max_new_tokens,
                                "temperature": s.temperature, "top_p": s.top_p}
        if s.seed is not None:
            body["seed"] = s.seed
        body.update(self.extra_body)
        return body

    def _redact(self, text: str) -> str:
        key = self._key.get()
        return text.replace(key, "***") if key else text

    def _parse(self, raw: bytes, status: int, prompt: str, latency: float) -> GenerationResponse:
        where = f"{self.url} (HTTP {status})"
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            snippet = raw[:200].decode("utf-8", "replace")
            return GenerationResponse(prompt=prompt, latency_s=latency,
                                      error=self._redact(f"{where}: malformed JSON ({exc}): {snippet!r}"))
        try:
            if isinstance(data, dict) and data.get("error") and not data.get("choices"):
                raise ValueError(f"server error: {json.dumps(data['error'])[:300]}")
            choice = data["choices"][0]
            content = choice["message"].get("content")
            if isinstance(content, list):  # some servers return content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            text = "" if content is None else str(content)
            usage = data.get("usage") or {}
            return GenerationResponse(
                text=text.strip(), prompt=prompt, latency_s=latency,
                tokens_in=usage.get("prompt_tokens"), tokens_out=usage.get("completion_tokens"),
                finish_reason=choice.get("finish_reason"))
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            return GenerationResponse(prompt=prompt, latency_s=latency, error=self._redact(
                f"{where}: unexpected response ({type(exc).__name__}: {exc}): "
                f"{json.dumps(data)[:200] if not isinstance(data, bytes) else ''}"))

    async def _one(self, client: Any, request: GenerationRequest) -> GenerationResponse:
        import httpx

        prompt = request.rendered_prompt()
        sid = request.sample_id or "?"
        if request.options is not None:
            return GenerationResponse(prompt=prompt, error=(
                f"sample {sid}: openai_vlm cannot score option likelihoods (the API returns no "
                "prompt log-probabilities); use hf_vlm or free generation"))
        try:  # PNG encoding of large pictures goes to a thread (zlib releases the GIL)
            big = sum(_pixels(im) for im in request.images) > _INLINE_PIXELS
            body = await asyncio.to_thread(self._payload, request) if big else self._payload(request)
        except Exception as exc:  # unreadable image, bad placeholder count
            return GenerationResponse(prompt=prompt, error=str(exc))
        headers = {"Content-Type": "application/json"}
        if self._key.get():
            headers["Authorization"] = f"Bearer {self._key.get()}"
        content = json.dumps(body).encode()
        attempt = 0
        while True:
            t0 = time.perf_counter()
            retry_after: float | None = None
            self.calls += 1
            try:
                r = await asyncio.wait_for(
                    client.post(self.url, content=content, headers=headers), timeout=self.timeout)
            except (asyncio.TimeoutError, httpx.TimeoutException):
                problem = f"timed out after {self.timeout:g} s"
            except httpx.HTTPError as exc:  # connection refused/reset, protocol errors
                problem = f"connection error ({type(exc).__name__}: {exc})"
            else:
                latency = time.perf_counter() - t0
                if r.status_code == 200:
                    return self._parse(r.content, 200, prompt, latency)
                problem = f"HTTP {r.status_code}: {r.text[:200]!r}"
                if r.status_code not in _RETRY_STATUS and r.status_code < 500:
                    return GenerationResponse(prompt=prompt, latency_s=latency, error=self._redact(
                        f"sample {sid}: {self.url} returned {problem}"))
                ra = r.headers.get("retry-after")
                try:
                    retry_after = float(ra) if ra is not None else None
                except ValueError:
                    retry_after = None
            if attempt >= self.max_retries:
                return GenerationResponse(prompt=prompt, latency_s=time.perf_counter() - t0,
                                          error=self._redact(
                    f"sample {sid}: {self.url} failed after {attempt + 1} attempts; last: {problem}"))
            delay = min(self.backoff_max, self.backoff_base * 2 ** attempt) * (0.5 + random.random() / 2)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_max))
            log.info("%s: %s (sample %s, attempt %d of %d); retrying in %.2f s", self.url,
                     self._redact(problem), sid, attempt + 1, self.max_retries + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1

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
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the usual case
            return asyncio.run(self._run(requests, on_response))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside a loop (Jupyter)
            return pool.submit(asyncio.run, self._run(requests, on_response)).result()
