"""Score predictions that already exist (``model=predictions model.options.root=...``): another
tool's outputs are looked up by sample id and go through this package's metrics and conventions.

* classification scores: a CSV or Parquet file (``root`` itself, or ``predictions.csv`` /
  ``predictions.parquet`` in the folder ``root``) with an ``id`` column and one column per class
  (``classes`` picks and orders them; default: every other column, in file order);
* segmentation label maps: a folder of NIfTI files named ``<id>.nii.gz`` (or ``.nii``), checked
  against the image grid with the loaders' rule (:mod:`medimg_bench.datasets._grid`: flips and
  axis order re-oriented, anything else a per-sample error naming both files);
* 2D maps: a folder of ``<id>.png`` (8-bit / 255, 16-bit / 65535, 1-bit 0/1, the first channel
  of RGB: the MATLAB toolbox's ``im2double``) or ``<id>.npy`` (float) probability maps, served as
  float64 ``maps`` (exact, for :mod:`medimg_bench.metrics.sod_toolbox`) and ``labels``
  (``map >= threshold``). A map whose size differs from its mask is an error naming both files
  unless ``resize=true`` (bicubic, like the toolbox's ``imresize``; not bit-exact to MATLAB);
* VQA or report answers: a JSONL file (``root`` itself, or ``predictions.jsonl``) with ``id`` and
  ``text`` per line, served through the generative protocol (``generate``).

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

__all__ = ["ScoresFromFile", "LabelMapsFromFolder", "MapsFromFolder", "AnswersFromFile", "predictions",
           "read_map"]

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
        from medimg_bench.datasets._grid import align_to_image_grid
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


MAP_SUFFIXES = (".png", ".npy")


def read_map(path: Path) -> np.ndarray:
    """A 2D prediction map as float64 ``H x W``: PNG 8-bit / 255, 16-bit / 65535, 1-bit 0/1 (the
    first channel of a colour PNG), ``.npy`` as stored (must be 2-D and finite)."""
    if path.suffix == ".npy":
        a = np.load(path, allow_pickle=False)
        if a.ndim == 3 and a.shape[0] == 1:
            a = a[0]
        if a.ndim != 2 or not np.issubdtype(a.dtype, np.number) or not np.isfinite(a).all():
            raise ValueError(f"map {str(path)!r}: expected a finite 2-D array, got {a.dtype} {a.shape}")
        return a.astype(np.float64)
    from PIL import Image

    with Image.open(path) as im:
        if im.mode == "P":
            im = im.convert("RGB")
        a = np.asarray(im)
    if a.ndim == 3:
        a = a[..., 0]
    scale = {np.dtype(bool): 1.0, np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0,
             np.dtype(np.int32): 65535.0}.get(a.dtype)
    if scale is None:
        raise ValueError(f"map {str(path)!r}: unsupported pixel type {a.dtype}")
    return a.astype(np.float64) / scale


class MapsFromFolder(_Lookup):
    """2D probability maps ``<id>.png`` / ``<id>.npy``: ``predict(batch) -> {"maps", "labels"}``
    (lists when the images of a batch differ in size)."""

    task = "segmentation"

    def __init__(self, source: Path, *, threshold: float = 0.5, resize: bool = False) -> None:
        super().__init__(source)
        self.threshold = threshold
        self.resize = resize

    def _known_ids(self) -> set[str]:
        return {p.stem for p in self.source.iterdir() if p.suffix in MAP_SUFFIXES}

    def _one(self, sid: str, shape: tuple[int, ...], mask_path: str) -> np.ndarray:
        path = next((self.source / f"{sid}{ext}" for ext in MAP_SUFFIXES if (self.source / f"{sid}{ext}").exists()), None)
        if path is None:
            raise self._missing(sid)
        m = read_map(path)
        if m.shape != shape:
            if not self.resize:
                raise ValueError(f"sample {sid!r}: map {str(path)!r} is {m.shape[0]}x{m.shape[1]} but mask "
                                 f"{mask_path!r} is {shape[0]}x{shape[1]} (height x width); set "
                                 "model.options.resize=true to resize maps as the toolbox does")
            t = torch.from_numpy(m)[None, None]
            m = torch.nn.functional.interpolate(t, size=shape, mode="bicubic", antialias=True,
                                                align_corners=False)[0, 0].clamp(0, 1).numpy()
        return m

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        metas = batch.get("meta") or [{}] * len(batch["id"])
        masks = batch.get("mask")
        images = batch["image"]
        maps = []
        for i, sid in enumerate(batch["id"]):
            ref = masks[i] if masks is not None else images[i][0]
            maps.append(torch.from_numpy(self._one(str(sid), tuple(ref.shape[-2:]), (metas[i] or {}).get("mask_path", "?"))))
        labels = [(m >= self.threshold).long() for m in maps]
        if len({tuple(m.shape) for m in maps}) == 1:
            return {"maps": torch.stack(maps).to(self.device), "labels": torch.stack(labels).to(self.device)}
        return {"maps": [m.to(self.device) for m in maps], "labels": [x.to(self.device) for x in labels]}


class AnswersFromFile(GenerativeAdapter):
    """Answers (text) by sample id from a JSONL file, served as generated responses."""

    backend = "predictions"

    def __init__(self, path: Path, *, text_column: str = "text", id_column: str = "id") -> None:
        super().__init__(name="predictions")
        self.source = path
        self.answers: dict[str, str] = {}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"predictions {str(path)!r} line {n}: not JSON ({exc})") from exc
            if id_column not in rec or text_column not in rec:
                raise ValueError(f"predictions {str(path)!r} line {n}: needs {id_column!r} and {text_column!r}")
            self.answers[str(rec[id_column])] = str(rec[text_column])

    def check_ids(self, ids: Sequence[Any]) -> int:
        """Warn once about answers whose id the dataset does not have; returns their count."""
        return _warn_unknown(set(self.answers), ids, self.source)

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
    id_column: str = "id",
    text_column: str = "text",
    num_classes: int | None = None,
    in_channels: int | None = None,
    threshold: float = 0.5,
    resize: bool = False,
) -> Any:
    """Predictions already on disk (see the module docstring). ``kind``: ``auto`` (from the
    files found), ``classification``, ``segmentation``, ``maps`` (2D PNG / .npy probability maps;
    ``threshold`` makes their ``labels``) or ``answers``."""
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
        elif root.is_dir() and (any(root.glob("*.png")) or any(root.glob("*.npy"))):
            kind = "maps"
        else:
            raise ValueError(f"predictions: nothing recognised in {str(root)!r}: expected a CSV/Parquet of "
                             "scores, a JSONL of answers, a folder of <id>.nii.gz label maps or of <id>.png / .npy maps")
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
    if kind == "maps":
        return MapsFromFolder(root, threshold=threshold, resize=resize)
    raise ValueError(f"predictions: kind must be auto, classification, segmentation, maps or answers, got {kind!r}")
