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

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "IMAGE_TOKEN",
    "GenerationSettings",
    "GenerationRequest",
    "GenerationResponse",
    "GenerativeAdapter",
    "image_digest",
]

IMAGE_TOKEN = "<image>"


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding settings. ``temperature=0`` is greedy decoding; ``seed`` makes sampling repeatable."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0

    @property
    def deterministic(self) -> bool:
        """True when the same request must give the same text (greedy, or sampling with a seed)."""
        return self.temperature == 0 or self.seed is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GenerationRequest:
    """One call of a generative model: images + chat prompt + settings.

    ``options``, when given, makes it a multiple-choice likelihood request: adapters that support
    it (``hf``) return the log-probability of each option's text in ``GenerationResponse.option_logprobs``.
    """

    images: list[Any]
    user: str
    system: str | None = None
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    sample_id: str = ""
    options: list[str] | None = None

    def rendered_prompt(self) -> str:
        """The prompt as text (system and user), as stored with the response and in cache keys."""
        return json.dumps({"system": self.system, "user": self.user, "options": self.options},
                          sort_keys=True, ensure_ascii=False)


@dataclass
class GenerationResponse:
    """What came back: text plus metadata. ``error`` set means the request failed (text is empty)."""

    text: str = ""
    prompt: str = ""
    latency_s: float = 0.0
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    cached: bool = False
    option_logprobs: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationResponse:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def image_digest(image: Any) -> str:
    """SHA-256 of an image's pixels, shape and dtype (PIL images are converted to arrays)."""
    import numpy as np

    arr = np.asarray(image)
    h = hashlib.sha256()
    h.update(str((arr.shape, arr.dtype.str)).encode())
    h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


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

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:
        """Responses for ``requests`` in the same order; served from ``self.cache`` where possible."""
        if self.cache is None:
            return self._generate(list(requests))
        return self.cache.generate(self, list(requests))

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        raise TypeError(
            f"{self.name}: a generative adapter answers prompts; use it with a generative task "
            "(task=vqa or task=report_generation), which builds the prompts"
        )
