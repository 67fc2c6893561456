"""CheXbert labels from local weights (optional, model-based alternative to the offline
labeler): a BERT encoder with 13 four-way heads (blank, positive, negative, uncertain) and a
two-way "No Finding" head on the [CLS] state, as in Smit et al., EMNLP 2020. ``checkpoint`` is
the CheXbert state dict (``chexbert.pth``, read with ``weights_only=True``): a local file or a
file on the Hugging Face Hub written ``hf://org/name[@revision]/chexbert.pth``; ``bert_path`` is
the BERT config and tokenizer (``bert-base-uncased``): a local folder or a hub id. Hub files go
through ``huggingface_hub`` into its cache (``HF_HUB_OFFLINE=1``: the cache only). Missing files
are errors naming the option.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from medimg_bench.metrics.text.chexpert_labeler import CHEXPERT_OBSERVATIONS

__all__ = ["chexbert_label_reports", "CHEXBERT_ORDER"]

#: head order of CheXbert: 13 findings, then "No Finding"
CHEXBERT_ORDER = tuple(o for o in CHEXPERT_OBSERVATIONS if o != "No Finding") + ("No Finding",)
_CLASS_TO_LABEL = {0: np.nan, 1: 1.0, 2: 0.0, 3: -1.0}  # blank, positive, negative, uncertain


def require(path: str | Path | None, option: str, what: str) -> Path:
    if path is None:
        raise ValueError(f"CheXbert needs weights: set `{option}` to {what}")
    from medimg_bench.hub import (
        looks_like_hub_id,
        resolve_file,
        resolve_transformers_snapshot,
        split_hf_path,
    )

    if str(path).startswith("hf://"):
        repo_id, revision, filename = split_hf_path(str(path))
        return resolve_file(repo_id, filename, revision=revision, what=f"CheXbert `{option}`")[0]
    p = Path(path).expanduser()
    if not p.exists() and looks_like_hub_id(path):
        return resolve_transformers_snapshot(str(path), what=f"CheXbert `{option}`").path
    if not p.exists():
        raise FileNotFoundError(f"CheXbert: {what} {str(p)!r} (option `{option}`) does not exist")
    return p


def build(bert_path: Path, checkpoint: Path, device: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(str(bert_path), local_files_only=True)
    config = BertConfig.from_pretrained(str(bert_path), local_files_only=True)

    class _Labeler(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel(config, add_pooling_layer=True)
            h = config.hidden_size
            self.linear_heads = torch.nn.ModuleList([torch.nn.Linear(h, 4) for _ in range(13)])
            self.linear_heads.append(torch.nn.Linear(h, 2))

        def forward(self, ids: Any, mask: Any) -> list[Any]:
            cls = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0, :]
            return [head(cls) for head in self.linear_heads]

    model = _Labeler()
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ValueError(f"CheXbert: {str(checkpoint)!r} could not be read safely: {exc}") from exc
    state = state.get("model_state_dict", state) if isinstance(state, dict) else state
    state = {k.removeprefix("module."): v for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing:
        raise ValueError(f"CheXbert: {str(checkpoint)!r} does not match the model: missing {missing[:5]}")
    return tok, model.to(device).eval()


def chexbert_label_reports(
    texts: Sequence[str],
    *,
    checkpoint: str | Path | None,
    bert_path: str | Path | None,
    device: str = "cpu",
    batch_size: int = 16,
) -> Any:
    """One row per text, the 14 CheXpert observation columns, values 1.0 / 0.0 / -1.0 / NaN
    (CheXbert classes positive / negative / uncertain / blank; "No Finding" is 1.0 or NaN);
    returns a ``pandas.DataFrame`` in the same layout as :func:`label_reports`."""
    import pandas as pd
    import torch

    ckpt = require(checkpoint, "chexbert_checkpoint",
                    "the CheXbert checkpoint (chexbert.pth, or hf://org/name/chexbert.pth)")
    bert = require(bert_path, "chexbert_bert_path", "a bert-base-uncased folder or hub id")
    tok, model = build(bert, ckpt, device)
    rows: list[dict[str, float]] = []
    for start in range(0, len(texts), batch_size):
        chunk = [str(t).strip() for t in texts[start : start + batch_size]]
        enc = tok(chunk, padding=True, truncation=True, max_length=512, return_tensors="pt")
        with torch.inference_mode():
            heads = model(enc["input_ids"].to(device), enc["attention_mask"].to(device))
        classes = torch.stack([h.argmax(dim=1) for h in heads], dim=1).cpu().numpy()
        for i in range(len(chunk)):
            row = {}
            for j, obs in enumerate(CHEXBERT_ORDER):
                c = int(classes[i, j])
                row[obs] = (1.0 if c == 1 else np.nan) if obs == "No Finding" else _CLASS_TO_LABEL[c]
            rows.append(row)
    return pd.DataFrame(rows, columns=list(CHEXPERT_OBSERVATIONS), dtype=np.float64)
