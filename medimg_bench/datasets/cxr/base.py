"""The chest X-ray loader shared by the official layouts: :class:`CXRDataset` and the manifest helpers
(CSV reading, file indexing, missing-file policy, loader options)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import PathManifestDataset
from medimg_bench.sample import pixels_wanted

__all__ = ["CXRDataset"]

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".dicom", ".tif", ".tiff")


class CXRDataset(PathManifestDataset):
    """A radiograph dataset over a manifest; see the module docstring for the sample layout.

    Args:
        manifest: rows with ``id``, ``path`` and the label column(s).
        classes: class names; for multi-label datasets also the manifest label columns.
        multilabel: ``True``: ``label`` is a float vector over ``classes`` (NaN = unlabelled);
            ``False``: the manifest ``label`` column holds an int index into ``classes``.
        meta_columns: extra manifest columns copied into ``sample["meta"]`` (e.g. ``boxes``).
        rle_column / rle_format: SIIM run-length strings (``;``-separated, united) → ``mask``.
    """

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: str | Path | None,
        classes: Sequence[str],
        multilabel: bool,
        normalize: str = "auto",
        channels: int = 1,
        invert_monochrome1: bool = True,
        meta_columns: Sequence[str] = (),
        rle_column: str | None = None,
        rle_format: str = "relative",
        transform: Callable[[dict], dict] | None = None,
        name: str | None = None,
    ) -> None:
        from medimg_bench.datasets.cxr.pixels import NORMALIZE_MODES

        if normalize not in NORMALIZE_MODES:
            raise ValueError(
                f"{name}: normalize must be one of {NORMALIZE_MODES}, got {normalize!r}"
            )
        if channels not in (1, 3):
            raise ValueError(f"{name}: channels must be 1 or 3, got {channels!r}")
        super().__init__(manifest, root=root, classes=classes, transform=transform, name=name)
        self.multilabel = multilabel
        self.normalize = normalize
        self.channels = channels
        self.invert_monochrome1 = invert_monochrome1
        self.meta_columns = tuple(meta_columns)
        self.rle_column = rle_column
        self.rle_format = rle_format

    def label_counts(self) -> pd.DataFrame:
        """Positives, negatives and unlabelled per class (multi-label) or count per class."""
        if self.multilabel:
            m = self.manifest[list(self.classes or [])]
            return pd.DataFrame(
                {
                    "positive": (m == 1).sum(),
                    "negative": (m == 0).sum(),
                    "unlabelled": m.isna().sum(),
                }
            )
        counts = self.manifest["label"].value_counts()
        return pd.DataFrame(
            {"count": [int(counts.get(i, 0)) for i in range(len(self.classes or []))]},
            index=self.classes,
        )

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.cxr.pixels import decode_siim_rle, load_cxr_image

        path = self.resolve(row["path"])
        if self.pixels or self.rle_column is not None:  # an RLE mask takes its size from the image
            image, imeta = load_cxr_image(
                path,
                normalize=self.normalize,
                channels=self.channels,
                invert_monochrome1=self.invert_monochrome1,
            )
        else:  # the model reads no pixel (stored predictions): labels and meta only
            image, imeta = None, {"path": str(path)}
        meta = {k: v for k, v in imeta.items() if k in ("view", "sex", "age")}  # header fallback
        meta.update(self.meta_for(row))
        meta.update({k: v for k, v in imeta.items() if k not in ("view", "sex", "age")})
        meta["modality"] = "XR"
        for col in self.meta_columns:
            if col in row:
                meta[col] = row[col]
        sample: dict[str, Any] = {"id": str(row["id"]), "meta": meta}
        if image is not None:
            sample["image"] = image
        if self.multilabel:
            sample["label"] = torch.tensor(
                [float(row[c]) for c in self.classes or []], dtype=torch.float32
            )
        else:  # NaN: kept without a label (csv on_missing_label=unlabelled)
            lab = row["label"]
            sample["label"] = float("nan") if pd.isna(lab) else int(lab)
        if self.rle_column is not None:
            h, w = image.shape[-2:]
            mask = np.zeros((h, w), dtype=np.uint8)
            for rle in str(row[self.rle_column]).split(";"):
                mask |= decode_siim_rle(
                    rle, h, w, fmt=self.rle_format, source=f"sample {row['id']!r}"
                )
            sample["mask"] = torch.from_numpy(mask.astype(np.int64))
        return sample


# -- helpers ---------------------------------------------------------------------------------------


def read_csv(path: Path, name: str, **kw: Any) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, **kw)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{name}: cannot read {str(path)!r}: {exc}") from exc
    df.columns = [str(c).strip() for c in df.columns]  # SIIM's " EncodedPixels"
    return df


def need_columns(df: pd.DataFrame, cols: Sequence[str], path: Path | str, name: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(
            f"{name}: {str(path)!r} has no column(s) {missing}; columns are "
            f"{[c for c in df.columns if not str(c).startswith('_')]}"
        )


def first_existing(root: Path, names: Sequence[str], name: str, what: str) -> Path:
    for n in names:
        hits = sorted(root.glob(n))
        if hits:
            return hits[0]
    raise FileNotFoundError(f"{name}: no {what} under {str(root)!r} (looked for {list(names)})")


def index_files(
    root: Path, *, under: Callable[[tuple[str, ...]], bool] | None = None
) -> dict[str, str]:
    """Map file stem → path relative to ``root`` for image files (os.walk; DICOM preferred)."""
    found: dict[str, str] = {}
    rank = {
        s: i for i, s in enumerate((".dcm", ".dicom", ".png", ".jpg", ".jpeg", ".tif", ".tiff"))
    }
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(root)
        if under is not None and not under(rel_dir.parts):
            continue
        for f in filenames:
            stem, suffix = os.path.splitext(f)
            suffix = suffix.lower()
            if suffix not in rank:
                continue
            rel = str(rel_dir / f) if rel_dir.parts else f
            old = found.get(stem)
            if old is None or rank[suffix] < rank[os.path.splitext(old)[1].lower()]:
                found[stem] = rel
    return found


def _check_on_missing(on_missing: str, name: str) -> None:
    if on_missing not in ("error", "skip", "lazy"):
        raise ValueError(
            f"{name}: on_missing must be 'error', 'skip' or 'lazy', got {on_missing!r}"
        )


def _skip(manifest: pd.DataFrame, keep: np.ndarray, name: str, where: str) -> pd.DataFrame:
    """Rows where ``keep`` (bool array) is set, logging how many were dropped."""
    log.warning(
        "%s: skipped %d rows of %s whose image is not on disk",
        name,
        int((~keep).sum()),
        where,
    )
    return manifest[keep]


def _attach_paths(
    manifest: pd.DataFrame,
    files: Mapping[str, str],
    key: str,
    on_missing: str,
    name: str,
    where: str,
    expected: str = "{}",
) -> pd.DataFrame:
    """Add a ``path`` column by looking ``manifest[key]`` up in ``files``; a row whose image is
    not found raises, is skipped, or (``lazy``, and whenever the model reads no pixel:
    :func:`~medimg_bench.sample.without_pixels`) gets ``expected.format(key)`` so that reading it
    names the file that should be there."""
    _check_on_missing(on_missing, name)
    on_missing = on_missing if pixels_wanted() else "lazy"
    manifest = manifest.copy()
    keys = manifest[key].astype(str)
    found = keys.map(files)
    missing = found.isna()
    manifest["path"] = [
        f if isinstance(f, str) else expected.format(k) for f, k in zip(found, keys)
    ]
    if missing.any():
        if on_missing == "skip":
            return _skip(manifest, ~missing.to_numpy(), name, where)
        if on_missing == "error":
            i = int(np.flatnonzero(missing.to_numpy())[0])
            raise FileNotFoundError(
                f"{name}: {where} line {manifest['_line'].iloc[i]} lists image {manifest[key].iloc[i]!r} "
                f"which is not on disk under the dataset root ({int(missing.sum())} rows missing; "
                "on_missing='skip' drops them)"
            )
    return manifest


def _check_paths(
    manifest: pd.DataFrame, root: Path, on_missing: str, name: str, where: str
) -> pd.DataFrame:
    _check_on_missing(on_missing, name)
    if on_missing == "lazy" or manifest.empty or not pixels_wanted():  # no pixel read: none checked
        return manifest
    exists = np.fromiter(
        (os.path.exists(root / p) if isinstance(p, str) else False for p in manifest["path"]),
        bool,
        len(manifest),
    )
    if exists.all():
        return manifest
    if on_missing == "skip":
        return _skip(manifest, exists, name, where)
    i = int(np.flatnonzero(~exists)[0])
    raise FileNotFoundError(
        f"{name}: {where} line {manifest['_line'].iloc[i]} (id {manifest['id'].iloc[i]!r}): image file "
        f"{str(root / str(manifest['path'].iloc[i]))!r} does not exist ({int((~exists).sum())} missing; "
        "on_missing='skip' drops them)"
    )


@dataclass(frozen=True)
class Options:
    """The options every loader takes (see the module docstring); builds the dataset."""

    name: str
    normalize: str
    channels: int
    views: Sequence[str] | None
    on_missing: str
    transform: Callable[[dict], dict] | None

    def attach_paths(
        self,
        manifest: pd.DataFrame,
        files: Mapping[str, str],
        key: str,
        where: str,
        expected: str = "{}",
    ) -> pd.DataFrame:
        """:func:`_attach_paths` with this loader's ``on_missing``."""
        return _attach_paths(manifest, files, key, self.on_missing, self.name, where, expected)

    def finish(
        self,
        manifest: pd.DataFrame,
        root: Path,
        *,
        where: str,
        paths_checked: bool = False,
        **kw: Any,
    ) -> CXRDataset:
        """Keep the wanted ``views``, check the image files (unless ``paths_checked``: the
        paths came from :meth:`attach_paths`) and return the dataset."""
        if self.views is not None:
            wanted = [self.views] if isinstance(self.views, str) else list(self.views)
            manifest = manifest[manifest["view"].isin(wanted)]
        if "_line" in manifest.columns and manifest["id"].duplicated().any():
            first = manifest["id"][manifest["id"].duplicated()].iloc[0]
            lines = manifest.loc[manifest["id"] == first, "_line"].tolist()
            n = int(manifest["id"].duplicated().sum())
            raise ValueError(
                f"{self.name}: {where}: duplicate id {first!r} on lines {lines} "
                f"({n} duplicate row(s) in all); ids must be unique (set id_column)"
            )
        on_missing = "lazy" if paths_checked else self.on_missing
        manifest = _check_paths(manifest, root, on_missing, self.name, where)
        return CXRDataset(
            manifest.drop(columns=["_line"], errors="ignore"),
            root=root,
            name=self.name,
            normalize=self.normalize,
            channels=self.channels,
            transform=self.transform,
            **kw,
        )


def cxr_options(
    name: str,
    options: Mapping[str, Any],
    normalize: str,
    channels: int,
    views: Sequence[str] | None,
    on_missing: str,
    transform: Callable[[dict], dict] | None,
) -> Options:
    """Reject unknown ``options`` and bundle the shared ones."""
    _ensure_options(options, name)
    return Options(name, normalize, channels, views, on_missing, transform)


def numbered_lines(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["_line"] = np.arange(len(df)) + 2  # 1-based line in the CSV, after the header
    return df


def _ensure_options(options: Mapping[str, Any], name: str) -> None:
    if options:
        raise TypeError(f"{name}: unknown option(s) {sorted(options)}")
