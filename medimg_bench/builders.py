"""Build registered components from config nodes (the ``dataset`` and ``model`` nodes of a
composed config, as plain dicts).

A core module like the registry it calls: the configuration layer (``runs``) and the protocols
both build through it, so neither imports the other. Model shape comes from the data:
``num_classes`` / ``in_channels`` left ``null`` are taken from the dataset's class list and its
first readable sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["build_dataset", "build_model", "infer_channels", "model_reads_pixels"]


def build_dataset(dcfg: Mapping[str, Any], split: str | None, *, pixels: bool = True) -> Any:
    """Create the dataset described by a ``dataset`` config node for ``split``; ``pixels=False``:
    for a model that reads no pixel (:func:`model_reads_pixels`), built inside
    :func:`medimg_bench.sample.without_pixels` (no image file checked or read)."""
    import contextlib

    from medimg_bench.registry import create_dataset
    from medimg_bench.sample import without_pixels

    kwargs = dict(dcfg.get("options") or {})
    if dcfg.get("root") is not None:
        kwargs["root"] = dcfg["root"]
    with contextlib.nullcontext() if pixels else without_pixels():
        return create_dataset(dcfg["name"], split=split, **kwargs)


def model_reads_pixels(mcfg: Mapping[str, Any]) -> bool:
    """False for a model registered with the ``predictions`` tag (stored predictions: the
    dataset's input images are never read)."""
    from medimg_bench.registry import MODELS

    return "predictions" not in MODELS.entry(mcfg["name"]).tags


_NULL_IS_A_VALUE = frozenset({"api_key_env"})


def build_model(mcfg: Mapping[str, Any], dataset: Any) -> Any:
    """Create the model of a ``model`` config node, its head and input shaped by ``dataset``."""
    from medimg_bench.registry import MODELS, create_model

    options = dict(mcfg.get("options") or {})
    if "generative" not in MODELS.entry(mcfg["name"]).tags:  # prompts, not class heads or channels
        if options.get("num_classes") is None and getattr(dataset, "classes", None):
            options["num_classes"] = len(dataset.classes)
        if "multilabel" in options and options["multilabel"] is None and getattr(dataset, "multilabel", None) is not None:
            options["multilabel"] = bool(dataset.multilabel)  # sigmoid or softmax, as the dataset's labels
        stored = "predictions" in MODELS.entry(mcfg["name"]).tags  # stored predictions read no pixels
        if options.get("in_channels") is None and len(dataset) and not stored:
            options["in_channels"] = infer_channels(dataset)
    # null drops an option (the adapter's default applies), except where null is itself a choice:
    # api_key_env=null means "send no key", as =none does
    model = create_model(mcfg["name"], **{k: v for k, v in options.items()
                                          if v is not None or k in _NULL_IS_A_VALUE})
    return _checked_ids(model, dataset)


def _checked_ids(model: Any, dataset: Any) -> Any:
    """Let a model that looks predictions up by id (model=predictions) see the dataset (class
    names, label count) and warn about unknown ids."""
    manifest = getattr(dataset, "manifest", None)
    if getattr(model, "needs_pixels", True) is False and callable(getattr(dataset, "skip_pixels", None)):
        dataset.skip_pixels()  # the adapter declares it reads no pixel (stored predictions)
    if hasattr(model, "bind_dataset"):  # model=predictions: columns matched to the classes, values checked;
        # stored answers: the dataset may skip its images
        model.bind_dataset(dataset)
    if hasattr(model, "check_ids") and manifest is not None and "id" in manifest:
        model.check_ids(list(manifest["id"]))
        if callable(getattr(model, "unknown_ids", None)) and callable(getattr(dataset, "exclude", None)):
            for sid in model.unknown_ids(list(manifest["id"])):  # counted and shown, not silent
                dataset.exclude(sid, file=getattr(model, "source", None),
                                reason="a stored prediction for an id the dataset does not have (not scored)")
    return model


def infer_channels(dataset: Any, tries: int = 20) -> int:
    """Channels of the first readable sample (a bad first file must not stop the run)."""
    errors = []
    for i in range(min(tries, len(dataset))):
        try:
            image = dataset[i]["image"]
        except Exception as exc:  # recorded as a failed sample later by the engine
            errors.append(str(exc))
            continue
        return int((image[0] if isinstance(image, list) else image).shape[0])
    raise ValueError(f"cannot infer in_channels: the first {len(errors)} samples failed to load: {errors[:3]}")
