"""A tiny randomly initialised BERT in ``save_pretrained`` layout, shared by the text-metric tests."""

from __future__ import annotations

from pathlib import Path

WORDS = "no acute process the lungs are clear small left pleural effusion heart size normal mild edema".split()


def write_tiny_bert(path: Path, words: list[str] = WORDS) -> Path:
    """Writes a 2-layer, 16-wide BERT (seed 0) and its word-level tokenizer to ``path``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(path / "vocab.txt"), model_max_length=64).save_pretrained(str(path))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(str(path))
    return path
