"""The registered ``predictions`` model: picks the reader for what ``root`` holds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medimg_bench.models.predictions.answers import AnswersFromFile, looks_like_text_table
from medimg_bench.models.predictions.frames import (
    FramePredictions,
    looks_like_frame_table,
    phase_txt_files,
)
from medimg_bench.models.predictions.label_maps import LabelMapsFromFolder
from medimg_bench.models.predictions.lookup import find
from medimg_bench.models.predictions.maps import MapsFromFolder
from medimg_bench.models.predictions.recon import ReconsFromFolder
from medimg_bench.models.predictions.scores import ScoresFromFile
from medimg_bench.registry import register_model

__all__ = ["predictions"]


def _detect_kind(root: Path, tables: list[str]) -> str:
    """What ``root`` holds, from the files found (``kind=auto``)."""
    path = find(root, tables)
    if path is not None and path.suffix not in (".csv", ".parquet", ".jsonl"):
        raise ValueError(f"predictions: {str(root)!r} is not a .csv, .parquet or .jsonl file")
    if path is not None:
        return ("answers" if path.suffix == ".jsonl" or looks_like_text_table(path)
                else "frames" if looks_like_frame_table(path) else "classification")
    if phase_txt_files(root):
        return "frames"
    if root.is_dir() and any(any(root.glob(f"*{ext}")) for ext in (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd", ".dcm")):
        return "segmentation"
    if root.is_dir() and any(root.glob("*.h5")):
        return "reconstruction"
    if root.is_dir() and (any(root.glob("*.png")) or any(root.glob("*.npy"))):
        return "maps"
    raise ValueError(f"predictions: nothing recognised in {str(root)!r}: expected a CSV/Parquet of "
                     "scores (or per-frame phases), a CSV/Parquet/JSONL of answers, a folder of "
                     "<id>.nii.gz label maps, of <id>.png / .npy maps or of <video>-phase.txt")


@register_model("predictions", tags=("predictions",))
def predictions(
    *,
    root: str | Path,
    kind: str = "auto",
    classes: Sequence[str] | None = None,
    id_column: str | None = None,
    text_column: str | None = None,
    num_classes: int | None = None,
    in_channels: int | None = None,
    threshold: float = 0.5,
    resize: bool = False,
    scores: str = "probabilities",
    multilabel: bool | None = None,
    circular: bool = False,
    on_blank: str = "error",
    segment_map: dict[Any, Any] | None = None,
    encoding: str = "auto",
    scale: float | str | None = None,
    foreground: float | None = None,
    index_base: int | str = "auto",
) -> Any:
    """Predictions already on disk (see the package docstring). ``kind``: ``auto`` (from the
    files found: a table with an id and a text column is answers, other tables class scores),
    ``classification``, ``frames`` (per-frame phases: a table with ``video`` and ``frame`` /
    ``time`` columns, or a folder of ``<video>-phase.txt``: :mod:`.frames`), ``segmentation``,
    ``maps`` (2D PNG / .npy maps decoded under ``encoding`` — ``auto``, ``binary`` (``foreground``),
    ``probability`` (``scale``: 255, 65535, ``percent``), ``logits`` —; ``threshold`` makes their
    ``labels`` from the probabilities, ``resize`` allows maps of another size), ``reconstruction`` (``<id>.h5`` fastMRI submission files or
    ``<id>.npy`` volumes) or ``answers`` (alias ``reports``). ``in_channels`` is not used (stored
    predictions need no pixels). Score tables:
    ``scores`` (``probabilities`` or ``logits``), ``multilabel`` (the task's flag: sigmoid or softmax
    of logits, and whether multi-class rows must sum to 1). Answers: ``circular`` (the task's
    CircularEval flag: refused unless the file holds every rotation's answer), ``on_blank``
    (``error`` or ``keep`` null / empty / "None" answers). Label maps: ``segment_map`` (DICOM SEG
    segment / RTSTRUCT ROI number → class name or index; default: matched to the dataset's
    classes by their label). Per-frame phases: ``index_base`` (``auto``: phase numbers 0- or 1-based
    by their values, ambiguous values refused; ``0`` or ``1``). Every table's columns are found
    by name (:mod:`medimg_bench.datasets.columns`)."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"predictions: {str(root)!r} (option `model.options.root`) does not exist")
    kind = "answers" if kind == "reports" else kind
    tables = ["predictions.csv", "predictions.parquet", "predictions.jsonl"]
    if kind == "auto":
        kind = _detect_kind(root, tables)
    if kind == "classification":
        path = find(root, tables[:2])
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.csv/.parquet in {str(root)!r}")
        return ScoresFromFile(path, classes=classes, id_column=id_column, num_classes=num_classes,
                              scores=scores, multilabel=multilabel)
    if kind == "frames":
        path = find(root, tables[:2]) or (root if phase_txt_files(root) else None)
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.csv/.parquet or *-phase.txt in {str(root)!r}")
        return FramePredictions(path, classes=classes, num_classes=num_classes, index_base=index_base)
    if kind == "answers":
        path = find(root, tables[::-1])
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.jsonl/.csv/.parquet in {str(root)!r}")
        return AnswersFromFile(path, text_column=text_column, id_column=id_column, circular=circular,
                               on_blank=on_blank)
    if kind == "segmentation":
        return LabelMapsFromFolder(root, segment_map=segment_map)
    if kind == "reconstruction":
        return ReconsFromFolder(root)
    if kind == "maps":
        return MapsFromFolder(root, threshold=threshold, resize=resize, encoding=encoding, scale=scale,
                              foreground=foreground)
    raise ValueError(f"predictions: kind must be auto, classification, frames, segmentation, maps, reconstruction, "
                     f"answers or reports, got {kind!r}")
