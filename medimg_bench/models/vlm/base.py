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
    ChatTurn,
    GenerationFailed,
    GenerationRequest,
    GenerationResponse,
    GenerationSettings,
    OnResponse,
    default_cache_path,
    image_digest,
    none_if_null,
    served_key,
    settings_from_options,
    to_pil_rgb,
)

__all__ = ["IMAGE_TOKEN", "ChatTurn", "GenerationFailed", "GenerationSettings", "GenerationRequest", "GenerationResponse", "GenerativeAdapter", "image_digest", "to_pil_rgb", "settings_from_options", "none_if_null", "default_cache_path", "OnResponse", "served_key"]


class GenerativeAdapter:
    """Base class of vision-language adapters.

    Subclasses implement :meth:`_generate` (a list of requests → responses, same order) and
    may add to :meth:`content_identity` (what the declared parameters resolved to: the model
    files' digest, a hub commit). :meth:`identity` — what makes two adapters give the same
    answers — is derived, never written by hand: every declared constructor parameter
    (:mod:`medimg_bench.identity`) except those in ``NEUTRAL_PARAMS``, each with its reason.
    ``generate`` adds the response cache when one is attached.
    """

    task = "generation"
    backend = "base"

    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        "name": "a label for results: decides no answer",
        "settings": "default generation settings: in the run key (`settings`); every request carries its own",
        **{k: "a default generation setting: every request carries its own settings, which are in the "
              "response-cache key and the run key (`settings`)"
           for k in ("max_new_tokens", "temperature", "top_p", "seed")},
        **{k: "where answers are stored, not what they are" for k in ("cache", "cache_path")},
        "cache_nondeterministic": "whether sampled answers are served again: the request's settings "
                                  "(temperature, seed) are in the cache key",
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from medimg_bench.identity import declaring

        declaring(cls)  # every adapter records its declared parameters: they are its identity

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

    def identity(self) -> dict[str, Any]:
        """The declared, non-neutral parameters (:func:`medimg_bench.identity.param_identity`,
        secrets redacted) plus :meth:`content_identity`."""
        from medimg_bench._secrets import redact_secrets
        from medimg_bench.identity import param_identity

        return {**redact_secrets(param_identity(self)), **self.content_identity()}

    def content_identity(self) -> dict[str, Any]:
        """What the declared parameters resolved to that they do not say themselves (the model
        files' content, a hub commit, the dtype ``auto`` became); none by default."""
        return {}

    #: served adapters set this: a cached answer is served only when the server that made it
    #: reported the identity the server reports now (see ``cache.py``)
    verifies_served = False

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint, a shard merge or a manifest must match: ``identity`` plus, for a
        served model, what the server reports about itself (``server_identity``)."""
        fp = self.cache_identity()
        server = self.server_identity()
        if server is not None:
            fp["server"] = server
        return fp

    def cache_identity(self) -> dict[str, Any]:
        """The adapter part of a response-cache key: backend and ``identity`` (the server's own
        report is stored with each answer and compared instead, so a re-run without the server
        can still be told apart from a changed one)."""
        return {"backend": self.backend, **self.identity()}

    def server_identity(self) -> dict[str, Any] | None:
        """What the model's server reports about itself (``None``: not a served model)."""
        return None

    def served_identities(self) -> set[str]:
        """Canonical ``served_by`` of the answers received live from the server by this object."""
        return set()

    def probe_served(self) -> str | None:
        """Ask the server once what it reports about itself (adds to ``served_identities``);
        returns why that failed, or None. Only served adapters implement it."""
        return "this adapter has no server to ask"

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
        """Responses for ``requests`` in the same order; served from ``self.cache`` where possible.
        Every ``error`` comes back redacted (:meth:`redact_error`)."""
        if self.cache is None:
            out = self._generate(list(requests))
        else:
            out = self.cache.generate(self, list(requests))
        for r in out:
            if r.error:
                r.error = self.redact_error(r.error)
        return out

    def option_secrets(self) -> set[str]:
        """The values of this adapter's secret-named options at any depth (``extra_body.api_key``,
        ``client_secret``…): what a server may echo back in an error message."""
        from medimg_bench._secrets import secret_values

        return secret_values({k: v for k, v in vars(self).items() if isinstance(v, (str, dict, list, tuple))})

    def redact_error(self, text: str) -> str:
        """``text`` with the values of secret-named options (:meth:`option_secrets`) and anything
        that looks like a credential replaced by ``***``: the one redaction every recorded error
        message of a generative adapter passes (the base class applies it in ``generate``)."""
        from medimg_bench._secrets import redact_text

        return redact_text(text, self.option_secrets())

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
