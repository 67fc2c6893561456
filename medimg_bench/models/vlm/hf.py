"""``hf_vlm``: any Hugging Face ``transformers`` image-text-to-text model from a local folder.

The processor's chat template renders the prompt (images placed where the user text has
``<image>``), requests are generated in batches with left padding (greedy unless a temperature is
set), bf16 on a GPU, and ``device_map`` spreads a model over several GPUs (needs ``accelerate``).
A request with ``options`` is scored instead of generated: the log-probability (natural log,
summed over the option's tokens) of each option's text following the prompt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.vlm.base import (
    IMAGE_TOKEN,
    GenerationRequest,
    GenerationResponse,
    GenerationSettings,
    GenerativeAdapter,
    OnResponse,
    settings_from_options,
    to_pil_rgb,
)
from medimg_bench.registry import register_model

__all__ = ["HFVLMAdapter", "files_signature", "model_files_signature", "build_messages"]

log = logging.getLogger(__name__)

def files_signature(path: str | Path) -> str:
    """SHA-256 over the relative names and the full SHA-256 of every file of a model folder
    (weights, configs, tokenizer, chat template; hidden names skipped). Each file's digest is
    computed once and then read from the file-hash cache while its path, size, mtime, ctime and
    inode stay the same (:mod:`medimg_bench._hashing`), so only the first run reads a 10 GB model
    through; any changed byte gives another signature."""
    from medimg_bench._hashing import tree_sha256

    return tree_sha256(path, what=f"model folder {path}")


def model_files_signature(path: str, *, revision: str | None = None) -> str | None:
    """:func:`files_signature` of a model folder, or of the local snapshot of a hub id (the Hugging
    Face cache's ``snapshots/<commit>`` folder); ``None`` with a warning when neither exists
    (the identity then holds only the name and revision)."""
    local = Path(path).expanduser()
    if local.is_dir():
        return files_signature(local)
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(path, revision=revision, local_files_only=True)
    except Exception as exc:  # not in the local cache in the usual layout
        log.warning("%s: no local folder to hash (%s); the model's identity is its name and "
                    "revision only", path, exc)
        return None
    return files_signature(folder)


def _torch_dtype(dtype: str) -> Any:
    """``auto`` → bfloat16 with CUDA, else float32; a name → that torch dtype."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if torch.cuda.is_available() else torch.float32
    try:
        return {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16,
                "fp16": torch.float16, "float32": torch.float32, "fp32": torch.float32}[str(dtype)]
    except KeyError:
        raise ValueError(f"hf_vlm: unknown dtype {dtype!r} (auto, bfloat16, float16, float32)") from None


def build_messages(request: GenerationRequest) -> tuple[list[dict[str, Any]], int]:
    """Chat messages in the transformers content-list format for ``request`` and the number of
    images they place. ``<image>`` in the user text marks where each image goes; images beyond
    the placeholders go before the text. More placeholders than images is a ``ValueError``.
    The earlier turns of ``request.history`` come first (user, assistant), their images before
    this turn's (:meth:`GenerationRequest.all_images` order)."""
    sid = request.sample_id or "?"
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": [{"type": "text", "text": request.system}]})
    for k, turn in enumerate(request.history or ()):
        messages.append({"role": "user", "content": _content(turn.user, len(turn.images), f"{sid} (turn {k})")})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": turn.reply}]})
    messages.append({"role": "user", "content": _content(request.user, len(request.images), sid)})
    return messages, len(request.all_images())


def _content(user: str, n_images: int, sid: str) -> list[dict[str, Any]]:
    parts = user.split(IMAGE_TOKEN)
    n_placed = len(parts) - 1
    if n_placed > n_images:
        raise ValueError(f"sample {sid}: the prompt has {n_placed} "
                         f"{IMAGE_TOKEN} placeholders but the request has {n_images} images")
    content: list[dict[str, Any]] = [{"type": "image"} for _ in range(n_images - n_placed)]
    for i, text in enumerate(parts):
        if text:
            content.append({"type": "text", "text": text})
        if i < n_placed:
            content.append({"type": "image"})
    return content


@register_model("hf_vlm", tags=("generative", "vlm", "hf"))
class HFVLMAdapter(GenerativeAdapter):
    """A transformers image-text-to-text model from a local folder (AutoProcessor + chat template).

    Args:
        path: the model folder (``save_pretrained`` layout) or a hub id (``org/name``), downloaded
            with ``huggingface_hub`` into its cache unless already there (:mod:`medimg_bench.hub`).
        revision: hub revision (branch, tag or commit); the identity records the commit it
            resolved to, so a resume with another revision is refused.
        offline (or its older name ``local_files_only``): never touch the network (as
            ``HF_HUB_OFFLINE=1``); a hub id must then be in the cache.
        dtype: ``auto`` (bf16 when CUDA is available, else float32), ``bfloat16``, ``float16``,
            ``float32``.
        device_map: passed to ``from_pretrained`` (e.g. ``auto``) for models larger than one GPU;
            then ``.to(device)`` leaves the placement alone.
        batch_size: requests generated together (left padding).
        max_new_tokens, temperature, top_p, seed: default :class:`GenerationSettings`.
        chat_template: a Jinja template replacing the processor's own.
        processor_kwargs: passed to ``AutoProcessor.from_pretrained`` (e.g. Qwen2-VL's
            ``max_pixels`` to bound the image tokens of large originals); part of the identity.
        cache, cache_path, cache_nondeterministic: the response cache (see ``cache.py``).
    """

    backend = "hf"

    NEUTRAL_PARAMS: dict[str, str] = {  # noqa: RUF012 - read only
        "path": "where the model lies: the content of its files (`files`) and the hub commit are in the identity",
        "device_map": "where the layers are placed, not what they compute",
        "batch_size": "how many requests are generated together; each answer is its own request's",
        **{k: "whether the network may be used: the files read are in the identity"
           for k in ("local_files_only", "offline")},
    }

    def __init__(
        self,
        *,
        path: str | None = None,
        revision: str | None = None,
        dtype: str = "auto",
        device_map: str | dict[str, Any] | None = None,
        batch_size: int = 8,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = 0,
        chat_template: str | None = None,
        processor_kwargs: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
        attn_implementation: str | None = None,
        local_files_only: bool = False,
        offline: bool = False,
        cache: bool = True,
        cache_path: str | None = None,
        cache_nondeterministic: bool = False,
        name: str = "",
    ) -> None:

        super().__init__(name=name or "hf_vlm", settings=settings_from_options(
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed))
        if not path:
            raise ValueError("hf_vlm needs the model folder: model.options.path=/path/to/model")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.path = str(path)
        self.revision = revision
        self.batch_size = int(batch_size)
        self.device_map = device_map
        self.chat_template = chat_template
        self.processor_kwargs = dict(processor_kwargs or {})
        local = Path(self.path).expanduser()
        if local.exists() and not local.is_dir():
            raise ValueError(f"hf_vlm: path {self.path} is a file; give the model folder")
        if not local.exists() and self.path.startswith(("/", ".", "~")):
            raise FileNotFoundError(f"hf_vlm: model folder {self.path} does not exist")
        self.hub_snapshot = None
        if not local.exists():  # a hub id: downloaded (or found in the cache) and pinned to its commit
            from medimg_bench.hub import resolve_transformers_snapshot

            self.hub_snapshot = resolve_transformers_snapshot(
                self.path, revision=revision, what="hf_vlm model.options.path", offline=offline or local_files_only)
            local = self.hub_snapshot.path
        torch_dtype = _torch_dtype(dtype)
        self.dtype = str(torch_dtype).replace("torch.", "")
        self._load(local, torch_dtype, trust_remote_code=trust_remote_code,
                   attn_implementation=attn_implementation)
        tok = getattr(self.processor, "tokenizer", None)
        if tok is None:
            raise ValueError(f"hf_vlm: the processor at {self.path} has no tokenizer")
        self.tokenizer = tok
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        if chat_template is not None:
            self.processor.chat_template = chat_template
        if not (getattr(self.processor, "chat_template", None) or getattr(tok, "chat_template", None)):
            raise ValueError(f"hf_vlm: the processor at {self.path} has no chat template; "
                             "pass model.options.chat_template")
        self._signature = files_signature(local)
        from medimg_bench.hub import local_weights_record

        #: where the weights came from, for the manifest (commit and SHA-256 of every file)
        self.weight_sources = [self.hub_snapshot.record() if self.hub_snapshot is not None
                               else local_weights_record(local)]
        self.device = str(getattr(self.model, "device", "cpu"))
        self.attach_cache(cache=cache, cache_path=cache_path,
                          cache_nondeterministic=cache_nondeterministic)

    def _load(self, local: Path, torch_dtype: Any, *, trust_remote_code: bool,
              attn_implementation: str | None) -> None:
        """Processor and model from the local folder (never the network: a hub id was resolved
        to its snapshot before)."""
        from transformers import AutoModelForImageTextToText, AutoProcessor

        common: dict[str, Any] = {"trust_remote_code": trust_remote_code, "local_files_only": True}
        try:
            self.processor = AutoProcessor.from_pretrained(str(local), **common, **self.processor_kwargs)
            kwargs: dict[str, Any] = {"dtype": torch_dtype, **common}
            if self.device_map is not None:
                kwargs["device_map"] = self.device_map
            if attn_implementation:
                kwargs["attn_implementation"] = attn_implementation
            self.model = AutoModelForImageTextToText.from_pretrained(str(local), **kwargs).eval()
        except (OSError, ValueError) as exc:
            raise OSError(f"hf_vlm: cannot load an image-text-to-text model from {self.path}: "
                          f"{exc}") from exc

    # -- engine hooks -----------------------------------------------------------------------------
    def to(self, device: Any) -> HFVLMAdapter:
        if self.device_map is None:
            self.model.to(device)
        self.device = str(getattr(self.model, "device", device))
        return self

    def content_identity(self) -> dict[str, Any]:
        """The model files' digest (:func:`files_signature`), the hub commit a hub id resolved to
        and the dtype ``dtype`` resolved to."""
        ident: dict[str, Any] = {"files": self._signature, "torch_dtype": self.dtype}
        if self.hub_snapshot is not None:
            ident["commit"] = self.hub_snapshot.commit
        return ident

    # -- generation -------------------------------------------------------------------------------
    def _render(self, request: GenerationRequest) -> tuple[str, list[Any]]:
        messages, _ = build_messages(request)
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True,
                                                  tokenize=False)
        where = f"sample {request.sample_id or '?'}"
        images = [to_pil_rgb(im, where=f"{where}, image {i}") for i, im in enumerate(request.all_images())]
        return text, images

    def _inputs(self, texts: list[str], images: list[list[Any]]) -> Any:
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True}
        if any(images):
            kwargs["images"] = images
        inputs = self.processor(**kwargs)
        dev = self._input_device()
        out = {}
        for k, v in inputs.items():
            if hasattr(v, "to"):
                v = v.to(dev)
                if v.is_floating_point():
                    v = v.to(self.model.dtype)
            out[k] = v
        return out

    def _input_device(self) -> Any:
        import torch

        try:
            return next(self.model.parameters()).device if self.device_map is None else \
                self.model.get_input_embeddings().weight.device
        except StopIteration:  # pragma: no cover
            return torch.device("cpu")

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResponse]:
        return self._generate_streaming(requests, lambda i, r: None)

    def _generate_streaming(
        self, requests: Sequence[GenerationRequest], on_response: OnResponse
    ) -> list[GenerationResponse]:
        requests = list(requests)
        out: list[GenerationResponse | None] = [None] * len(requests)
        rendered: dict[int, tuple[str, list[Any]]] = {}
        for i, r in enumerate(requests):
            try:
                rendered[i] = self._render(r)
            except Exception as exc:  # bad image / placeholder: this request fails alone
                out[i] = GenerationResponse(prompt=r.rendered_prompt(), error=str(exc))
                on_response(i, out[i])  # type: ignore[arg-type]
        # option-likelihood requests one by one; generation requests in batches of equal settings
        # and equal "has images" (processors reject a batch mixing text-only and image requests)
        groups: dict[tuple[GenerationSettings, bool], list[int]] = {}
        for i in rendered:
            if requests[i].options is not None:
                out[i] = self._score_options(requests[i], *rendered[i])
                on_response(i, out[i])  # type: ignore[arg-type]
            else:
                groups.setdefault((requests[i].settings, bool(rendered[i][1])), []).append(i)
        for (settings, _), idx in groups.items():
            for b in range(0, len(idx), self.batch_size):
                chunk = idx[b:b + self.batch_size]
                for i, resp in zip(chunk, self._generate_batch(
                        [requests[i] for i in chunk], [rendered[i] for i in chunk], settings)):
                    out[i] = resp
                    on_response(i, resp)
        return out  # type: ignore[return-value]

    def _generate_batch(
        self, requests: list[GenerationRequest], rendered: list[tuple[str, list[Any]]],
        settings: GenerationSettings,
    ) -> list[GenerationResponse]:
        import torch

        t0 = time.perf_counter()
        try:
            inputs = self._inputs([t for t, _ in rendered], [ims for _, ims in rendered])
            gen: dict[str, Any] = {"max_new_tokens": settings.max_new_tokens,
                                   "pad_token_id": self.tokenizer.pad_token_id}
            if settings.temperature > 0:
                gen.update(do_sample=True, temperature=settings.temperature, top_p=settings.top_p)
                if settings.seed is not None:
                    torch.manual_seed(settings.seed)
            else:
                gen.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            with torch.inference_mode():
                seqs = self.model.generate(**inputs, **gen)
        except Exception as exc:
            if len(requests) > 1:  # find the request that fails; the others still get answers
                return [self._generate_batch([r], [x], settings)[0] for r, x in zip(requests, rendered)]
            msg = f"sample {requests[0].sample_id or '?'}: generation failed: {type(exc).__name__}: {exc}"
            return [GenerationResponse(prompt=rendered[0][0], error=msg)]
        latency = time.perf_counter() - t0
        n_in = inputs["input_ids"].shape[1]
        new = seqs[:, n_in:].cpu()
        mask = inputs["attention_mask"].sum(dim=1).tolist()
        eos = self._eos_ids()
        pad = self.tokenizer.pad_token_id
        out = []
        for row, (text, _), n_prompt in zip(new.tolist(), rendered, mask):
            stop = next((k for k, t in enumerate(row) if t in eos), None)
            toks = row[:stop] if stop is not None else row
            if stop is None and pad is not None and pad not in eos:
                while toks and toks[-1] == pad:
                    toks = toks[:-1]
            out.append(GenerationResponse(
                text=self.tokenizer.decode(toks, skip_special_tokens=True).strip(),
                prompt=text, latency_s=latency, tokens_in=int(n_prompt), tokens_out=len(toks),
                finish_reason="stop" if stop is not None else "length"))
        return out

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for src in (getattr(self.model, "generation_config", None), self.tokenizer):
            e = getattr(src, "eos_token_id", None)
            if e is None:
                continue
            ids.update(e if isinstance(e, (list, tuple)) else [e])
        return {int(i) for i in ids}

    def _score_options(self, request: GenerationRequest, text: str, images: list[Any]) -> GenerationResponse:
        """Sum of the log-probabilities of each option's tokens after the prompt (nats)."""
        import torch

        t0 = time.perf_counter()
        options = list(request.options or [])
        try:
            if not options:
                raise ValueError("options is empty")
            opt_ids = [self.tokenizer.encode(o, add_special_tokens=False) for o in options]
            for o, ids in zip(options, opt_ids):
                if not ids:
                    raise ValueError(f"option {o!r} has no tokens")
            k = len(options)
            base = self._inputs([text] * k, [images] * k if images else [[] for _ in range(k)])
            prompt_ids = base["input_ids"]
            n_prompt = prompt_ids.shape[1]
            longest = max(len(ids) for ids in opt_ids)
            pad = self.tokenizer.pad_token_id or 0
            dev = prompt_ids.device
            ids = torch.full((k, n_prompt + longest), pad, dtype=prompt_ids.dtype, device=dev)
            att = torch.zeros_like(ids)
            ids[:, :n_prompt] = prompt_ids
            att[:, :n_prompt] = base["attention_mask"]
            for j, o in enumerate(opt_ids):
                ids[j, n_prompt:n_prompt + len(o)] = torch.tensor(o, device=dev)
                att[j, n_prompt:n_prompt + len(o)] = 1
            inputs = dict(base)
            inputs["input_ids"], inputs["attention_mask"] = ids, att
            for key, v in base.items():  # per-token side inputs (token types) follow the ids
                if key not in ("input_ids", "attention_mask") and hasattr(v, "shape") and \
                        v.ndim == 2 and tuple(v.shape) == (k, n_prompt):
                    ext = torch.zeros((k, n_prompt + longest), dtype=v.dtype, device=v.device)
                    ext[:, :n_prompt] = v
                    inputs[key] = ext
            with torch.inference_mode():
                logits = self.model(**inputs).logits.float()
            logp = torch.log_softmax(logits[:, n_prompt - 1:-1], dim=-1)
            scores = []
            for j, o in enumerate(opt_ids):
                tgt = torch.tensor(o, device=logp.device)
                scores.append(float(logp[j, torch.arange(len(o), device=logp.device), tgt].sum()))
        except Exception as exc:
            return GenerationResponse(prompt=text, error=f"sample {request.sample_id or '?'}: option "
                                      f"scoring failed: {type(exc).__name__}: {exc}")
        best = max(range(len(scores)), key=scores.__getitem__)
        return GenerationResponse(
            text=options[best], prompt=text, latency_s=time.perf_counter() - t0,
            tokens_in=int(n_prompt), tokens_out=0, finish_reason="option_likelihood",
            option_logprobs=scores)
