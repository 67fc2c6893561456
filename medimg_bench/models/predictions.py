"""Score predictions that already exist (``model=predictions model.options.root=...``): another
tool's outputs are looked up by sample id and go through this package's metrics and conventions.

* classification scores: a CSV or Parquet file (``root`` itself, or ``predictions.csv`` /
  ``predictions.parquet`` in the folder ``root``) with an ``id`` column and one column per class
  (``classes`` picks and orders them; default: every other column, in file order);
* segmentation label maps: a folder of NIfTI files named ``<id>.nii.gz`` (or ``.nii``), checked
  against the image grid with the loaders' rule (:mod:`medimg_bench.datasets.grid`: flips and
  axis order re-oriented, anything else a per-sample error naming both files);
* VQA answers or generated reports: a CSV, Parquet or JSONL file (``root`` itself, or
  ``predictions.jsonl`` / ``.csv`` / ``.parquet``) with an id and a text column (found by the names
  report-generation repositories commit: ``dicom_id,report``, ``study_id,report``, ``id,text``...;
  or ``id_column`` / ``text_column``), served through the generative protocol (``generate``).
  Such a run reads no pixels: the dataset is told to skip its images.

A prediction missing for a sample fails that sample with its id (a missed case never vanishes
from the mean). Predictions for ids the dataset does not have are counted and logged once, when
the run first asks for a prediction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter
from medimg_bench.registry import register_model

__all__ = ["ScoresFromFile", "LabelMapsFromFolder", "AnswersFromFile", "predictions"]

log = logging.getLogger(__name__)


class _Lookup:
    """Shared parts: ``to``/``eval``/``train`` for the engine, identity for checkpoints."""

    name = "predictions"

    def __init__(self, source: Path) -> None:
        self.source = source
        self.device = torch.device("cpu")
        self.module = torch.nn.Identity()  # the engine counts parameters in reprs; there are none

    def to(self, device: Any) -> _Lookup:
        self.device = torch.device(device)
        return self

    def eval(self) -> _Lookup:
        return self

    def train(self, mode: bool = True) -> _Lookup:
        return self

    def parameters(self) -> Any:
        return iter(())

    def fingerprint(self) -> dict[str, Any]:
        """The predictions file(s): path, size and modification time (a changed file is another model)."""
        files = [self.source] if self.source.is_file() else sorted(self.source.glob("*"))
        return {"kind": type(self).__name__, "source": str(self.source),
                "files": [(p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in files if p.is_file()]}

    def _missing(self, sid: str) -> KeyError:
        return KeyError(f"no prediction for sample {sid!r} in {str(self.source)!r}")

    def _known_ids(self) -> set[str]:
        if hasattr(self, "scores"):
            return set(self.scores)
        return {p.name.removesuffix(".gz").removesuffix(".nii") for p in self.source.glob("*.nii*")}

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about predictions whose id the dataset does not have; returns their count."""
        return _warn_unknown(self._known_ids(), ids, self.source)


class ScoresFromFile(_Lookup):
    """Class scores from a table: ``predict(batch) -> {"probs", "logits"}`` (logits = scores)."""

    task = "classification"

    def __init__(self, path: Path, *, classes: Sequence[str] | None, id_column: str = "id",
                 num_classes: int | None = None) -> None:
        import pandas as pd

        super().__init__(path)
        table = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype={id_column: str})
        if id_column not in table.columns:
            raise ValueError(f"predictions {str(path)!r}: no {id_column!r} column; columns are {list(table.columns)}")
        cols = list(classes) if classes else [c for c in table.columns if c != id_column]
        missing = [c for c in cols if c not in table.columns]
        if missing:
            raise ValueError(f"predictions {str(path)!r}: no column(s) {missing} for the classes")
        if num_classes is not None and len(cols) != num_classes:
            raise ValueError(f"predictions {str(path)!r}: {len(cols)} score columns {cols} but the "
                             f"dataset has {num_classes} classes; set model.options.classes")
        dup = table[id_column].astype(str).duplicated()
        if dup.any():
            raise ValueError(f"predictions {str(path)!r}: duplicate id {table[id_column][dup].iloc[0]!r}")
        values = table[cols].to_numpy(dtype=np.float32)
        self.classes = cols
        self.scores = {str(i): values[k] for k, i in enumerate(table[id_column].astype(str))}

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        rows = []
        for sid in batch["id"]:
            if str(sid) not in self.scores:
                raise self._missing(str(sid))
            rows.append(self.scores[str(sid)])
        probs = torch.from_numpy(np.stack(rows)).to(self.device)
        return {"probs": probs, "logits": probs}


class LabelMapsFromFolder(_Lookup):
    """Segmentation label maps ``<id>.nii.gz`` from a folder: ``predict(batch) -> {"labels"}``."""

    task = "segmentation"

    def predict(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        from medimg_bench.datasets.grid import align_to_image_grid
        from medimg_bench.datasets.io import read_image

        out = []
        metas = batch.get("meta") or [{}] * len(batch["id"])
        images = batch["image"]
        for i, sid in enumerate(batch["id"]):
            path = next((self.source / f"{sid}{ext}" for ext in (".nii.gz", ".nii")
                         if (self.source / f"{sid}{ext}").exists()), None)
            if path is None:
                raise self._missing(str(sid))
            array, meta = read_image(path)
            image = images[i]
            shape = tuple(image.shape[1:])
            labels = align_to_image_grid(
                np.asarray(array), meta.get("affine"), metas[i].get("affine"), image_shape=shape,
                sample_id=str(sid), image_path=metas[i].get("path", "?"), mask_path=path,
            )
            out.append(torch.as_tensor(np.ascontiguousarray(labels)).long())
        return {"labels": torch.stack(out).to(self.device)}


#: column names that report-generation repositories use for the id and the text, tried in order
ID_COLUMNS = ("id", "dicom_id", "study_id", "image_id", "sample_id", "uid", "question_id")
TEXT_COLUMNS = ("text", "report", "prediction", "generated", "pred", "answer", "findings", "output")


def _read_table(path: Path) -> Any:
    """A CSV, Parquet or JSONL file as a DataFrame of strings (errors name the file and line)."""
    import pandas as pd

    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if path.suffix in (".jsonl", ".json"):
        rows = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"predictions {str(path)!r} line {n}: not JSON ({exc})") from exc
            if not isinstance(rec, dict):
                raise ValueError(f"predictions {str(path)!r} line {n}: expected an object")
            rows.append(rec)
        return pd.DataFrame(rows)
    raise ValueError(f"predictions {str(path)!r}: not a .csv, .parquet or .jsonl file")


def _pick(columns: Sequence[str], given: str | None, candidates: Sequence[str], what: str, path: Path) -> str:
    if given:
        if given not in columns:
            raise ValueError(f"predictions {str(path)!r}: no {what} column {given!r}; columns are {list(columns)}")
        return given
    found = next((c for c in candidates if c in columns), None)
    if found is None:
        raise ValueError(f"predictions {str(path)!r}: no {what} column found (tried {list(candidates)}); "
                         f"columns are {list(columns)}; set model.options.{what}_column")
    return found


def looks_like_text_table(path: Path) -> bool:
    """True when a table has an id column and a text column by the names above (a CSV is read
    by its header only)."""
    import pandas as pd

    try:
        cols = list(pd.read_csv(path, nrows=0).columns) if path.suffix == ".csv" else list(_read_table(path).columns)
    except (OSError, ValueError):
        return False
    return any(c in cols for c in ID_COLUMNS) and any(c in cols for c in TEXT_COLUMNS)


class AnswersFromFile(GenerativeAdapter):
    """Answers or generated reports (text) by sample id from a CSV, Parquet or JSONL file, served
    as generated responses. The id and text columns are found by the names report-generation
    repositories use (:data:`ID_COLUMNS`, :data:`TEXT_COLUMNS`: ``dicom_id,report``,
    ``study_id,report``, ``id,text``...) unless given. Duplicate ids are an error naming them."""

    backend = "predictions"

    def __init__(self, path: Path, *, text_column: str | None = None, id_column: str | None = None) -> None:
        super().__init__(name="predictions")
        self.source = path
        table = _read_table(path)
        id_col = _pick(list(table.columns), id_column, ID_COLUMNS, "id", path)
        text_col = _pick(list(table.columns), text_column, TEXT_COLUMNS, "text", path)
        ids = table[id_col].astype(str)
        dup = ids[ids.duplicated()]
        if len(dup):
            raise ValueError(f"predictions {str(path)!r}: {len(dup)} duplicate id(s) in column {id_col!r}, "
                             f"e.g. {sorted(set(dup))[:5]}")
        texts = table[text_col]
        if texts.isna().any():
            raise ValueError(f"predictions {str(path)!r}: no text for id(s) {list(ids[texts.isna()])[:5]}")
        self.id_column, self.text_column = id_col, text_col
        self.answers: dict[str, str] = dict(zip(ids, texts.astype(str)))

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        return _warn_unknown(set(self.answers), ids, self.source)

    def bind_dataset(self, dataset: Any) -> None:
        """Stored answers need no pixels: a dataset that can skip its images does."""
        if hasattr(dataset, "text_only"):
            dataset.text_only = True

    def identity(self) -> dict[str, Any]:
        st = self.source.stat()
        return {"source": str(self.source), "size": st.st_size, "mtime": int(st.st_mtime)}

    def _generate(self, requests: Sequence[Any]) -> list[GenerationResponse]:
        out = []
        for r in requests:
            sid = r.sample_id.split("#rot")[0]
            if sid in self.answers:
                out.append(GenerationResponse(text=self.answers[sid], prompt=r.user))
            else:
                out.append(GenerationResponse(
                    error=f"no prediction for sample {sid!r} in {str(self.source)!r}", prompt=r.user))
        return out


def _warn_unknown(known: set[str], ids: Sequence[Any], source: Path) -> int:
    extra = sorted(known - {str(i) for i in ids})
    if extra:
        log.warning("predictions %s: %d prediction(s) for ids the dataset does not have "
                    "(ignored), e.g. %s", source, len(extra), extra[:5])
    return len(extra)


def _find(root: Path, names: Sequence[str]) -> Path | None:
    if root.is_file():
        return root
    return next((root / n for n in names if (root / n).exists()), None)


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
) -> Any:
    """Predictions already on disk (see the module docstring). ``kind``: ``auto`` (from the
    files found: a table with an id and a text column is answers, other tables class scores),
    ``classification``, ``segmentation`` or ``answers`` (alias ``reports``). ``in_channels`` is
    not used (stored predictions need no pixels)."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"predictions: {str(root)!r} (option `model.options.root`) does not exist")
    kind = "answers" if kind == "reports" else kind
    tables = ["predictions.csv", "predictions.parquet", "predictions.jsonl"]
    if kind == "auto":
        path = _find(root, tables)
        if path is not None and path.suffix not in (".csv", ".parquet", ".jsonl"):
            raise ValueError(f"predictions: {str(root)!r} is not a .csv, .parquet or .jsonl file")
        if path is not None:
            kind = "answers" if path.suffix == ".jsonl" or looks_like_text_table(path) else "classification"
        elif root.is_dir() and (any(root.glob("*.nii.gz")) or any(root.glob("*.nii"))):
            kind = "segmentation"
        else:
            raise ValueError(f"predictions: nothing recognised in {str(root)!r}: expected a CSV/Parquet of "
                             "scores, a CSV/Parquet/JSONL of answers or a folder of <id>.nii.gz label maps")
    if kind == "classification":
        path = _find(root, tables[:2])
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.csv/.parquet in {str(root)!r}")
        return ScoresFromFile(path, classes=classes, id_column=id_column or "id", num_classes=num_classes)
    if kind == "answers":
        path = _find(root, tables[::-1])
        if path is None:
            raise FileNotFoundError(f"predictions: no predictions.jsonl/.csv/.parquet in {str(root)!r}")
        return AnswersFromFile(path, text_column=text_column, id_column=id_column)
    if kind == "segmentation":
        return LabelMapsFromFolder(root)
    raise ValueError(f"predictions: kind must be auto, classification, segmentation, answers or reports, got {kind!r}")
