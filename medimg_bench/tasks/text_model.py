"""A generative adapter as a text model for model-based metrics (GREEN): prompts → replies, at
temperature 0, through the adapter's response cache like any other request. Metrics never import
models; this bridge lives above both."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["text_model_generate"]


def text_model_generate(model: Any, *, max_new_tokens: int = 2048,
                        purpose: str = "green") -> Callable[[list[str]], list[str]]:
    """``generate(prompts) -> replies`` over ``model`` (a generative adapter, or a
    ``{model: NAME, options: {...}}`` spec). Greedy decoding; a failed request raises, naming
    the prompt's position."""
    from medimg_bench.metrics.text.judge import build_judge
    from medimg_bench.models.vlm.requests import GenerationRequest

    adapter = build_judge(model)
    if adapter is None:
        raise ValueError(f"{purpose}: no model given")
    settings = dataclasses.replace(adapter.settings, temperature=0.0, max_new_tokens=max_new_tokens)

    def generate(prompts: list[str]) -> list[str]:
        reqs = [GenerationRequest(images=[], user=p, settings=settings, sample_id=f"{purpose}_{i}",
                                  key_extra={"purpose": purpose}) for i, p in enumerate(prompts)]
        out = adapter.generate(reqs)
        for i, r in enumerate(out):
            if r.error:
                raise RuntimeError(f"{purpose}: the model's request for pair {i} failed: {r.error}")
        return [r.text for r in out]

    generate.identity = adapter.fingerprint() if hasattr(adapter, "fingerprint") else {}  # type: ignore[attr-defined]
    return generate
