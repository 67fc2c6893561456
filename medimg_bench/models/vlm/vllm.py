"""``vllm_vlm``: the offline vLLM engine in this process (GPU only; ``pip install vllm``).

Conversations are built exactly as for ``openai_vlm`` (images as PNG data URLs placed where the
prompt's ``<image>`` placeholders are) and passed to ``LLM.chat`` in one batch, so vLLM's own
scheduler batches them. vLLM is imported only when the adapter is created.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from medimg_bench.models.vlm.base import (
    GenerationRequest,
    GenerationResponse,
    GenerationSettings,
    GenerativeAdapter,
    settings_from_options,
)
from medimg_bench.registry import register_model

__all__ = ["VLLMAdapter"]


@register_model("vllm_vlm", tags=("generative", "vlm", "vllm"))
class VLLMAdapter(GenerativeAdapter):
    """A model run by vLLM's offline engine.

    Args:
        path: model folder or hub id (as vLLM takes it).
        dtype: passed to vLLM (``auto``: the model's own, bf16 for most).
        tensor_parallel_size: GPUs to shard the model over.
        max_model_len, gpu_memory_utilization, max_images: engine limits
            (``max_images``: images per prompt, ``limit_mm_per_prompt``).
        engine_kwargs: further ``vllm.LLM`` arguments.
        max_new_tokens, temperature, top_p, seed: default generation settings.
        cache, cache_path, cache_nondeterministic: the response cache.
    """

    backend = "vllm"

    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        "path": "where the model lies: the content of its files (`files`) is in the identity",
        "gpu_memory_utilization": "how much GPU memory the engine reserves, not what it computes",
    }

    def __init__(
        self,
        *,
        path: str | None = None,
        revision: str | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        max_images: int = 5,
        trust_remote_code: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        cache: bool = True,
        cache_path: str | None = None,
        cache_nondeterministic: bool = False,
        name: str = "",
    ) -> None:
        super().__init__(name=name or "vllm_vlm", settings=settings_from_options(
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed))
        if not path:
            raise ValueError("vllm_vlm needs the model: model.options.path=/path/to/model")
        try:
            import vllm
        except ImportError as exc:
            raise ImportError("vllm_vlm needs vLLM, which is not installed: pip install vllm "
                              f"(GPU machines only) [{exc}]") from exc
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("vllm_vlm runs on CUDA GPUs only and none is visible; use hf_vlm "
                               "on CPU")
        self.path = str(path)
        self.revision = revision
        self.dtype = str(dtype)
        self.tensor_parallel_size = int(tensor_parallel_size)
        kwargs: dict[str, Any] = {
            "model": self.path, "revision": revision, "dtype": self.dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": float(gpu_memory_utilization),
            "trust_remote_code": trust_remote_code,
            "limit_mm_per_prompt": {"image": int(max_images)},
            "seed": 0 if seed is None else int(seed),
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = int(max_model_len)
        kwargs.update(engine_kwargs or {})
        self.llm = vllm.LLM(**kwargs)
        self._vllm = vllm
        from medimg_bench.models.vlm.hf import model_files_signature

        self._signature: str | None = model_files_signature(self.path, revision=revision)
        self.device = "cuda"
        self.attach_cache(cache=cache, cache_path=cache_path,
                          cache_nondeterministic=cache_nondeterministic)

    def to(self, device: Any) -> VLLMAdapter:  # vLLM places the model itself
        return self

    def content_identity(self) -> dict[str, Any]:
        """The model files' digest and the vLLM version that runs them."""
        return {"files": self._signature, "vllm": getattr(self._vllm, "__version__", "?")}

    def _sampling(self, s: GenerationSettings) -> Any:
        return self._vllm.SamplingParams(max_tokens=s.max_new_tokens, temperature=s.temperature,
                                         top_p=s.top_p, seed=s.seed)

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:
        from medimg_bench.models.vlm.openai import chat_messages

        requests = list(requests)
        out: list[GenerationResponse | None] = [None] * len(requests)
        convs: list[tuple[int, list[dict[str, Any]]]] = []
        for i, r in enumerate(requests):
            if r.options is not None:
                out[i] = GenerationResponse(prompt=r.rendered_prompt(), error=(
                    f"sample {r.sample_id or '?'}: vllm_vlm does not score option likelihoods; "
                    "use hf_vlm"))
                continue
            try:
                convs.append((i, chat_messages(r)))
            except Exception as exc:
                out[i] = GenerationResponse(prompt=r.rendered_prompt(), error=str(exc))
        t0 = time.perf_counter()
        try:
            results = self.llm.chat([m for _, m in convs],
                                    [self._sampling(requests[i].settings) for i, _ in convs],
                                    use_tqdm=False)
        except Exception as exc:
            for i, _ in convs:
                out[i] = GenerationResponse(prompt=requests[i].rendered_prompt(),
                                            error=f"vLLM generation failed: {type(exc).__name__}: {exc}")
            return out  # type: ignore[return-value]
        latency = time.perf_counter() - t0
        for (i, _), res in zip(convs, results):
            comp = res.outputs[0]
            out[i] = GenerationResponse(
                text=comp.text.strip(), prompt=res.prompt or requests[i].rendered_prompt(),
                latency_s=latency, tokens_in=len(res.prompt_token_ids or []),
                tokens_out=len(comp.token_ids), finish_reason=comp.finish_reason)
        return out  # type: ignore[return-value]
