"""The ``wsi_tiles`` dataset. Tiles of ``tile_size`` px at ``mpp`` microns per pixel from the slides under ``root``."""

from __future__ import annotations

import fnmatch
import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import PathManifestDataset
from medimg_bench.registry import register_dataset

__all__ = [
    "WSITileDataset",
    "wsi_tiles",
    "otsu_threshold",
    "tissue_mask",
    "select_level",
    "open_slide",
    "no_tissue_reason",
]

log = logging.getLogger(__name__)

SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".mrxs", ".scn", ".bif", ".vms", ".svslide")


def otsu_threshold(values: np.ndarray, *, bins: int = 256) -> float:
    """Otsu's threshold of ``values`` (maximizes the between-class variance of a ``bins``-bin
    histogram); returns the upper edge of the last bin of the low class."""
    v = np.asarray(values, dtype=np.float64).ravel()
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        return hi
    hist, edges = np.histogram(v, bins=bins, range=(lo, hi))
    p = hist.astype(np.float64) / hist.sum()
    centers = (edges[:-1] + edges[1:]) / 2
    w0 = np.cumsum(p)
    m = np.cumsum(p * centers)
    mt = m[-1]
    w1 = 1.0 - w0
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mt * w0 - m) ** 2 / (w0 * w1)
    between[~np.isfinite(between)] = -1.0
    return float(edges[int(np.argmax(between)) + 1])


def tissue_mask(rgb: np.ndarray) -> np.ndarray:
    """Boolean tissue mask of an RGB thumbnail: HSV saturation above its Otsu threshold (stained
    tissue is coloured; glass background is grey/white)."""
    a = np.asarray(rgb)[..., :3].astype(np.float32)
    mx, mn = a.max(axis=-1), a.min(axis=-1)
    sat = np.where(mx > 0, (mx - mn) / np.maximum(mx, 1e-6), 0.0)
    if float(sat.max() - sat.min()) < 1e-3:
        return np.zeros(sat.shape, dtype=bool)
    return sat > otsu_threshold(sat)


def select_level(downsamples: Sequence[float], wanted: float) -> int:
    """The coarsest pyramid level whose downsample does not exceed ``wanted`` (so tiles are read
    at the target resolution or finer, then resized down)."""
    best = 0
    for i, d in enumerate(downsamples):
        if d <= wanted * (1 + 1e-3) and d >= downsamples[best]:
            best = i
    return best


class _Slide:
    """Minimal common face of a tiffslide / openslide slide."""

    def __init__(self, path: Path, backend: str) -> None:
        self.path, self.backend = path, backend
        try:
            if backend == "tiffslide":
                import tiffslide

                self._s = tiffslide.TiffSlide(str(path))
                prefix = "tiffslide"
            else:
                import openslide

                self._s = openslide.OpenSlide(str(path))
                prefix = "openslide"
        except ImportError:
            raise
        except Exception as exc:
            raise ValueError(
                f"cannot open slide {str(path)!r} with {backend} ({type(exc).__name__}: {exc})"
            ) from exc
        self.dimensions = tuple(int(v) for v in self._s.dimensions)
        self.downsamples = [float(d) for d in self._s.level_downsamples]
        mpp = self._s.properties.get(f"{prefix}.mpp-x")
        self.mpp = float(mpp) if mpp not in (None, "") else None

    def read(self, x: int, y: int, level: int, size: int) -> np.ndarray:
        if self.backend == "tiffslide":
            return np.asarray(self._s.read_region((x, y), level, (size, size), as_array=True))[
                ..., :3
            ]
        return np.asarray(self._s.read_region((x, y), level, (size, size)))[..., :3]

    def thumbnail(self, max_size: int) -> np.ndarray:
        return np.asarray(self._s.get_thumbnail((max_size, max_size)).convert("RGB"))


def open_slide(path: str | Path, backend: str = "auto") -> _Slide:
    """Open a whole-slide image with ``tiffslide`` or ``openslide`` (``auto``: tiffslide if
    installed, else openslide); ``ImportError`` names the extra to install."""
    if backend not in ("auto", "tiffslide", "openslide"):
        raise ValueError(f"backend must be 'auto', 'tiffslide' or 'openslide', got {backend!r}")
    if backend == "auto":
        for b in ("tiffslide", "openslide"):
            try:
                __import__(b)
                backend = b
                break
            except ImportError:
                continue
        else:
            raise ImportError(
                "reading whole-slide images needs tiffslide (pip install 'medimg-bench[wsi]') or openslide-python"
            )
    try:
        return _Slide(Path(path), backend)
    except ImportError as exc:
        raise ImportError(
            f"backend {backend!r} is not installed (pip install 'medimg-bench[wsi]'): {exc}"
        ) from exc


class WSITileDataset(PathManifestDataset):
    """Tiles of whole-slide images; ``image`` is ``3×tile×tile`` float32 in [0, 1] at the target
    microns per pixel; ``label`` the slide label (int) when labels were given."""

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: Path,
        classes: Sequence[str] | None,
        backend: str,
        transform: Callable | None = None,
    ) -> None:
        super().__init__(
            manifest,
            root=root,
            classes=classes,
            transform=transform,
            name="wsi_tiles",
        )
        self.backend = backend
        self._slides: dict[str, _Slide] = {}
        self._pid: int | None = None

    def __getstate__(self) -> dict[str, Any]:  # slide handles are per process
        state = dict(self.__dict__)
        state["_slides"], state["_pid"] = {}, None
        return state

    def _slide(self, rel: str) -> _Slide:
        if self._pid != os.getpid():
            self._slides, self._pid = {}, os.getpid()
        if rel not in self._slides:
            self._slides[rel] = open_slide(self.resolve(rel), self.backend)
        return self._slides[rel]

    def bags(self) -> dict[str, list[int]]:
        """Slide id → positions of its tiles in this dataset (for multiple-instance learning)."""
        return {
            str(k): list(v)
            for k, v in self.manifest.groupby("slide_id", sort=False).indices.items()
        }

    def slide_labels(self) -> pd.Series:
        """Slide id → slide label (int index into ``classes``)."""
        if "label" not in self.manifest:
            raise ValueError("wsi_tiles: no slide labels were given (labels_csv=)")
        return self.manifest.groupby("slide_id", sort=False)["label"].first()

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        slide = self._slide(str(row["path"]))
        size, tile = int(row["read_size"]), int(row["tile_size"])
        region = slide.read(int(row["x"]), int(row["y"]), int(row["level"]), size)
        img = torch.from_numpy(
            np.ascontiguousarray(region, dtype=np.float32) / np.float32(255.0)
        ).permute(2, 0, 1)
        if size != tile:
            img = torch.nn.functional.interpolate(
                img[None], size=(tile, tile), mode="bilinear", antialias=True, align_corners=False
            )[0]
            img = img.clamp_(0.0, 1.0)
        meta = self.meta_for(row)
        meta.update(
            modality="pathology",
            path=str(self.resolve(row["path"])),
            slide_id=str(row["slide_id"]),
            x=int(row["x"]),
            y=int(row["y"]),
            level=int(row["level"]),
            mpp=float(row["mpp"]),
            tissue_fraction=float(row["tissue_fraction"]),
        )
        sample: dict[str, Any] = {"id": str(row["id"]), "image": img.contiguous(), "meta": meta}
        if "label" in row and pd.notna(row["label"]):
            sample["label"] = int(row["label"])
        return sample


def tiles_for_slide(
    slide: _Slide,
    *,
    mpp: float,
    tile_size: int,
    stride: int,
    tissue_threshold: float,
    thumbnail_size: int,
    base_mpp: float | None,
) -> tuple[pd.DataFrame, float]:
    m0 = slide.mpp or base_mpp
    if m0 is None:
        raise ValueError(
            f"slide {str(slide.path)!r} has no microns-per-pixel in its metadata; pass base_mpp="
        )
    down = mpp / m0
    level = select_level(slide.downsamples, down)
    read_size = max(1, int(round(tile_size * down / slide.downsamples[level])))
    extent = tile_size * down  # tile side in level-0 pixels
    step = stride * down
    w0, h0 = slide.dimensions
    thumb = slide.thumbnail(thumbnail_size)
    mask = tissue_mask(thumb)
    sy, sx = mask.shape[0] / h0, mask.shape[1] / w0
    nx = int(math.floor((w0 - extent) / step)) + 1 if w0 >= extent else 0
    ny = int(math.floor((h0 - extent) / step)) + 1 if h0 >= extent else 0
    rows = []
    for j in range(ny):
        for i in range(nx):
            x, y = int(round(i * step)), int(round(j * step))
            ty0, ty1 = (
                int(math.floor(y * sy)),
                max(int(math.floor(y * sy)) + 1, int(math.ceil((y + extent) * sy))),
            )
            tx0, tx1 = (
                int(math.floor(x * sx)),
                max(int(math.floor(x * sx)) + 1, int(math.ceil((x + extent) * sx))),
            )
            frac = float(mask[ty0:ty1, tx0:tx1].mean()) if mask[ty0:ty1, tx0:tx1].size else 0.0
            if frac >= tissue_threshold:
                rows.append(
                    {
                        "x": x,
                        "y": y,
                        "level": level,
                        "read_size": read_size,
                        "tissue_fraction": frac,
                    }
                )
    return pd.DataFrame(rows, columns=["x", "y", "level", "read_size", "tissue_fraction"]), m0


@register_dataset("wsi_tiles", tags=("pathology", "classification", "wsi", "mil"))
def wsi_tiles(
    root: str | Path,
    split: str = "test",
    *,
    pattern: str = "*",
    labels_csv: str | None = None,
    slide_column: str = "slide",
    label_column: str = "label",
    patient_column: str | None = None,
    split_column: str | None = None,
    classes: Sequence[str] | None = None,
    mpp: float = 0.5,
    tile_size: int = 224,
    stride: int | None = None,
    tissue_threshold: float = 0.5,
    thumbnail_size: int = 1024,
    base_mpp: float | None = None,
    max_tiles_per_slide: int | None = None,
    seed: int = 0,
    backend: str = "auto",
    transform: Callable | None = None,
) -> WSITileDataset:
    """Tiles of ``tile_size`` px at ``mpp`` microns per pixel from the slides under ``root``.

    Slides: files matching ``pattern`` with a slide suffix (.svs .tif .tiff .ndpi .mrxs ...),
    searched recursively. ``labels_csv`` (relative to ``root``): one row per slide with
    ``slide_column`` (file name, with or without suffix) and ``label_column`` (class names;
    ``classes`` default: sorted distinct values); only listed slides are used and a listed slide
    absent from disk raises. ``split_column`` keeps rows equal to ``split``. ``stride`` defaults
    to ``tile_size`` (no overlap), in target-resolution pixels. A tile is kept when at least
    ``tissue_threshold`` of its area is tissue on the thumbnail; ``max_tiles_per_slide`` samples
    that many (seeded). The pyramid level read is the coarsest at or finer than ``mpp``."""
    name = "wsi_tiles"
    r = _slide_root(root)
    if tile_size < 1 or mpp <= 0 or not 0.0 <= tissue_threshold <= 1.0:
        raise ValueError(f"{name}: need tile_size ≥ 1, mpp > 0 and 0 ≤ tissue_threshold ≤ 1")
    stride = stride or tile_size
    files = _find_slides(r, pattern)
    cls: list[str] | None = None
    if labels_csv is not None:
        columns = (slide_column, label_column, patient_column, split_column)
        slides, cls = _labelled_slides(
            r / labels_csv, files, split, columns, classes=classes, root=r
        )
    else:
        slides = [{"path": p, "patient_id": p.stem} for p in files]
    if not slides:
        raise ValueError(f"{name}: no slides matching {pattern!r} under {str(r)!r}")
    rng = np.random.default_rng(seed)
    parts, tissueless = [], []
    used_backend = backend
    for s in slides:
        slide = open_slide(s["path"], backend)
        used_backend = slide.backend
        tiles, m0 = tiles_for_slide(slide, mpp=mpp, tile_size=tile_size, stride=stride, tissue_threshold=tissue_threshold,
                                     thumbnail_size=thumbnail_size, base_mpp=base_mpp)
        if not len(tiles):
            log.warning("%s: no tissue tiles in %s", name, s["path"])
            tissueless.append(s["path"])
            continue
        tiles = _subsample(tiles, max_tiles_per_slide, rng)
        tiles = _named_tiles(tiles, s, r, tile_size=tile_size, mpp=mpp, base_mpp=m0)
        parts.append(tiles)
    if not parts:
        raise ValueError(
            f"{name}: no slide under {str(r)!r} has tissue tiles (tissue_threshold={tissue_threshold})"
        )
    ds = WSITileDataset(pd.concat(parts, ignore_index=True), root=r, classes=cls, backend=used_backend,
                        transform=transform)
    for path in tissueless:  # listed, not a sample: counted and shown (datasets/base.py)
        rel = path.relative_to(r)
        ds.exclude(str(rel.with_suffix("")), file=str(rel), reason=no_tissue_reason(tissue_threshold), kind="no_tiles")
    return ds


def no_tissue_reason(tissue_threshold: float) -> str:
    """Why a slide is excluded when no tile of it is tissue enough."""
    return (f"slide without tissue: no tile has tissue_threshold={tissue_threshold:g} of its area tissue "
            "(a slide-level protocol fails it)")


def _slide_root(root: str | Path | None) -> Path:
    """``root`` as an existing folder, or a clear error."""
    name = "wsi_tiles"
    if root is None or str(root) in ("", "???"):
        raise ValueError(f"{name}: set root= to the folder of slides")
    r = Path(root).expanduser()
    if not r.is_dir():
        raise FileNotFoundError(f"{name}: root {str(r)!r} is not a directory")
    return r


def _find_slides(r: Path, pattern: str) -> list[Path]:
    """Slide files under ``r`` (recursive) whose name matches ``pattern``, sorted."""
    return sorted(
        p
        for p in r.rglob("*")
        if p.is_file() and p.suffix.lower() in SLIDE_SUFFIXES and fnmatch.fnmatch(p.name, pattern)
    )


def _labelled_slides(
    csv: Path,
    files: list[Path],
    split: str,
    columns: tuple[str, str, str | None, str | None],
    *,
    classes: Sequence[str] | None,
    root: Path,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The slides listed in ``csv`` (kept to ``split``) with class index and patient id, and the
    class names."""
    name = "wsi_tiles"
    r = root
    slide_column, label_column, patient_column, split_column = columns
    by_name = {p.name: p for p in files} | {p.stem: p for p in files}
    slides: list[dict[str, Any]] = []
    if not csv.exists():
        raise FileNotFoundError(f"{name}: labels_csv {str(csv)!r} does not exist")
    df = pd.read_csv(csv, dtype={slide_column: str})
    for c in [slide_column, label_column] + [c for c in (patient_column, split_column) if c]:
        if c not in df.columns:
            raise ValueError(f"{name}: {str(csv)!r} has no column {c!r}")
    df["_line"] = np.arange(len(df)) + 2
    if split_column:
        df = df[df[split_column].astype(str) == str(split)]
    values = df[label_column].astype(str)
    cls = [str(c) for c in classes] if classes is not None else sorted(values.unique().tolist())
    for d, lab in zip(df.to_dict("records"), values):
        sl = str(d[slide_column])
        p = by_name.get(sl) or by_name.get(Path(sl).name)
        if p is None:
            raise FileNotFoundError(
                f"{name}: {str(csv)!r} line {d['_line']}: slide {sl!r} is not under {str(r)!r}"
            )
        if lab not in cls:
            raise ValueError(
                f"{name}: {str(csv)!r} line {d['_line']} (slide {sl!r}): label {lab!r} is not one of {cls}"
            )
        pid = str(d[patient_column]) if patient_column else p.stem
        slides.append({"path": p, "label": cls.index(lab), "patient_id": pid})
    return slides, cls


def _subsample(
    tiles: pd.DataFrame, max_tiles: int | None, rng: np.random.Generator
) -> pd.DataFrame:
    """At most ``max_tiles`` of ``tiles``, drawn without replacement, in their original order."""
    if max_tiles is not None and len(tiles) > max_tiles:
        tiles = tiles.iloc[np.sort(rng.choice(len(tiles), max_tiles, replace=False))]
    return tiles


def _named_tiles(
    tiles: pd.DataFrame, s: dict[str, Any], r: Path, *, tile_size: int, mpp: float, base_mpp: float
) -> pd.DataFrame:
    """``tiles`` of one slide with their ids (``slide/x_y``), slide, patient and scale columns."""
    rel = str(s["path"].relative_to(r))
    sid = str(Path(rel).with_suffix(""))
    tiles = tiles.assign(
        id=[f"{sid}/{x}_{y}" for x, y in zip(tiles["x"], tiles["y"])],
        path=rel,
        slide_id=sid,
        patient_id=s["patient_id"],
        tile_size=tile_size,
        mpp=mpp,
        base_mpp=base_mpp,
    )
    if "label" in s:
        tiles["label"] = s["label"]
    return tiles
