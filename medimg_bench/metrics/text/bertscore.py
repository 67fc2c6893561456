"""BERTScore (Zhang et al., ICLR 2020) from a local model: greedy cosine matching of contextual
token embeddings, precision / recall / F1 per pair. Equal to the ``bert-score`` package with
``idf=False`` and no baseline rescaling for the same model and layer (tested on a tiny random
BERT): special tokens carry zero weight, an empty candidate scores 0. Byte-level BPE tokenizers
(RoBERTa, GPT-2 families) get a space before each non-empty text, as bert-score encodes them
(``add_prefix_space=True`` in its ``sent_encode``).

``model_path`` is a local folder (``save_pretrained`` layout) or a hub id (``roberta-large``,
``org/name``), downloaded through ``huggingface_hub`` into its cache unless already there
(``revision`` pins it; ``offline=True`` or ``HF_HUB_OFFLINE=1`` reads the cache only); errors
name the option.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["bertscore"]

# tokenizer classes bert-score encodes with add_prefix_space=True (GPT2Tokenizer and its subclasses)
_PREFIX_SPACE_FAMILIES = ("GPT2Tokenizer", "RobertaTokenizer", "BartTokenizer", "LongformerTokenizer")


@functools.lru_cache(maxsize=2)
def _load(path: str, device: str) -> tuple[Any, Any]:
    # kept across calls: a run scores batch after batch with the same model
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return tok, AutoModel.from_pretrained(path, local_files_only=True).to(device).eval()


def bertscore(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    model_path: str | Path | None,
    num_layers: int | None = None,
    batch_size: int = 32,
    device: str = "cpu",
    revision: str | None = None,
    offline: bool = False,
    add_prefix_space: bool | None = None,
) -> dict[str, np.ndarray]:
    """Per-pair ``precision``, ``recall`` and ``f1`` arrays (N,) using the hidden states after
    ``num_layers`` layers (default: the last layer) of the model in ``model_path``.
    ``add_prefix_space=None``: on for RoBERTa / GPT-2 style tokenizers (bert-score's rule)."""
    if model_path is None:
        raise ValueError("bertscore needs a model: set model_path (option `model_path`) to a folder "
                         "with a transformers model and tokenizer or a hub id (e.g. roberta-large)")
    path = Path(model_path).expanduser()
    from medimg_bench.hub import looks_like_hub_id, resolve_transformers_snapshot

    if not path.exists() and looks_like_hub_id(model_path):
        path = resolve_transformers_snapshot(str(model_path), revision=revision, offline=offline,
                                             what="bertscore model_path").path
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"bertscore: no model at {str(path)!r} (option `model_path`): config.json is missing")
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated reports but {len(references)} references")
    import torch

    tok, model = _load(str(path.resolve()), device)
    n_layers = model.config.num_hidden_layers
    layer = n_layers if num_layers is None else int(num_layers)
    if not 0 <= layer <= n_layers:
        raise ValueError(f"bertscore: num_layers must be in 0..{n_layers}, got {layer}")
    special = set(tok.all_special_ids)
    if add_prefix_space is None:
        add_prefix_space = any(c.__name__.startswith(_PREFIX_SPACE_FAMILIES) for c in type(tok).__mro__)
    max_len = min(getattr(tok, "model_max_length", 512) or 512, 512)

    def embed(texts: Sequence[str]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for start in range(0, len(texts), batch_size):
            chunk = [t.strip() for t in texts[start : start + batch_size]]
            if add_prefix_space:  # never on an empty text: bert-score encodes it as specials only
                chunk = [" " + t if t else t for t in chunk]
            enc = tok(chunk, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            with torch.inference_mode():
                hs = model(**{k: v.to(device) for k, v in enc.items()}, output_hidden_states=True).hidden_states[layer]
            for i in range(len(chunk)):
                ids = enc["input_ids"][i]
                keep = enc["attention_mask"][i].bool()
                e = hs[i][keep.to(hs.device)].float()
                w = torch.tensor([0.0 if int(t) in special else 1.0 for t in ids[keep]])
                out.append((torch.nn.functional.normalize(e, dim=-1).cpu(), w))
        return out

    hyp, ref = embed(list(generated)), embed(list(references))
    p = np.zeros(len(hyp))
    r = np.zeros(len(hyp))
    for i, ((he, hw), (re_, rw)) in enumerate(zip(hyp, ref)):
        if hw.sum() == 0 or rw.sum() == 0:  # empty text: score 0, as bert-score does
            continue
        sim = he @ re_.T
        p[i] = float((sim.max(dim=1).values * hw).sum() / hw.sum())
        r[i] = float((sim.max(dim=0).values * rw).sum() / rw.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    return {"precision": p, "recall": r, "f1": f}
