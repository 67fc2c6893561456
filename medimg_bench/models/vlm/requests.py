"""What a generative adapter is asked and answers: requests, settings, responses, image digests."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OnResponse", "IMAGE_TOKEN", "ChatTurn", "GenerationFailed", "served_key", "GenerationSettings", "GenerationRequest", "GenerationResponse", "to_pil_rgb", "none_if_null", "settings_from_options", "default_cache_path", "image_digest"]

OnResponse = Callable[[int, "GenerationResponse"], None]

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
class ChatTurn:
    """One earlier exchange of a conversation: the user's text and images and the model's reply
    (as the conversation keeps it)."""

    user: str
    reply: str
    images: list[Any] = field(default_factory=list)


@dataclass
class GenerationRequest:
    """One call of a generative model: images + chat prompt + settings.

    ``options``, when given, makes it a multiple-choice likelihood request: adapters that support
    it (``hf``) return the log-probability of each option's text in ``GenerationResponse.option_logprobs``.

    ``key_extra`` records what shaped the request without being sent as text — how a volume was
    sampled into ``images`` (``{"volume_sampling": {...}}``), which repeat of a judgment this is
    (``{"judge_repeat": 2}``) — and joins the response-cache key, so a change of it never reuses
    an answer. JSON-serialisable values only.

    ``history``, when given, makes it the next turn of a conversation: the earlier turns
    (:class:`ChatTurn`) are sent first, each as a user message and the assistant's reply, then
    ``user`` / ``images``. Their text is part of :meth:`rendered_prompt` and their images' digests
    of the cache key; a request without history keeps its old key.
    """

    images: list[Any]
    user: str
    system: str | None = None
    settings: GenerationSettings = field(default_factory=GenerationSettings)
    sample_id: str = ""
    options: list[str] | None = None
    key_extra: dict[str, Any] | None = None
    history: list[ChatTurn] | None = None

    def rendered_prompt(self) -> str:
        """The prompt as text (system, earlier turns, user), as stored with the response and in
        cache keys."""
        shown: dict[str, Any] = {"system": self.system, "user": self.user, "options": self.options}
        if self.history:
            shown["history"] = [{"user": t.user, "reply": t.reply, "n_images": len(t.images)}
                                for t in self.history]
        return json.dumps(shown, sort_keys=True, ensure_ascii=False)

    def all_images(self) -> list[Any]:
        """Every image the conversation sends, in order: the earlier turns' then this turn's."""
        return [im for t in self.history or () for im in t.images] + list(self.images)


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
    #: what the server said about itself when it answered (served adapters: its ``/v1/models``
    #: entry, the response's ``model`` and ``system_fingerprint``); compared before a cached
    #: answer is served again
    served_by: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationResponse:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def is_blank(text: str | None) -> bool:
    """True when ``text`` holds nothing visible: empty, whitespace, or only format characters
    (Unicode category ``Cf``: zero-width space U+200B, joiners, U+2060, a BOM) and separators.
    Such an answer is no answer: never scored as text, never cached."""
    import unicodedata

    return not text or all(c.isspace() or unicodedata.category(c) in ("Cf", "Zs", "Zl", "Zp", "Cc")
                           for c in text)


class GenerationFailed(RuntimeError):
    """A sample whose request failed (an error response): the engine tags it ``[predict]``."""

    stage = "predict"


def served_key(served_by: dict[str, Any] | None) -> str:
    """A canonical string of a ``served_by`` record (what is compared before a cached answer is
    served again)."""
    return json.dumps(served_by, sort_keys=True, separators=(",", ":"), default=str)


def to_pil_rgb(image: Any, *, where: str = "") -> Any:
    """An RGB ``PIL.Image`` from a PIL image or an array (HW, HWC or CHW with 1/3/4 channels;
    non-uint8 arrays are min-max scaled to 0..255). ``ValueError`` naming ``where`` otherwise."""
    import numpy as np
    from PIL import Image

    if isinstance(image, Image.Image):
        return image if image.mode == "RGB" else image.convert("RGB")
    if hasattr(image, "detach"):  # torch tensor
        image = image.detach().cpu().numpy()
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[-1] not in (1, 3, 4):
        arr = np.moveaxis(arr, 0, -1)  # CHW -> HWC
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim == 3 and arr.shape[-1] == 4:
        arr = arr[..., :3]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] != 3) or arr.size == 0:
        raise ValueError(f"{where or 'image'}: cannot use an image of shape {arr.shape} "
                         "(expected HxW, HxWx3 or 3xHxW)")
    if arr.dtype != np.uint8:
        a = arr.astype(np.float64)
        if not np.isfinite(a).all():
            raise ValueError(f"{where or 'image'}: image has NaN or infinite pixels")
        lo, hi = float(a.min()), float(a.max())
        a = (a - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(a)
        arr = np.rint(a).astype(np.uint8)
    img = Image.fromarray(np.ascontiguousarray(arr))
    return img if img.mode == "RGB" else img.convert("RGB")


def none_if_null(value: Any) -> Any:
    """``None`` for ``None`` and the strings ``none`` / ``null`` / ``""`` (any case), else ``value``.

    Config overrides such as ``model.options.seed=none`` use it: the pipeline drops options
    whose value is ``null``, so a string stands for "no value" where the default is not ``None``.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
        return None
    return value


def settings_from_options(
    *, max_new_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0,
    seed: int | str | None = 0,
) -> GenerationSettings:
    """:class:`GenerationSettings` from adapter options, checked (``ValueError`` on bad values).
    ``seed`` ``none`` (or ``None``) means unseeded sampling."""
    seed = none_if_null(seed)
    if int(max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if float(temperature) < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0 < float(top_p) <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    return GenerationSettings(max_new_tokens=int(max_new_tokens), temperature=float(temperature),
                              top_p=float(top_p), seed=None if seed is None else int(seed))


def default_cache_path() -> Path:
    """``$MEDIMG_BENCH_CACHE/responses.sqlite``, else ``~/.cache/medimg_bench/responses.sqlite``."""
    root = os.environ.get("MEDIMG_BENCH_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "medimg_bench"
    return base / "responses.sqlite"


def image_digest(image: Any) -> str:
    """SHA-256 of an image's pixels, shape and dtype (PIL images are converted to arrays)."""
    import numpy as np

    arr = np.asarray(image)
    h = hashlib.sha256()
    h.update(str((arr.shape, arr.dtype.str)).encode())
    h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()
