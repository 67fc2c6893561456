"""The sample schema shared by datasets, models and metrics, and the collate functions.

A sample is a plain dict (MONAI style). Keys by task:

=================  ===========================================================================
``id``             str, unique in the dataset (always)
``image``          float tensor ``C×H×W`` (2D), ``C×D×H×W`` (3D), ``T×C×H×W`` (video clip), or a
                   list of them (multi-image VQA)
``label``          int (multi-class) or float multi-hot ``K`` (multi-label; NaN = unlabelled)
``mask``           integer label map with the spatial shape of ``image``
``question`` ...   ``question``, ``options``, ``answer``, ``answer_type`` for VQA
``report``         str, for report generation
``meta``           dict: ``patient_id``, ``study_id``, ``modality``, ``spacing`` (mm per spatial
                   axis, in array order), ``affine``, ``view``, subgroup attributes
=================  ===========================================================================
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "SAMPLE_KEYS",
    "SampleError",
    "validate_sample",
    "collate",
    "pad_collate",
    "decollate",
    "spatial_dims",
    "without_pixels",
    "pixels_wanted",
]

# False inside ``without_pixels()``: datasets built there are for a model that reads no pixel
_PIXELS: contextvars.ContextVar[bool] = contextvars.ContextVar("medimg_bench_pixels", default=True)


@contextlib.contextmanager
def without_pixels() -> Iterator[None]:
    """Datasets built inside are for a model that reads no pixel (``model=predictions``): their
    constructors check no image file (the manifest still names them; ids are still checked) and
    their samples carry ids, labels and targets without the input image (``dataset.pixels``)."""
    token = _PIXELS.set(False)
    try:
        yield
    finally:
        _PIXELS.reset(token)


def pixels_wanted() -> bool:
    """False inside :func:`without_pixels`: a loader checks and reads no input image file."""
    return _PIXELS.get()

SAMPLE_KEYS = (
    "id",
    "image",
    "label",
    "mask",
    "question",
    "options",
    "answer",
    "answer_type",
    "report",
    "meta",
)

# keys never stacked: kept as one Python list entry per sample
_LIST_KEYS = {"id", "meta", "question", "options", "answer", "answer_type", "report", "error"}


class SampleError(ValueError):
    """A sample (or the file it came from) is invalid. The message names both."""

    def __init__(self, message: str, *, sample_id: str | None = None, path: str | None = None):
        where = []
        if sample_id is not None:
            where.append(f"sample {sample_id!r}")
        if path is not None:
            where.append(f"file {str(path)!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
        self.sample_id = sample_id
        self.path = path


def spatial_dims(image: torch.Tensor) -> int:
    """Number of spatial axes of a channel-first image tensor (2 for ``C×H×W``, 3 for ``C×D×H×W``)."""
    return image.ndim - 1


def validate_sample(sample: Mapping[str, Any], *, task: str | None = None) -> None:
    """Raise :class:`SampleError` if ``sample`` breaks the schema; return None otherwise.

    ``task`` ("classification", "segmentation", "vqa", "report") adds the keys that task needs.
    """
    sid = sample.get("id")
    if not isinstance(sid, str) or not sid:
        raise SampleError(f"'id' must be a non-empty str, got {sid!r}")
    path = (sample.get("meta") or {}).get("path")

    def fail(msg: str) -> None:
        raise SampleError(msg, sample_id=sid, path=path)

    if "image" not in sample:
        fail("missing key 'image'")
    images = sample["image"] if isinstance(sample["image"], list) else [sample["image"]]
    for img in images:
        if not isinstance(img, torch.Tensor):
            fail(f"'image' must be a torch.Tensor, got {type(img).__name__}")
        if img.ndim not in (3, 4):
            fail(f"'image' must be C×H×W, C×D×H×W or T×C×H×W, got shape {tuple(img.shape)}")
        if not img.is_floating_point():
            fail(f"'image' must be floating point, got {img.dtype}")
    meta = sample.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        fail(f"'meta' must be a dict, got {type(meta).__name__}")
    if "mask" in sample and sample["mask"] is not None:
        mask = sample["mask"]
        img = images[0]
        if not isinstance(mask, torch.Tensor):
            fail(f"'mask' must be a torch.Tensor, got {type(mask).__name__}")
        if mask.is_floating_point():
            fail(f"'mask' must be an integer label map, got {mask.dtype}")
        mshape = tuple(mask.shape[1:]) if mask.ndim == img.ndim else tuple(mask.shape)
        if mshape != tuple(img.shape[1:]):
            fail(
                f"image/mask shape mismatch: image spatial shape {tuple(img.shape[1:])}, "
                f"mask shape {tuple(mask.shape)}"
            )
    spacing = (meta or {}).get("spacing")
    if spacing is not None:
        sp = list(spacing)
        nd = spatial_dims(images[0])
        if len(sp) != nd:
            fail(f"meta['spacing'] has {len(sp)} values for {nd} spatial axes")
        if any((not math.isfinite(float(s))) or float(s) <= 0 for s in sp):
            fail(f"meta['spacing'] must be positive and finite, got {sp}")
    if task == "classification" and "label" not in sample:
        fail("classification sample has no 'label'")
    if task == "segmentation" and sample.get("mask") is None:
        fail("segmentation sample has no 'mask'")
    if task == "vqa":
        for key in ("question", "answer_type"):
            if key not in sample:
                fail(f"VQA sample has no {key!r}")
    if task == "report" and "report" not in sample:
        fail("report sample has no 'report'")


def _as_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (bool, int, float)):
        return torch.as_tensor(value)
    try:
        import numpy as np

        if isinstance(value, np.ndarray | np.generic):
            return torch.as_tensor(value)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    return None


def collate(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Collate samples into a batch dict.

    Tensors (and numbers) of equal shape are stacked; tensors of different shapes (variable-size
    images) stay a list, one per sample; ``id``, ``meta`` and text fields are lists. A key present
    in only some samples becomes a list with ``None`` where it is missing.
    """
    if not samples:
        raise ValueError("collate() got an empty list of samples")
    keys: list[str] = []
    for s in samples:
        for k in s:
            if k not in keys:
                keys.append(k)
    batch: dict[str, Any] = {}
    for key in keys:
        values = [s.get(key) for s in samples]
        if key in _LIST_KEYS or any(v is None for v in values):
            batch[key] = list(values)
            continue
        tensors = [_as_tensor(v) for v in values]
        if any(t is None for t in tensors):
            batch[key] = list(values)
            continue
        shapes = {tuple(t.shape) for t in tensors}  # type: ignore[union-attr]
        batch[key] = torch.stack(tensors) if len(shapes) == 1 else list(tensors)  # type: ignore[arg-type]
    return batch


def pad_collate(
    samples: Sequence[Mapping[str, Any]], *, pad_value: float = 0.0, mask_pad_value: int = 0
) -> dict[str, Any]:
    """Collate with ``image``/``mask`` padded at the end of each spatial axis to the largest shape.

    Each sample's original spatial shape goes to ``meta['original_shape']`` so predictions can be
    cropped back; other keys follow :func:`collate`.
    """
    out = [dict(s) for s in samples]
    images = [s["image"] for s in out]
    if all(isinstance(i, torch.Tensor) for i in images) and len({i.ndim for i in images}) == 1:
        target = [max(i.shape[d] for i in images) for d in range(images[0].ndim)]
        for s in out:
            img = s["image"]
            s["meta"] = dict(s.get("meta") or {}, original_shape=tuple(img.shape[1:]))
            s["image"] = _pad_to(img, target, pad_value)
            if isinstance(s.get("mask"), torch.Tensor):
                m = s["mask"]
                mtarget = target if m.ndim == img.ndim else target[1:]
                s["mask"] = _pad_to(m, mtarget, mask_pad_value)
    return collate(out)


def _pad_to(t: torch.Tensor, shape: Sequence[int], value: float) -> torch.Tensor:
    pad: list[int] = []
    for d in reversed(range(t.ndim)):
        pad += [0, int(shape[d]) - t.shape[d]]
    if not any(pad):
        return t
    return torch.nn.functional.pad(t, pad, value=value)


def decollate(batch: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Inverse of :func:`collate`: a list of per-sample dicts (tensors are views, not copies)."""
    n = len(batch["id"]) if "id" in batch else None
    if n is None:
        raise ValueError("decollate() needs an 'id' key to know the batch size")
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim > 0 and value.shape[0] == n:
            items: Sequence[Any] = list(value.unbind(0))
        elif isinstance(value, list | tuple) and len(value) == n:
            items = value
        else:
            items = [value] * n
        for i in range(n):
            out[i][key] = items[i]
    return out
