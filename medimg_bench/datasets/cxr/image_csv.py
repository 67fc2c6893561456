"""The ``csv`` dataset. Any image folder + CSV (``csv`` is relative to ``root``; image paths relative to ``root``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.base import dataset_root
from medimg_bench.datasets.columns import match_class_columns
from medimg_bench.datasets.cxr._layout import check_choice, first_true, read_table
from medimg_bench.datasets.cxr.base import CXRDataset, cxr_options
from medimg_bench.datasets.cxr.labels import apply_uncertainty
from medimg_bench.registry import register_dataset

__all__ = ["csv_dataset"]

log = logging.getLogger(__name__)


@register_dataset("csv", tags=("cxr", "classification", "generic"))
def csv_dataset(
    root: str | Path,
    split: str = "test",
    *,
    csv: str = "labels.csv",
    image_column: str = "path",
    label_columns: str | Sequence[str] = "label",
    classes: Sequence[str] | None = None,
    id_column: str | None = None,
    patient_column: str | None = None,
    view_column: str | None = None,
    split_column: str | None = None,
    meta_columns: Sequence[str] = (),
    uncertainty: str = "ignore",
    blank: str = "nan",
    normalize: str = "auto",
    channels: int = 1,
    views: Sequence[str] | None = None,
    on_missing: str = "error",
    on_missing_label: str = "error",
    transform: Callable[[dict], dict] | None = None,
    **options: Any,
) -> CXRDataset:
    """Any image folder + CSV (``csv`` is relative to ``root``; image paths relative to ``root``).

    One label column → multi-class: values are class names (``classes`` given, else the sorted
    distinct values as strings); a value outside ``classes`` or blank raises, naming the row and
    file. Several label columns → multi-label, values 1/0/-1/blank mapped by ``uncertainty``
    and ``blank`` as for CheXpert; with ``classes`` given, label columns named after the classes
    are matched by name in any order (columns named otherwise are taken in order), and a class
    without a column or a column that is no class is an error listing both. ``split_column`` keeps rows equal to ``split`` (otherwise all
    rows are used). ``id_column`` defaults to the image path without suffix.

    ``on_missing_label`` (one label column): a blank label is an ``error`` (the message gives the
    count and the first three CSV lines), ``skip`` drops those rows (``dataset.dropped`` and the
    run summary say how many) or ``unlabelled`` keeps them with label NaN for prediction-only use
    (metrics ignore them; per-sample rows keep them). Multi-label blanks follow ``blank``."""
    name = "csv"
    check_choice(name, "on_missing_label", on_missing_label, ("error", "skip", "unlabelled"))
    opts = cxr_options(name, options, normalize, channels, views, on_missing, transform)
    r = dataset_root(root, name)
    path = Path(csv) if Path(csv).is_absolute() else r / csv
    if not path.exists():
        raise FileNotFoundError(f"{name}: label CSV {str(path)!r} does not exist")
    labels = [label_columns] if isinstance(label_columns, str) else list(label_columns)
    if not labels:
        raise ValueError(f"{name}: label_columns is empty")
    classes = list(labels) if classes is None and len(labels) > 1 else classes  # the user's spelling
    image_column, labels, id_column, patient_column, view_column, split_column, meta_columns = _named_columns(
        path, name, image_column, labels, (id_column, patient_column, view_column, split_column), meta_columns)
    extra = [c for c in (id_column, patient_column, view_column, split_column) if c]
    dtype = {c: str for c in [image_column, *extra]}
    df = read_table(path, name, [image_column, *labels, *extra, *meta_columns], dtype=dtype)
    if split_column:
        df = df[df[split_column].astype(str) == str(split)]
    columns = (image_column, id_column, patient_column, view_column)
    man = _base_manifest(df, columns, meta_columns)
    dropped: dict[str, int] = {}
    listed = man[["id", "path"]]
    if len(labels) == 1:
        df, man, cls, dropped = _single_label(
            df, man, labels[0], classes, path=path, on_missing_label=on_missing_label
        )
        multilabel = False
    else:
        man, cls = _multi_label(df, man, labels, classes, path=path, uncertainty=uncertainty, blank=blank)
        multilabel = True
    man["_line"] = df["_line"]
    ds = opts.finish(
        man,
        r,
        where=str(path),
        classes=cls,
        multilabel=multilabel,
        meta_columns=tuple(meta_columns),
    )
    ds.dropped = dropped
    for sid, p in listed.loc[listed.index.difference(man.index)].itertuples(index=False):  # accounted for
        ds.exclude(sid, file=p, reason=f"blank label in {labels[0]!r} (on_missing_label=skip)")
    return ds


def _named_columns(path: Path, name: str, image_column: str, labels: list[str],
                   optional: tuple[str | None, ...], meta_columns: Sequence[str]) -> tuple[Any, ...]:
    """The CSV's own spelling of every column the options name, found up to case and punctuation
    by the one column matcher (``Path`` for ``path``; two candidates refused listing them); a
    name the CSV lacks is kept as given, for :func:`read_table` to refuse listing the columns."""
    from medimg_bench.datasets.columns import find_column

    try:
        header = [str(c).strip() for c in pd.read_csv(path, nrows=0).columns]
    except (OSError, ValueError):
        header = []  # read_table says why the file cannot be read

    def one(column: str | None) -> str | None:
        if column is None or column in header:
            return column
        return find_column(header, (column,), where=f"{name}: {str(path)!r}", what=repr(column),
                           required=False) or column

    return (one(image_column), [one(c) for c in labels], *(one(c) for c in optional),
            tuple(one(c) for c in meta_columns))


def _base_manifest(
    df: pd.DataFrame, columns: tuple[str, str | None, str | None, str | None], meta_columns: Sequence[str]
) -> pd.DataFrame:
    """Manifest columns path, id (default: path without suffix), patient_id, view and the meta
    columns, from the CSV's (image, id, patient, view) columns."""
    image_column, id_column, patient_column, view_column = columns
    man = pd.DataFrame({"path": df[image_column].astype(str)}, index=df.index)
    man["id"] = (
        df[id_column].astype(str)
        if id_column
        else [str(Path(p).with_suffix("")) for p in man["path"]]
    )
    if patient_column:
        man["patient_id"] = df[patient_column].where(df[patient_column].notna(), man["id"]).astype(str)
    man["view"] = df[view_column] if view_column else np.nan
    for c in meta_columns:
        man[c] = df[c]
    return man


def _single_label(
    df: pd.DataFrame,
    man: pd.DataFrame,
    column: str,
    classes: Sequence[str] | None,
    *,
    path: Path,
    on_missing_label: str,
) -> tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, int]]:
    """Multi-class labels from one column: the rows kept (CSV and manifest, ``label`` set), the
    class names and the dropped-row counts."""
    name = "csv"
    dropped: dict[str, int] = {}
    col = df[column]
    blank_rows = col.isna() | (col.astype(str).str.strip() == "")
    if blank_rows.any() and on_missing_label == "error":
        idx = np.flatnonzero(blank_rows.to_numpy())
        first = ", ".join(
            f"line {df['_line'].iloc[i]} (image {man['path'].iloc[i]!r})" for i in idx[:3]
        )
        raise ValueError(
            f"{name}: {str(path)!r}: {len(idx)} row(s) with a blank label in {column!r}, "
            f"first: {first}; set on_missing_label=skip to drop them or "
            "on_missing_label=unlabelled to keep them without a label"
        )
    if blank_rows.any() and on_missing_label == "skip":
        dropped["missing_label"] = int(blank_rows.sum())
        keep = ~blank_rows.to_numpy()
        df, man, col = df[keep], man[keep], col[keep]
        blank_rows = blank_rows[keep]
        log.warning("%s: %s: dropped %d row(s) with a blank label in %r", name, path,
                    dropped["missing_label"], column)
    unlabelled = blank_rows.to_numpy()
    col = col.where(~blank_rows, "")
    as_str = col.map(
        lambda v: str(int(v)) if isinstance(v, float) and float(v).is_integer() else str(v)
    )
    cls = [str(c) for c in classes] if classes is not None else sorted(as_str.unique().tolist())
    index = {c: i for i, c in enumerate(cls)}
    if classes is None and unlabelled.any():
        cls = [c for c in cls if c != ""]
        index = {c: i for i, c in enumerate(cls)}
    i = first_true(~as_str.isin(list(index)) & ~unlabelled)
    if i is not None:
        raise ValueError(
            f"{name}: {str(path)!r} line {df['_line'].iloc[i]} (image {man['path'].iloc[i]!r}): label "
            f"{as_str.iloc[i]!r} is not one of the classes {cls}"
        )
    mapped = as_str.map(index)
    man["label"] = mapped.astype(float) if unlabelled.any() else mapped.astype(int)
    return df, man, cls, dropped


def _multi_label(
    df: pd.DataFrame,
    man: pd.DataFrame,
    labels: list[str],
    classes: Sequence[str] | None,
    *,
    path: Path,
    uncertainty: str,
    blank: str,
) -> tuple[pd.DataFrame, list[str]]:
    """Multi-label: the manifest with one column per class (CheXpert's uncertainty rules), and
    the class names."""
    name = "csv"
    cls = [str(c) for c in classes] if classes is not None else [str(c) for c in labels]
    # by name when the label columns carry the class names (any order); in order otherwise
    order = match_class_columns(labels, cls, where=f"{name}: {str(path)!r}", what="label columns",
                                positional=True)
    values = apply_uncertainty(df[order], uncertainty, blank=blank, source=str(path),
                               lines=df["_line"].tolist())
    values.columns = cls
    return pd.concat([man, values], axis=1), cls
