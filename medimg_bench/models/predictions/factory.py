"""The registered ``predictions`` model: picks the reader for what ``root`` holds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.predictions.answers import AnswersFromFile
from medimg_bench.models.predictions.label_maps import LabelMapsFromFolder
from medimg_bench.models.predictions.lookup import _find
from medimg_bench.models.predictions.scores import ScoresFromFile
from medimg_bench.registry import register_model

__all__ = ["predictions"]


@register_model("predictions", tags=("predictions",))
def predictions(
    *,
    root: str | Path,
    kind: str = "auto",
    classes: Sequence[str] | None = None,
    id_column: str = "id",
    text_column: str = "text",
    num_classes: int | None = None,
    in_channels: int | None = None,
) -> Any:
    """Predictions already on disk (see the module docstring). ``kind``: ``auto`` (from the
    files found), ``classification``, ``segmentation`` or ``answers``."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"predictions: {str(root)!r} (option `model.options.root`) does not exist")
    if kind == "auto" and root.is_file():
        kind = {".csv": "classification", ".parquet": "classification", ".jsonl": "answers"}.get(root.suffix, "")
        if not kind:
            raise ValueError(f"predictions: {str(root)!r} is not a .csv, .parquet or .jsonl file")
    if kind == "auto":
        if _find(root, ["predictions.csv", "predictions.parquet"]):
            kind = "classification"
        elif _find(root, ["predictions.jsonl"]):
            kind = "answers"
        elif root.is_dir() and (any(root.glob("*.nii.gz")) or any(root.glob("*.nii"))):
            kind = "segmentation"
        else:
            raise ValueError(f"predictions: nothing recognised in {str(root)!r}: expected a CSV/Parquet of "
                             "scores, a JSONL of answers or a folder of <id>.nii.gz label maps")
    if kind == "classification":
        path = _find(root, ["predictions.csv", "predictions.parquet"])
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.csv/.parquet in {str(root)!r}")
        return ScoresFromFile(path, classes=classes, id_column=id_column, num_classes=num_classes)
    if kind == "answers":
        path = _find(root, ["predictions.jsonl"])
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.jsonl in {str(root)!r}")
        return AnswersFromFile(path, text_column=text_column, id_column=id_column)
    if kind == "segmentation":
        return LabelMapsFromFolder(root)
    raise ValueError(f"predictions: kind must be auto, classification, segmentation or answers, got {kind!r}")
