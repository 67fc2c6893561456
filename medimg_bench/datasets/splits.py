"""Patient-level (group) splits and leakage checks.

A split never puts two rows of one patient (``group_column``) in different parts. With
``stratify``, groups are assigned by iterative stratification (Sechidis et al., 2011) applied to
group-level label profiles, so every part gets close to its fraction of each label value
(multi-class, or multi-label with several 0/1 columns), then unlabelled groups fill the parts
towards their sample-count targets. Every choice is deterministic for a given ``seed``.

:func:`leakage_report` lists patients (or any other id columns) shared by two splits, and with
``hash_images=True`` exact duplicate image files (SHA-1 of the file bytes, no decoding).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "assign_groups",
    "patient_split",
    "kfold_patient_split",
    "LeakageReport",
    "leakage_report",
    "assert_no_leakage",
    "file_sha1",
    "split_pairs",
]

DEFAULT_FRACTIONS = {"train": 0.7, "val": 0.1, "test": 0.2}


def _manifest_of(data: Any) -> pd.DataFrame:
    manifest = getattr(data, "manifest", data)
    if not isinstance(manifest, pd.DataFrame):
        raise TypeError(
            f"expected a ManifestDataset or a pandas DataFrame, got {type(data).__name__}"
        )
    return manifest


def _name_of(data: Any, default: str) -> str:
    return str(getattr(data, "name", None) or default)


def _normalise_fractions(fractions: Mapping[str, float] | int) -> dict[str, float]:
    if isinstance(fractions, bool):
        raise ValueError(f"fractions must be a dict of split -> fraction or an int, got {fractions!r}")
    if isinstance(fractions, int):
        if fractions < 2:
            raise ValueError(f"a k-fold split needs at least 2 folds, got {fractions}")
        return {f"fold{i}": 1.0 / fractions for i in range(fractions)}
    out = {str(k): float(v) for k, v in dict(fractions).items()}
    if not out:
        raise ValueError("fractions is empty")
    bad = {k: v for k, v in out.items() if not np.isfinite(v) or v < 0}
    if bad:
        raise ValueError(f"fractions must be finite and >= 0, got {bad}")
    total = sum(out.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"fractions must sum to 1, got {total:g} from {out}")
    return out


def _is_binary(values: pd.Series) -> bool:
    v = pd.to_numeric(values, errors="coerce")
    if v.isna().sum() != values.isna().sum():
        return False  # non-numeric strings
    return bool(v.dropna().isin([-1, 0, 1]).all())


def _label_matrix(manifest: pd.DataFrame, stratify: str | Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Per-row label indicators (rows × label dims) and the dims' names.

    One column: one dim per distinct value (a cell holding a list/tuple counts each item, which
    covers multi-label lists). Several columns: a 0/1(/-1/blank) column adds one dim counting
    positives (value 1); any other column adds one dim per distinct value.
    """
    columns = [stratify] if isinstance(stratify, str) else list(stratify)
    if not columns:
        raise ValueError("stratify names no column")
    blocks: list[np.ndarray] = []
    names: list[str] = []
    for col in columns:
        if col not in manifest.columns:
            raise ValueError(f"stratify column {col!r} is not in the manifest ({list(manifest.columns)})")
        values = manifest[col]
        if len(columns) > 1 and _is_binary(values):
            blocks.append((pd.to_numeric(values, errors="coerce") == 1).to_numpy(float)[:, None])
            names.append(str(col))
            continue
        cells = [
            list(v) if isinstance(v, (list, tuple, set, np.ndarray)) else ([] if pd.isna(v) else [v])
            for v in values
        ]
        levels = sorted({item for c in cells for item in c}, key=lambda x: (str(type(x)), str(x)))
        index = {lv: i for i, lv in enumerate(levels)}
        block = np.zeros((len(cells), len(levels)))
        for r, c in enumerate(cells):
            for item in c:
                block[r, index[item]] = 1.0
        blocks.append(block)
        names += [f"{col}={lv}" for lv in levels]
    return np.concatenate(blocks, axis=1), names


def assign_groups(
    manifest_or_dataset: Any,
    *,
    fractions: Mapping[str, float] | int = DEFAULT_FRACTIONS,
    group_column: str = "patient_id",
    stratify: str | Sequence[str] | None = None,
    seed: int = 0,
) -> pd.Series:
    """The split name of every row (a Series aligned with the manifest's rows).

    ``fractions`` maps split name → fraction of rows (summing to 1), or is an int ``k`` for ``k``
    equal folds named ``fold0``…. All rows of one ``group_column`` value get the same split.
    """
    manifest = _manifest_of(manifest_or_dataset)
    fracs = _normalise_fractions(fractions)
    if group_column not in manifest.columns:
        raise ValueError(
            f"{_name_of(manifest_or_dataset, 'manifest')}: no group column {group_column!r} "
            f"(columns: {list(manifest.columns)})"
        )
    groups_col = manifest[group_column]
    if groups_col.isna().any():
        first = manifest.index[groups_col.isna()][0]
        raise ValueError(
            f"{_name_of(manifest_or_dataset, 'manifest')}: {int(groups_col.isna().sum())} rows have "
            f"no {group_column!r} (first: row {first}); every row needs a group to split by"
        )
    codes, uniques = pd.factorize(groups_col.astype(str), sort=True)
    n_groups = len(uniques)
    sizes = np.bincount(codes, minlength=n_groups).astype(float)
    if stratify is not None:
        labels, _ = _label_matrix(manifest, stratify)
        profiles = np.zeros((n_groups, labels.shape[1]))
        np.add.at(profiles, codes, labels)
    else:
        profiles = np.zeros((n_groups, 0))

    names = list(fracs)
    frac = np.array([fracs[n] for n in names])
    active = frac > 0
    rng = np.random.default_rng(seed)
    # a seeded random order, then larger groups first (keeps the parts' sizes tight)
    order = rng.permutation(n_groups)
    order = order[np.argsort(-sizes[order], kind="stable")]

    want_rows = frac * sizes.sum()
    want_labels = frac[:, None] * profiles.sum(axis=0)[None, :]
    split_of = np.full(n_groups, -1)
    remaining = profiles.copy()

    def pick(scores: list[np.ndarray]) -> int:
        cand = np.flatnonzero(active)
        for s in scores:
            best = s[cand].max()
            cand = cand[np.isclose(s[cand], best, rtol=0, atol=1e-9)]
            if len(cand) == 1:
                return int(cand[0])
        return int(rng.choice(cand))

    def put(g: int, s: int) -> None:
        split_of[g] = s
        want_rows[s] -= sizes[g]
        want_labels[s] -= profiles[g]
        remaining[g] = 0.0

    # iterative stratification: the label with the fewest unassigned positives goes first
    while profiles.shape[1] and remaining.any():
        left = remaining.sum(axis=0)
        left[left <= 0] = np.inf
        lab = int(np.argmin(left))
        for g in order[(split_of[order] < 0) & (remaining[order, lab] > 0)]:
            put(int(g), pick([want_labels[:, lab], want_rows]))
    for g in order[split_of[order] < 0]:
        put(int(g), pick([want_rows]))
    return pd.Series(np.asarray(names, dtype=object)[split_of[codes]], index=manifest.index, name="split")


def _take(data: Any, mask: np.ndarray) -> Any:
    manifest = _manifest_of(data)
    if isinstance(data, pd.DataFrame):
        return data[mask].reset_index(drop=True)
    if hasattr(data, "with_manifest"):
        return data.with_manifest(manifest[mask])
    raise TypeError(f"cannot take a subset of {type(data).__name__}")


def patient_split(
    manifest_or_dataset: Any,
    *,
    fractions: Mapping[str, float] | int = DEFAULT_FRACTIONS,
    group_column: str = "patient_id",
    stratify: str | Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Split by patient: split name → part, of the input's type (a ``ManifestDataset`` gives
    datasets sharing its root and transform; a DataFrame gives DataFrames).

    ``fractions``: split name → fraction of rows (default 70/10/20 train/val/test), or an int
    ``k`` for ``k`` equal folds. ``stratify``: label column(s) to balance across parts. No value
    of ``group_column`` appears in two parts; the result is the same for the same ``seed``.
    """
    assignment = assign_groups(
        manifest_or_dataset, fractions=fractions, group_column=group_column, stratify=stratify, seed=seed
    ).to_numpy()
    return {name: _take(manifest_or_dataset, assignment == name) for name in _normalise_fractions(fractions)}


def kfold_patient_split(
    manifest_or_dataset: Any,
    *,
    n_folds: int = 5,
    group_column: str = "patient_id",
    stratify: str | Sequence[str] | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """``n_folds`` (train, test) pairs by patient: a list of ``{"train": ..., "test": ...}``.

    Every row is in exactly one test part; no patient is in both parts of a fold.
    """
    assignment = assign_groups(
        manifest_or_dataset, fractions=n_folds, group_column=group_column, stratify=stratify, seed=seed
    ).to_numpy()
    folds = []
    for i in range(n_folds):
        test = assignment == f"fold{i}"
        folds.append({"train": _take(manifest_or_dataset, ~test), "test": _take(manifest_or_dataset, test)})
    return folds


# -- leakage ------------------------------------------------------------------------------------


@dataclass
class LeakageReport:
    """What two splits share. ``shared``: column → values found in both; ``duplicates``: exact
    duplicate image files (one dict per pair: ``sha1``, ``id_a``, ``path_a``, ``id_b``, ``path_b``)."""

    name_a: str
    name_b: str
    shared: dict[str, list[str]] = field(default_factory=dict)
    duplicates: list[dict[str, str]] = field(default_factory=list)
    hashed: bool = False

    @property
    def ok(self) -> bool:
        return not self.duplicates and not any(self.shared.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.name_a,
            "b": self.name_b,
            "ok": self.ok,
            "shared": {k: list(v) for k, v in self.shared.items()},
            "duplicates": [dict(d) for d in self.duplicates],
            "hashed": self.hashed,
        }

    def format(self, *, limit: int = 10) -> str:
        """A few readable lines (at most ``limit`` examples per kind)."""
        head = f"leakage {self.name_a} <-> {self.name_b}: "
        if self.ok:
            checked = ", ".join(self.shared) + (" + image hashes" if self.hashed else "")
            return head + f"none ({checked})"
        lines = [head + "FOUND"]
        for col, values in self.shared.items():
            if values:
                ex = ", ".join(map(str, values[:limit])) + (" ..." if len(values) > limit else "")
                lines.append(f"  {len(values)} {col} value(s) in both: {ex}")
        if self.duplicates:
            lines.append(f"  {len(self.duplicates)} identical image file pair(s):")
            for d in self.duplicates[:limit]:
                lines.append(f"    {d['id_a']} ({d['path_a']}) == {d['id_b']} ({d['path_b']})")
        return "\n".join(lines)


_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha1(path: str | Path) -> str:
    """SHA-1 hex digest of a file's bytes; of a directory (a DICOM series), the digest of its
    files' relative names and digests in sorted order. File digests are remembered per
    (path, size, mtime) within the process."""
    p = Path(path)
    if p.is_dir():
        h = hashlib.sha1(usedforsecurity=False)
        for f in sorted(q for q in p.rglob("*") if q.is_file()):
            h.update(f"{f.relative_to(p)}\0{file_sha1(f)}\n".encode())
        return h.hexdigest()
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        h = hashlib.sha1(usedforsecurity=False)
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        _HASH_CACHE[key] = h.hexdigest()
    return _HASH_CACHE[key]


def _image_columns(data: Any, image_columns: Sequence[str] | None) -> list[str]:
    if image_columns is not None:
        return list(image_columns)
    col = getattr(data, "image_column", None)
    if isinstance(col, str):
        return [col]
    paths = list(getattr(data, "path_columns", ()) or ())
    # masks and label maps repeat across patients (e.g. empty masks): hash the image column only
    return paths[:1]


def _hash_index(data: Any, image_columns: Sequence[str] | None) -> dict[str, list[tuple[str, str]]]:
    """sha1 → [(id, path)] for the readable image files of ``data``."""
    manifest = _manifest_of(data)
    resolve = getattr(data, "resolve", lambda p: Path(p))
    index: dict[str, list[tuple[str, str]]] = {}
    cols = _image_columns(data, image_columns)
    if not cols:
        raise ValueError(
            f"{_name_of(data, 'manifest')}: no image path column to hash; pass image_columns="
        )
    for col in cols:
        if col not in manifest.columns:
            raise ValueError(f"{_name_of(data, 'manifest')}: no image column {col!r} to hash")
        for sid, value in zip(manifest["id"].astype(str), manifest[col]):
            items = value if isinstance(value, (list, tuple)) else [value]
            for v in items:
                if v is None or (isinstance(v, float) and pd.isna(v)):
                    continue
                path = resolve(v)
                if not os.path.exists(path):
                    continue  # missing files are reported by check(), not here
                index.setdefault(file_sha1(path), []).append((sid, str(path)))
    return index


def leakage_report(
    a: Any,
    b: Any,
    *,
    by: Sequence[str] | str = ("patient_id",),
    hash_images: bool = False,
    image_columns: Sequence[str] | None = None,
    names: tuple[str, str] | None = None,
) -> LeakageReport:
    """What splits ``a`` and ``b`` (datasets or manifests) share: the values of each ``by``
    column found in both, and with ``hash_images`` the image files with identical bytes.

    ``image_columns`` defaults to the dataset's ``image_column`` or its first path column.
    """
    ma, mb = _manifest_of(a), _manifest_of(b)
    name_a, name_b = names or (_name_of(a, "a"), _name_of(b, "b"))
    report = LeakageReport(name_a=name_a, name_b=name_b, hashed=hash_images)
    for col in [by] if isinstance(by, str) else list(by):
        for m, n in ((ma, name_a), (mb, name_b)):
            if col not in m.columns:
                raise ValueError(f"leakage check: {n} has no column {col!r}")
        va = set(ma[col].dropna().astype(str))
        vb = set(mb[col].dropna().astype(str))
        report.shared[col] = sorted(va & vb)
    if hash_images:
        ha, hb = _hash_index(a, image_columns), _hash_index(b, image_columns)
        for digest in sorted(ha.keys() & hb.keys()):
            for id_a, path_a in ha[digest]:
                for id_b, path_b in hb[digest]:
                    report.duplicates.append(
                        {"sha1": digest, "id_a": id_a, "path_a": path_a, "id_b": id_b, "path_b": path_b}
                    )
    return report


def assert_no_leakage(
    a: Any,
    b: Any,
    *,
    by: Sequence[str] | str = ("patient_id",),
    hash_images: bool = False,
    image_columns: Sequence[str] | None = None,
) -> None:
    """Raise ``ValueError`` describing the leak if ``a`` and ``b`` share a patient (or any ``by``
    value) or, with ``hash_images``, an identical image file; return None otherwise."""
    report = leakage_report(a, b, by=by, hash_images=hash_images, image_columns=image_columns)
    if not report.ok:
        raise ValueError(report.format())


def split_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """Every unordered pair of split names, in the given order."""
    names = list(names)
    return [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))]
