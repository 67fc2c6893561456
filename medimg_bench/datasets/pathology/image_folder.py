"""The ``image_folder`` dataset. One folder per class (``<dir>/<class>/<image>``): NCT-CRC-HE-100K / CRC-VAL-HE-7K (.tif,
classes ADI BACK DEB LYM MUC MUS NORM STR TUM), BACH ``Photos/{Benign,InSitu,Invasive,Normal}``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.base import PathManifestDataset, dataset_root
from medimg_bench.datasets.pathology.pixels import IMAGE_SUFFIXES, unit_rgb
from medimg_bench.registry import register_dataset

__all__ = ["PathologyImageDataset", "image_folder"]


# -- folders of tiles and MHIST --------------------------------------------------------------------


class PathologyImageDataset(PathManifestDataset):
    """Pathology images listed in a manifest (``path``, int ``label``), read with PIL/tifffile."""

    task = "classification"

    def __init__(
        self,
        manifest: pd.DataFrame,
        *,
        root: Path,
        classes: Sequence[str],
        name: str,
        transform: Callable | None = None,
        meta_columns: Sequence[str] = (),
    ) -> None:
        super().__init__(manifest, root=root, classes=classes, transform=transform, name=name)
        self.meta_columns = tuple(meta_columns)

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        from medimg_bench.datasets.io import read_image

        path = self.resolve(row["path"])
        array, _ = read_image(path)
        meta = self.meta_for(row)
        meta.update(modality="pathology", path=str(path))
        meta.update({c: row[c] for c in self.meta_columns if c in row})
        return {
            "id": str(row["id"]),
            "image": unit_rgb(array, str(path)),
            "label": int(row["label"]),
            "meta": meta,
        }


@register_dataset("image_folder", tags=("pathology", "classification", "generic"))
def image_folder(
    root: str | Path,
    split: str = "test",
    *,
    split_dirs: Mapping[str, str] | None = None,
    classes: Sequence[str] | None = None,
    suffixes: Sequence[str] = IMAGE_SUFFIXES,
    transform: Callable | None = None,
) -> PathologyImageDataset:
    """One folder per class (``<dir>/<class>/<image>``): NCT-CRC-HE-100K / CRC-VAL-HE-7K (.tif,
    classes ADI BACK DEB LYM MUC MUS NORM STR TUM), BACH ``Photos/{Benign,InSitu,Invasive,Normal}``.

    The folder read is ``root/split_dirs[split]`` when ``split_dirs`` is given (e.g.
    ``{"train": "NCT-CRC-HE-100K", "test": "CRC-VAL-HE-7K"}``), else ``root/split`` if that
    folder exists, else ``root``. ``classes`` defaults to the sorted sub-folder names; a folder
    not in a given ``classes`` list raises. Ids are ``<class>/<file stem>``."""
    name = "image_folder"
    r = dataset_root(root, name)
    if split_dirs is not None:
        if split not in split_dirs:
            raise ValueError(f"{name}: split {split!r} not in split_dirs {dict(split_dirs)}")
        d = r / split_dirs[split]
    else:
        d = r / split if (r / split).is_dir() else r
    if not d.is_dir():
        raise FileNotFoundError(f"{name}: {str(d)!r} is not a directory")
    sfx = tuple(s.lower() for s in suffixes)
    folders = {}
    for sub in sorted(p for p in d.iterdir() if p.is_dir()):
        files = sorted(f for f in sub.rglob("*") if f.is_file() and f.suffix.lower() in sfx)
        if files:
            folders[sub.name] = files
    if not folders:
        raise ValueError(f"{name}: no class folders with images ({', '.join(sfx)}) in {str(d)!r}")
    cls = list(classes) if classes is not None else sorted(folders)
    extra = sorted(set(folders) - set(cls))
    if extra:
        raise ValueError(f"{name}: folder(s) {extra} in {str(d)!r} are not in classes {cls}")
    rows = []
    for c, files in folders.items():
        for f in files:
            rel = f.relative_to(d)
            rows.append(
                {
                    "id": str(rel.with_suffix("")),
                    "path": str(f.relative_to(r)),
                    "label": cls.index(c),
                    "class_name": c,
                }
            )
    return PathologyImageDataset(
        pd.DataFrame(rows),
        root=r,
        classes=cls,
        name=name,
        transform=transform,
        meta_columns=("class_name",),
    )
