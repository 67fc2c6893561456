"""What the chest X-ray loaders do alike when they read an official layout: the options every
loader takes (:func:`cxr_loader`), label tables with their file line numbers, the split a layout
names, option values checked against their choices, the first offending row of a table, columns
a release may lack."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench.datasets.cxr.base import (
    CXRDataset,
    cxr_options,
    first_existing,
    need_columns,
    numbered_lines,
    read_csv,
)
from medimg_bench.registry import register_dataset

__all__ = [
    "SHARED_OPTIONS",
    "check_choice",
    "cxr_loader",
    "first_true",
    "optional_column",
    "read_table",
    "split_file",
    "train_split_only",
]


def alternatives(values: Sequence[str]) -> str:
    """``'a', 'b' or 'c'``: the allowed values as the loaders' messages list them."""
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def check_choice(
    name: str, option: str, value: Any, allowed: Sequence[str], *, shown: Sequence[str] | None = None
) -> None:
    """Raise ``ValueError`` ("``name``: ``option`` must be 'a' or 'b', got …") unless ``value`` is
    one of ``allowed``; ``shown`` lists the values named in the message (default ``allowed``)."""
    if value not in allowed:
        raise ValueError(f"{name}: {option} must be {alternatives(shown or allowed)}, got {value!r}")


def train_split_only(name: str, split: str) -> None:
    """Raise unless ``split`` is ``train`` (or ``all``, the same): layouts that label only train."""
    if split not in ("train", "all"):
        raise ValueError(
            f"{name}: only the training set is labelled; split must be 'train', got {split!r}"
        )


def read_table(path: Path, name: str, columns: Sequence[str] = (), **read_kw: Any) -> pd.DataFrame:
    """The CSV at ``path`` with a ``_line`` column (1-based file line, after the header); raises
    naming the file when it cannot be read or lacks one of ``columns``."""
    df = numbered_lines(read_csv(path, name, **read_kw))
    need_columns(df, columns, path, name)
    return df


def split_file(
    folder: Path,
    files: Mapping[str, Sequence[str]],
    split: str,
    *,
    name: str,
    what: str,
    shown: Sequence[str],
) -> Path:
    """The first file of ``files[split]`` (glob patterns) under ``folder``. Raises when ``split``
    is not in ``files`` (the message names the ``shown`` splits) or no such file exists (the
    message names the ``split`` and ``what``)."""
    check_choice(name, "split", split, list(files), shown=shown)
    return first_existing(folder, files[split], name, f"{split} {what}")


def first_true(mask: pd.Series | np.ndarray) -> int | None:
    """Position of the first set entry of a boolean row mask (``None`` when none is set)."""
    hits = np.flatnonzero(np.asarray(mask))
    return int(hits[0]) if hits.size else None


def optional_column(df: pd.DataFrame, *columns: str) -> pd.Series:
    """The first of ``columns`` that ``df`` has (releases spell some differently), else NaN."""
    column = next((c for c in columns if c in df.columns), None)
    return df[column] if column is not None else pd.Series(np.nan, index=df.index)


#: The keyword options every official-layout loader takes after its own: (default, annotation).
SHARED_OPTIONS: dict[str, tuple[Any, str]] = {
    "normalize": ("auto", "str"),
    "channels": (1, "int"),
    "views": (None, "Sequence[str] | None"),
    "on_missing": ("error", "str"),
    "transform": (None, "Callable[[dict], dict] | None"),
}


def _loader_signature(build: Callable[..., CXRDataset]) -> inspect.Signature:
    """``build``'s parameters without ``opts``, then :data:`SHARED_OPTIONS` and ``**options``:
    the signature the loaders had when each wrote the shared options out."""
    own = [p for p in inspect.signature(build).parameters.values() if p.name != "opts"]
    kw = inspect.Parameter.KEYWORD_ONLY
    shared = [inspect.Parameter(k, kw, default=d, annotation=a) for k, (d, a) in SHARED_OPTIONS.items()]
    rest = inspect.Parameter("options", inspect.Parameter.VAR_KEYWORD, annotation="Any")
    return inspect.Signature([*own, *shared, rest], return_annotation="CXRDataset")


def cxr_loader(
    name: str, *, tags: Sequence[str]
) -> Callable[[Callable[..., CXRDataset]], Callable[..., CXRDataset]]:
    """Register ``build(root, split, *, <its own options>, opts)`` as the dataset ``name``.

    The registered loader takes ``build``'s parameters, then the options of
    :data:`SHARED_OPTIONS` (``normalize``, ``channels``, ``views``, ``on_missing``,
    ``transform``), and raises ``TypeError`` naming any other keyword before ``build`` runs;
    ``build`` gets the shared ones bundled as ``opts`` (:class:`~.base.Options`, which builds
    the dataset). ``inspect.signature`` of the loader lists every option with its default."""

    def wrap(build: Callable[..., CXRDataset]) -> Callable[..., CXRDataset]:
        signature = _loader_signature(build)

        @functools.wraps(build)
        def loader(*args: Any, **kwargs: Any) -> CXRDataset:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:  # a call Python itself would refuse: say whose
                raise TypeError(f"{name}: {exc}") from None
            bound.apply_defaults()
            given = dict(bound.arguments)
            opts = cxr_options(name, given.pop("options"), *(given.pop(k) for k in SHARED_OPTIONS))
            return build(**given, opts=opts)

        loader.__signature__ = signature  # type: ignore[attr-defined]
        return register_dataset(name, tags=tuple(tags))(loader)

    return wrap

