"""The protocol every generative (vision-language) adapter speaks.

A :class:`GenerationRequest` holds the images (original resolution, ``uint8`` arrays or PIL
images), a chat prompt (system text plus user text in which ``<image>`` marks where each image
goes; images not placed are put before the text) and the generation settings. An adapter turns a
list of requests into a list of :class:`GenerationResponse` of the same length and order; a
request that fails gives a response with ``error`` set instead of raising, so one bad sample never
stops a batch.

Tasks (``vqa``, ``report_generation``) build the requests from a batch and call
``adapter.generate(requests)``; the engine reaches them through ``Task.predict``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from medimg_bench.models.vlm.requests import (  # noqa: F401  (re-exported)
    IMAGE_TOKEN,
    GenerationRequest,
    GenerationResponse,
    GenerationSettings,
    OnResponse,
    default_cache_path,
    image_digest,
    none_if_null,
    settings_from_options,
    to_pil_rgb,
)

__all__ = ["IMAGE_TOKEN", "GenerationSettings", "GenerationRequest", "GenerationResponse", "GenerativeAdapter", "image_digest", "to_pil_rgb", "settings_from_options", "none_if_null", "default_cache_path", "OnResponse"]


class GenerativeAdapter:
    """Base class of vision-language adapters.

    Subclasses implement :meth:`_generate` (a list of requests → responses, same order) and
    :meth:`identity` (what makes two adapters give the same answers: backend, model path or name,
    revision, dtype). ``generate`` adds the response cache when one is attached.
    """

    task = "generation"
    backend = "base"

    def __init__(self, *, name: str = "", settings: GenerationSettings | None = None) -> None:
        self.name = name or self.backend
        self.settings = settings or GenerationSettings()  # defaults for requests the tasks build
        self.cache: Any = None  # a ResponseCache, attached by the pipeline or the user
        self.device = "cpu"

    # the engine calls these on every adapter
    def to(self, device: Any) -> GenerativeAdapter:
        self.device = str(device)
        return self

    def eval(self) -> GenerativeAdapter:
        return self

    def train(self, mode: bool = True) -> GenerativeAdapter:
        return self

    def identity(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint or cache entry must match to be reused (see ``identity``)."""
        return {"backend": self.backend, **self.identity()}

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:  # pragma: no cover
        raise NotImplementedError

    def _generate_streaming(
        self, requests: Sequence[GenerationRequest], on_response: OnResponse
    ) -> list[GenerationResponse]:
        """Like ``_generate`` but calls ``on_response(index, response)`` as soon as each response
        is received, so the cache can commit it before the rest arrive. Backends that receive
        responses one by one (``openai``) or batch by batch (``hf``) override it."""
        out = self._generate(list(requests))
        for i, r in enumerate(out):
            on_response(i, r)
        return out

    def attach_cache(
        self, *, cache: bool = True, cache_path: str | os.PathLike[str] | None = None,
        cache_nondeterministic: bool = False,
    ) -> None:
        """Attach a :class:`~medimg_bench.models.vlm.cache.ResponseCache` (or none when
        ``cache`` is false) at ``cache_path`` (default :func:`default_cache_path`)."""
        if not cache:
            self.cache = None
            return
        from medimg_bench.models.vlm.cache import ResponseCache

        self.cache = ResponseCache(cache_path or default_cache_path(),
                                   serve_nondeterministic=cache_nondeterministic)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:
        """Responses for ``requests`` in the same order; served from ``self.cache`` where possible."""
        if self.cache is None:
            return self._generate(list(requests))
        return self.cache.generate(self, list(requests))

    def __repr__(self) -> str:
        try:
            ident = ", ".join(f"{k}={v!r}" for k, v in self.identity().items() if k != "files")
        except Exception:  # identity not available (abstract base, half-built adapter)
            ident = f"name={self.name!r}"
        return f"{type(self).__name__}({ident})"

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        raise TypeError(
            f"{self.name}: a generative adapter answers prompts; use it with a generative task "
            "(task=vqa or task=report_generation), which builds the prompts"
        )
