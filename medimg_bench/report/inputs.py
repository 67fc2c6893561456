"""The input images of a few samples, read again for the page through the dataset that
``manifest.json``'s resolved config describes (the model is never run again). Used for the
classification errors, VQA questions and generated reports; a segmentation run keeps its own
slices (``worst/``, :mod:`medimg_bench.tasks.worst`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from medimg_bench.report.images import thumbnail, to_display
from medimg_bench.report.rundir import RunData

__all__ = ["input_images", "MAX_LOAD_ERRORS"]

#: after this many samples that fail to load, stop trying (the data is probably gone)
MAX_LOAD_ERRORS = 3


def _images_of(sample: dict[str, Any]) -> list[Any]:
    image = sample.get("image")
    if image is None:
        return []
    return list(image) if isinstance(image, (list, tuple)) else [image]


def _dataset(run: RunData) -> tuple[Any, str | None]:
    from medimg_bench.builders import build_dataset

    dcfg = run.config.get("dataset")
    if not isinstance(dcfg, dict) or not dcfg.get("name"):
        return None, "manifest.json holds no dataset config, so no input image can be shown"
    try:
        return build_dataset(dcfg, dcfg.get("split")), None
    except Exception as exc:  # the data moved, a root relative to another folder…: say so, show the rest
        return None, (f"input images not shown: dataset {dcfg.get('name')!r} could not be opened again from "
                      f"manifest.json's config ({type(exc).__name__}: {exc})")


def input_images(run: RunData, ids: Sequence[str], *, max_side: int = 256) -> tuple[dict[str, list[np.ndarray]], list[str]]:
    """``{id: [uint8 thumbnail, …]}`` for the samples ``ids`` (several for multi-image samples)
    and notes on what could not be shown and why."""
    if not ids:
        return {}, []
    ds, problem = _dataset(run)
    if ds is None:
        return {}, [problem or "no dataset"]
    manifest = getattr(ds, "manifest", None)
    if manifest is None or "id" not in manifest:
        return {}, [f"dataset {run.dataset!r} has no manifest of ids, so its images cannot be looked up"]
    position = {str(s): i for i, s in enumerate(manifest["id"].astype(str).tolist())}
    out: dict[str, list[np.ndarray]] = {}
    notes: list[str] = []
    errors = 0
    for sid in ids:
        i = position.get(str(sid))
        if i is None:
            notes.append(f"{sid}: not in the dataset as rebuilt now (split or filter changed?)")
            continue
        try:
            pictures = [thumbnail(to_display(x), max_side) for x in _images_of(ds[i])]
        except Exception as exc:  # one unreadable file: that sample has no picture
            errors += 1
            notes.append(f"{sid}: image not readable now ({type(exc).__name__}: {exc})")
            if errors >= MAX_LOAD_ERRORS and not out:
                notes.append(f"stopped after {errors} samples failed to load")
                break
            continue
        if pictures:
            out[str(sid)] = pictures
    return out, notes
