"""A tiny randomly initialised vision-language model, built offline, for tests and the demo.

:func:`build_tiny_vlm` writes a LLaVA model (a 2-layer CLIP vision tower on 32x32 images and a
2-layer Llama with hidden size 32) plus its processor (a WordPiece tokenizer over ~200 medical and
VQA words and single characters, a chat template) to a folder with ``save_pretrained``. Nothing is
downloaded. Its answers are random words: it exercises every code path and scores near chance.

The ``tiny_vlm`` model builds it once into ``$MEDIMG_BENCH_CACHE/tiny_vlm`` (else
``~/.cache/medimg_bench/tiny_vlm``; a file lock and an atomic rename make concurrent first runs
safe) and loads it through the ``hf_vlm`` backend.
"""

from __future__ import annotations

import os
import string
from pathlib import Path
from typing import Any

from medimg_bench.models.vlm.hf import HFVLMAdapter
from medimg_bench.registry import register_model

__all__ = ["build_tiny_vlm", "tiny_vlm_dir", "TinyVLM", "TINY_VLM_VERSION"]

TINY_VLM_VERSION = "v1"

_WORDS = """
yes no not none normal abnormal the a an of is are in on at to and or with without there this that
what which where how many much does do is it its image images scan picture shows show seen visible
left right upper lower middle both side bilateral central anterior posterior lateral medial
lung lungs heart chest liver kidney kidneys brain spleen bowel colon stomach bladder bone bones
spine rib ribs skull pelvis abdomen breast thyroid pancreas gallbladder aorta trachea diaphragm
ct mri x-ray xray ultrasound pet modality plane axial coronal sagittal contrast t1 t2 flair
mass lesion nodule tumor cancer effusion pneumonia pneumothorax edema fracture cyst hemorrhage
infarct atelectasis cardiomegaly consolidation opacity calcification enlarged small large
organ organs system answer question option report finding findings impression patient
one two three four five six seven eight nine ten zero first second
a b c d e f
""".split()
_SPECIAL = ["[PAD]", "[UNK]", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<image>"]
_CHARS = list(string.ascii_lowercase + string.digits + string.punctuation)

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for tok in _SPECIAL + _CHARS + ["##" + c for c in _CHARS] + _WORDS:
        vocab.setdefault(tok, len(vocab))
    tk = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.decoder = decoders.WordPiece(prefix="##")
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="[UNK]", pad_token="[PAD]", eos_token="<|end|>",
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>", "<image>"],
        padding_side="left", model_max_length=2048,
    )


def build_tiny_vlm(path: str | os.PathLike[str], *, seed: int = 0) -> Path:
    """Build the tiny random LLaVA model and processor into ``path`` (created); returns it.

    The same ``seed`` gives the same weights on every machine (built on CPU in float32).
    """
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        GenerationConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer()
    image_size, patch = 32, 8
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}),
        tokenizer=tok, patch_size=patch, vision_feature_select_strategy="default",
        num_additional_image_tokens=1, chat_template=CHAT_TEMPLATE,
    )
    ids = tok.convert_tokens_to_ids
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            image_size=image_size, patch_size=patch, projection_dim=32),
        text_config=LlamaConfig(
            vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
            pad_token_id=ids("[PAD]"), eos_token_id=ids("<|end|>"), bos_token_id=None,
            initializer_range=0.2, tie_word_embeddings=False),
        image_token_index=ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1, projector_hidden_act="gelu",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlavaForConditionalGeneration(config).eval()
    suppress = [ids(t) for t in ("[PAD]", "[UNK]", "<|system|>", "<|user|>", "<|assistant|>", "<image>")]
    model.generation_config = GenerationConfig(
        eos_token_id=ids("<|end|>"), pad_token_id=ids("[PAD]"), do_sample=False,
        suppress_tokens=suppress)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    (out / "TINY_VLM.txt").write_text(
        f"medimg_bench tiny random VLM {TINY_VLM_VERSION}, seed {seed}: not a trained model.\n")
    return out


def tiny_vlm_dir(*, seed: int = 0, root: str | os.PathLike[str] | None = None) -> Path:
    """The built tiny model's folder under ``root`` (default ``$MEDIMG_BENCH_CACHE`` or
    ``~/.cache/medimg_bench``), building it first if needed. Safe when several processes race:
    one builds under a file lock into a temporary folder renamed into place."""
    from medimg_bench._fs import locked_materialize

    base = Path(root) if root is not None else Path(
        os.environ.get("MEDIMG_BENCH_CACHE") or Path.home() / ".cache" / "medimg_bench")
    target = base / "tiny_vlm" / f"{TINY_VLM_VERSION}-seed{int(seed)}"
    return locked_materialize(target, lambda tmp: build_tiny_vlm(tmp, seed=seed),
                              is_complete=lambda folder: (folder / "TINY_VLM.txt").exists(), timeout=600)


@register_model("tiny_vlm", tags=("generative", "vlm", "hf", "demo"))
class TinyVLM(HFVLMAdapter):
    """The tiny random LLaVA (built offline on first use) through the ``hf_vlm`` backend."""

    NEUTRAL_PARAMS = {  # noqa: RUF012 - read only
        "seed": None,  # picks the tiny model's weights: not the generation seed hf_vlm leaves neutral
        "root": "where the tiny model is written: the content of its files is in the identity",
    }

    def __init__(self, *, seed: int = 0, root: str | None = None, batch_size: int = 8,
                 max_new_tokens: int = 16, name: str = "tiny_vlm", **options: Any) -> None:
        options.pop("path", None)
        super().__init__(path=str(tiny_vlm_dir(seed=seed, root=root)), batch_size=batch_size,
                         max_new_tokens=max_new_tokens, name=name, **options)
