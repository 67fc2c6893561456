"""CLIP zero-shot classification with open_clip: class prompts from templates, embeddings averaged
per class (as open_clip's zero-shot code builds its classifier), cosine similarity × the model's
logit scale → class probabilities the classification task and metrics take as they are.

Multi-class: softmax over the classes. Multi-label (findings): per class a softmax over a
positive and a negative prompt set ("{c}" vs "no {c}"), the probability of the positive.
Templates live in ``configs/clip_templates/<name>.yaml`` (``positive:`` / ``negative:`` lists
with ``{c}`` for the class name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from medimg_bench.models.base import ModelAdapter
from medimg_bench.models.preprocess import (
    OPENAI_MEAN,
    OPENAI_STD,
    prepare_images,
    require_local_path,
)
from medimg_bench.registry import register_model

__all__ = ["ClipZeroShot", "build_open_clip", "clip_zero_shot", "load_templates"]


def load_templates(templates: str | Mapping[str, Any] | Sequence[str]) -> dict[str, list[str]]:
    """``{"positive": [...], "negative": [...]}`` from a template set name (a file in
    ``configs/clip_templates/``), a YAML path, a mapping or a list of positive templates."""
    if isinstance(templates, (list, tuple)):
        data: Any = {"positive": list(templates)}
    elif isinstance(templates, Mapping):
        data = dict(templates)
    else:
        import yaml

        from medimg_bench.resources import config_dir

        path = Path(str(templates))
        if not path.suffix:
            path = config_dir() / "clip_templates" / f"{templates}.yaml"
        if not path.exists():
            raise FileNotFoundError(f"CLIP template set {str(templates)!r} not found (looked for {path})")
        data = yaml.safe_load(path.read_text())
    out = {k: [str(t) for t in (data.get(k) or [])] for k in ("positive", "negative")}
    if not out["positive"]:
        raise ValueError(f"CLIP templates {templates!r}: no positive templates")
    for t in out["positive"] + out["negative"]:
        if "{c}" not in t:
            raise ValueError(f"CLIP template {t!r} has no '{{c}}' placeholder for the class name")
    return out


def build_open_clip(
    *, model_name: str = "ViT-B-32", pretrained: str | None = None, model_cfg: Mapping[str, Any] | None = None,
    precision: str = "fp32", revision: str | None = None, offline: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """An open_clip model and ``info`` (image size, mean, std, tokenizer, identity, weight sources).

    As open_clip takes them: ``model_name="hf-hub:org/name"`` (BiomedCLIP and the like: config,
    weights and tokenizer from the repository), or a built-in ``model_name`` with ``pretrained``
    an open_clip tag (``laion2b_s34b_b88k``), a hub id, or a local weights file
    (``.safetensors``/``.bin``/``.pt``) / folder. Hub files are downloaded through
    ``huggingface_hub`` into its cache (``revision`` pins them; ``offline=True`` or
    ``HF_HUB_OFFLINE=1`` reads the cache only; see :mod:`medimg_bench.models.weights`).
    ``model_cfg`` (``embed_dim``, ``vision_cfg``, ``text_cfg``) builds a custom architecture
    instead of ``model_name`` (randomly initialised unless ``pretrained`` is a local file)."""
    import open_clip

    from medimg_bench.models.weights import open_clip_source

    if model_cfg is not None:
        path = Path(require_local_path(pretrained, "model.options.pretrained")) if pretrained else None
        if path is not None and path.is_dir():
            from medimg_bench.models.weights import weights_file

            path = weights_file(path)
        from medimg_bench.hub import local_weights_record

        sources = [local_weights_record(path)] if path is not None else []
        source_name = model_name
    else:
        source_name, weights, sources = open_clip_source(model_name, pretrained, revision=revision,
                                                         offline=offline)
        path = Path(weights) if weights else None
    if model_cfg is not None:
        cfg = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in model_cfg.items()}
        model = open_clip.CLIP(**cfg)
        if path is not None:
            from medimg_bench.models.base import load_checkpoint

            load_checkpoint(model, path)
        context_length = int(cfg.get("text_cfg", {}).get("context_length", 77))
        image_size = int(cfg.get("vision_cfg", {}).get("image_size", 224))
        mean, std = OPENAI_MEAN, OPENAI_STD
        tokenizer = open_clip.SimpleTokenizer(context_length=context_length)
    else:
        from_dir = source_name.startswith("local-dir:")
        model = open_clip.create_model(source_name, pretrained=str(path) if path else None, precision=precision,
                                       load_weights=path is not None or from_dir)
        tokenizer = open_clip.get_tokenizer(source_name)
        pre = getattr(model.visual, "preprocess_cfg", {}) or {}
        size = pre.get("size", getattr(model.visual, "image_size", 224))
        image_size = int(size[0] if isinstance(size, (tuple, list)) else size)
        mean = tuple(pre.get("mean", OPENAI_MEAN))
        std = tuple(pre.get("std", OPENAI_STD))
    model.eval()
    from medimg_bench.models.weights import sources_identity

    identity = {"model_name": None if model_cfg is not None else model_name,
                "model_cfg": dict(model_cfg) if model_cfg is not None else None,
                "pretrained": str(pretrained) if pretrained else None, "precision": precision}
    if sources_identity(sources):
        identity["hub"] = sources_identity(sources)
    return model, {"image_size": image_size, "mean": list(mean), "std": list(std), "tokenizer": tokenizer,
                   "identity": identity, "weight_sources": sources}


class ClipZeroShot(ModelAdapter):
    """Zero-shot classifier: ``predict`` returns ``logits`` and ``probs`` (see module docstring)."""

    task = "classification"

    def __init__(self, model: Any, info: Mapping[str, Any], *, templates: Mapping[str, list[str]],
                 classes: Sequence[str] | None = None, class_prompts: Mapping[str, str] | None = None,
                 multilabel: bool = False, name: str = "clip") -> None:
        super().__init__(model, name=name)
        self.info = dict(info)
        self.templates = {k: list(v) for k, v in templates.items()}
        self.class_prompts = dict(class_prompts or {})
        self.multilabel = multilabel
        if multilabel and not self.templates.get("negative"):
            raise ValueError("multi-label zero-shot needs negative templates ('no {c}') in the template set")
        self.classes: list[str] | None = None
        self._weights: torch.Tensor | None = None
        if classes:
            self.set_classes(classes)

    def prediction_options(self) -> dict[str, Any]:
        return {"templates": self.templates, "classes": self.classes, "class_prompts": self.class_prompts,
                "multilabel": self.multilabel, "image_size": self.info["image_size"]}

    def set_classes(self, classes: Sequence[str]) -> None:
        """Build the text classifier for ``classes`` (names; ``class_prompts`` may rename them)."""
        self.classes = [str(c) for c in classes]
        self._weights = None

    def _class_text(self, c: str) -> str:
        return self.class_prompts.get(c, c.replace("_", " "))

    @torch.inference_mode()
    def _embed_texts(self, texts: list[str]) -> torch.Tensor:
        tokens = self.info["tokenizer"](texts).to(self.device)
        emb = self.module.encode_text(tokens).float()
        return emb / emb.norm(dim=-1, keepdim=True)

    def class_weights(self) -> torch.Tensor:
        """``(D, K)`` (multi-class) or ``(D, 2K)`` (multi-label: positive then negative per class)
        unit text embeddings, each the normalised mean over the templates."""
        if self.classes is None:
            raise ValueError(f"{self.name}: no class names; pass classes= (the zero_shot protocol sets "
                             "them from the dataset)")
        if self._weights is None or self._weights.device != self.device:
            cols = []
            kinds = ["positive", "negative"] if self.multilabel else ["positive"]
            for c in self.classes:
                for kind in kinds:
                    e = self._embed_texts([t.format(c=self._class_text(c)) for t in self.templates[kind]]).mean(0)
                    cols.append(e / e.norm())
            self._weights = torch.stack(cols, dim=1)
        return self._weights

    def forward_batch(self, batch: dict[str, Any]) -> torch.Tensor:
        x = prepare_images(self.images(batch), size=self.info["image_size"], mean=self.info["mean"],
                           std=self.info["std"], channels=3)
        with torch.inference_mode():
            img = self.module.encode_image(x).float()
        img = img / img.norm(dim=-1, keepdim=True)
        scale = float(self.module.logit_scale.detach().exp()) if hasattr(self.module, "logit_scale") else 100.0
        return scale * img @ self.class_weights()

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        logits = self.forward_batch(batch)
        if self.multilabel:
            pair = logits.view(logits.shape[0], -1, 2)
            probs = torch.softmax(pair, dim=-1)[..., 0]
            logits = pair[..., 0] - pair[..., 1]
        else:
            probs = torch.softmax(logits, dim=1)
        return {"logits": logits, "probs": probs}


@register_model("clip", tags=("classification", "zero_shot", "vision_language"))
def clip_zero_shot(
    *,
    model_name: str = "ViT-B-32",
    pretrained: str | None = None,
    model_cfg: Mapping[str, Any] | None = None,
    templates: str | Mapping[str, Any] | Sequence[str] = "default",
    classes: Sequence[str] | None = None,
    class_prompts: Mapping[str, str] | None = None,
    multilabel: bool = False,
    precision: str = "fp32",
    revision: str | None = None,
    offline: bool = False,
    num_classes: int | None = None,
    in_channels: int | None = None,
) -> ClipZeroShot:
    """Any open_clip model (``model_name`` / ``pretrained`` as open_clip takes them: a tag, an
    ``hf-hub:`` name, a local file; see :func:`build_open_clip`) as a zero-shot classifier. ``num_classes`` / ``in_channels`` (filled in by the pipeline) are checked
    against ``classes`` when both are given; images of any channel count are mapped to RGB."""
    model, info = build_open_clip(model_name=model_name, pretrained=pretrained, model_cfg=model_cfg,
                                  precision=precision, revision=revision, offline=offline)
    adapter = ClipZeroShot(model, info, templates=load_templates(templates), classes=classes,
                           class_prompts=class_prompts, multilabel=multilabel,
                           name=f"clip/{model_name if model_cfg is None else 'custom'}")
    if classes and num_classes is not None and len(classes) != num_classes:
        raise ValueError(f"clip: {len(classes)} class names for a dataset with {num_classes} classes")
    adapter.config = {"factory": "clip", **info["identity"]}
    adapter.weight_sources = info["weight_sources"]
    return adapter
