"""Tiny randomly initialised BERTs in ``save_pretrained`` layout, shared by the text-metric tests:
a plain one (BERTScore) and one with CheXbert's heads in CheXbert's checkpoint format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORDS = "no acute process the lungs are clear small left pleural effusion heart size normal mild edema".split()


def _write_tokenizer(path: Path, words: list[str]) -> int:
    """Writes a word-level BERT tokenizer over ``words`` (after the five special tokens) to
    ``path``; returns the vocabulary size."""
    from transformers import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(path / "vocab.txt"), model_max_length=64).save_pretrained(str(path))
    return len(vocab)


def _config(vocab_size: int, layers: int) -> Any:
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=64)


def write_tiny_bert(path: Path, words: list[str] = WORDS) -> Path:
    """Writes a 2-layer, 16-wide BERT (seed 0) and its word-level tokenizer to ``path``."""
    import torch
    from transformers import BertModel

    cfg = _config(_write_tokenizer(path, words), layers=2)
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(str(path))
    return path


def write_tiny_chexbert(path: Path, words: list[str], *, seed: int) -> tuple[Path, Any, list[Any]]:
    """Writes a 1-layer, 16-wide BERT (``seed``) with CheXbert's 14 linear heads (13 four-way,
    then one two-way, drawn after the BERT) as CheXbert's ``chexbert.pth`` (``module.bert.*``,
    ``module.linear_heads.{i}.*``), its config and word-level tokenizer to ``path``. Returns the
    path, the BERT (eval mode) and the heads."""
    import torch
    from transformers import BertModel

    cfg = _config(_write_tokenizer(path, words), layers=1)
    cfg.save_pretrained(str(path))
    torch.manual_seed(seed)
    bert = BertModel(cfg).eval()
    heads = [torch.nn.Linear(16, 4 if i < 13 else 2) for i in range(14)]
    state = {f"module.bert.{k}": v for k, v in bert.state_dict().items()}
    for i, head in enumerate(heads):
        state[f"module.linear_heads.{i}.weight"] = head.weight.detach()
        state[f"module.linear_heads.{i}.bias"] = head.bias.detach()
    torch.save({"model_state_dict": state}, path / "chexbert.pth")
    return path, bert, heads
