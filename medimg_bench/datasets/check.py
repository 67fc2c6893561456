"""Integrity checks of a dataset or a set of splits, before a benchmark runs on them.

:func:`check_dataset` lists missing files, unreadable samples, labels outside the class list,
label counts per split and leakage between every pair of splits; :func:`check_from_config`
builds the splits named in a dataset config and checks them; :func:`run_check` prints the
report and returns the exit code of ``medimg-bench datasets check <config>``:

* ``0`` — no problem found;
* ``1`` — problems found (missing/unreadable files, bad labels, leakage, a split that could not
  be built);
* ``2`` — the config itself is invalid (no ``name``, unknown dataset, unreadable file).

:class:`SkipErrors` and :func:`skip_unreadable` give ``on_error="skip"`` behaviour to any
dataset: unreadable samples are logged one by one and counted at the end.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.cache import Wrapper
from medimg_bench.datasets.splits import LeakageReport, leakage_report, split_pairs

__all__ = [
    "SplitCheck",
    "CheckReport",
    "check_dataset",
    "check_from_config",
    "load_dataset_config",
    "run_check",
    "SkipErrors",
    "skip_collate",
    "skip_unreadable",
]

log = logging.getLogger(__name__)

EXIT_OK, EXIT_PROBLEMS, EXIT_CONFIG = 0, 1, 2
SPLIT_KEYS = ("train_split", "val_split", "split")


@dataclass
class SplitCheck:
    """Findings for one split. Problem lists hold one dict per problem (``id`` and ``path``
    where known, ``problem``)."""

    name: str
    n_samples: int
    n_patients: int
    n_read: int = 0
    fingerprint: str = ""
    missing: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[dict[str, Any]] = field(default_factory=list)
    bad_labels: list[dict[str, Any]] = field(default_factory=list)
    off_grid: list[dict[str, Any]] = field(default_factory=list)
    label_counts: dict[str, int] = field(default_factory=dict)
    label_source: str | None = None  # "manifest", "samples" or None (no labels found)
    # items the layout lists that are not samples (``dataset.exclusions``): listed, not problems
    excluded: list[dict[str, Any]] = field(default_factory=list)

    @property
    def n_problems(self) -> int:
        return len(self.missing) + len(self.unreadable) + len(self.bad_labels) + len(self.off_grid)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "n_samples": self.n_samples,
            "n_patients": self.n_patients,
            "n_read": self.n_read,
            "fingerprint": self.fingerprint,
            "missing": self.missing,
            "unreadable": self.unreadable,
            "bad_labels": self.bad_labels,
            "off_grid": self.off_grid,
            "label_counts": self.label_counts,
            "label_source": self.label_source,
            "excluded": self.excluded,
        }


@dataclass
class CheckReport:
    """The result of :func:`check_dataset`: one :class:`SplitCheck` per split, the pairwise
    leakage reports and ``errors`` (splits that could not be built)."""

    dataset: str
    splits: dict[str, SplitCheck] = field(default_factory=dict)
    leakage: list[LeakageReport] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: what was not checked and why (a training split absent from a test-only folder): no problem
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.errors
            and all(s.n_problems == 0 for s in self.splits.values())
            and all(lk.ok for lk in self.leakage)
        )

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.ok else EXIT_PROBLEMS

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of everything found."""
        return {
            "dataset": self.dataset,
            "ok": self.ok,
            "errors": list(self.errors),
            "notes": list(self.notes),
            "splits": {k: v.to_dict() for k, v in self.splits.items()},
            "leakage": [lk.to_dict() for lk in self.leakage],
        }

    def format(self, *, limit: int = 10) -> str:
        """A readable text report: a table per split, label counts, leakage, then at most
        ``limit`` examples of each kind of problem."""
        lines = [f"dataset {self.dataset}"]
        header = ["split", "samples", "excluded", "patients", "read", "missing", "unreadable", "bad labels",
                  "off-grid"]
        rows = [
            [s.name, s.n_samples, len(s.excluded), s.n_patients, s.n_read, len(s.missing), len(s.unreadable),
             len(s.bad_labels), len(s.off_grid)]
            for s in self.splits.values()
        ]
        if rows:
            lines += _table(header, rows)
        labels: list[str] = []
        for s in self.splits.values():
            labels += [k for k in s.label_counts if k not in labels]
        if labels:
            names = list(self.splits)
            sources = {s.label_source for s in self.splits.values() if s.label_source}
            where = (
                f"from {sources.pop()}" if len(sources) == 1
                else ", ".join(f"{n}: from {s.label_source}" for n, s in self.splits.items() if s.label_source)
            )
            lines += ["", f"label counts ({where})"]
            lines += _table(["label", *names], [[lb] + [self.splits[n].label_counts.get(lb, 0) for n in names] for lb in labels])
        if self.leakage:
            lines.append("")
            lines += [lk.format(limit=limit) for lk in self.leakage]
        problems = []
        for s in self.splits.values():
            for kind, items in (("missing", s.missing), ("unreadable", s.unreadable),
                                ("bad label", s.bad_labels), ("off-grid mask", s.off_grid)):
                for p in items[:limit]:
                    where = f"{p.get('id')}" + (f" ({p['path']})" if p.get("path") else "")
                    problems.append(f"  [{s.name}] {kind}: {where}: {p.get('problem', '')}")
                if len(items) > limit:
                    problems.append(f"  [{s.name}] ... {len(items) - limit} more {kind}")
        problems += [f"  error: {e}" for e in self.errors]
        lines += _excluded_lines(self.splits.values(), limit)
        if self.notes:
            lines += ["", "notes:"] + [f"  {n}" for n in self.notes]
        if problems:
            lines += ["", "problems:"] + problems
        n = sum(s.n_problems for s in self.splits.values()) + len(self.errors)
        n += sum(0 if lk.ok else 1 for lk in self.leakage)
        lines += ["", "status: OK" if self.ok else f"status: FAILED ({n} problem(s))"]
        return "\n".join(lines)


def _excluded_lines(splits: Any, limit: int) -> list[str]:
    """The items each split's layout lists that are not samples, with file and reason: at most
    ``limit`` per split, the rest counted (they are not problems, but never silent)."""
    lines: list[str] = []
    for s in splits:
        for e in s.excluded[:limit]:
            where = f" ({e['file']})" if e.get("file") else ""
            lines.append(f"  [{s.name}] {e.get('id')}{where}: {e.get('reason', '')}")
        if len(s.excluded) > limit:
            lines.append(f"  [{s.name}] ... {len(s.excluded) - limit} more excluded")
    return ["", "excluded (listed by the layout, not samples):"] + lines if lines else []


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return [fmt(cells[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in cells[1:]]


# -- labels --------------------------------------------------------------------------------------


def _manifest_label_columns(ds: Any) -> list[str]:
    manifest = ds.manifest
    cols = getattr(ds, "label_columns", None)
    if cols:
        return [c for c in cols if c in manifest.columns]
    classes = getattr(ds, "classes", None)
    if classes and len(classes) > 1 and all(str(c) in manifest.columns for c in classes):
        return [str(c) for c in classes]
    return ["label"] if "label" in manifest.columns else []


def _manifest_labels(ds: Any, sc: SplitCheck) -> bool:
    """Fill ``sc`` with label counts and bad labels from the manifest; False if it has none."""
    cols = _manifest_label_columns(ds)
    if not cols:
        return False
    manifest, classes = ds.manifest, getattr(ds, "classes", None)
    counts: Counter[str] = Counter()
    if len(cols) == 1:
        col = cols[0]
        for sid, value in zip(manifest["id"], manifest[col]):
            if isinstance(value, (list, tuple)) or pd.isna(value):
                continue
            name, problem = _class_name(value, classes)
            if problem:
                sc.bad_labels.append({"id": sid, "column": col, "label": _py(value), "problem": problem})
            else:
                counts[name] += 1
    else:
        for col in cols:
            values = manifest[col]
            numeric = pd.to_numeric(values, errors="coerce")
            bad = values.notna() & ~numeric.isin([-1, 0, 1])
            for sid, value in zip(manifest["id"][bad], values[bad]):
                sc.bad_labels.append({
                    "id": sid, "column": col, "label": _py(value),
                    "problem": f"label {value!r} in column {col!r} is not 1, 0, -1 or blank",
                })
            counts[col] = int((numeric == 1).sum())
    sc.label_counts = dict(counts)
    sc.label_source = "manifest"
    return True


def _py(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _class_name(value: Any, classes: Sequence[str] | None) -> tuple[str, str | None]:
    """(class name, problem) of a single-label value against the class list."""
    value = _py(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if classes is None:
        return str(value), None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        if 0 <= value < len(classes):
            return str(classes[value]), None
        return "", f"label index {value} outside the {len(classes)} classes"
    if str(value) in [str(c) for c in classes]:
        return str(value), None
    return "", f"label {value!r} is not in the class list {list(classes)}"


def _sample_labels(ds: Any, sample: Mapping[str, Any], counts: Counter[str]) -> list[str]:
    """Count the labels of a loaded sample; return the problems found."""
    classes = getattr(ds, "classes", None)
    problems = []
    label = sample.get("label")
    if isinstance(label, torch.Tensor) and label.ndim == 0:
        label = label.item()
    if isinstance(label, (int, np.integer)) and not isinstance(label, bool):
        name, problem = _class_name(int(label), classes)
        if problem:
            problems.append(problem)
        else:
            counts[name] += 1
    elif getattr(ds, "task", None) == "regression" and isinstance(label, (torch.Tensor, np.ndarray)):
        vec = torch.as_tensor(label, dtype=torch.float64)  # real-valued targets (hest1k expression)
        if classes is not None and vec.shape[-1:] != (len(classes),):
            problems.append(f"target has shape {tuple(vec.shape)} for {len(classes)} outputs")
        if not torch.isfinite(vec).all():
            problems.append("target has NaN or infinite values")
    elif isinstance(label, (torch.Tensor, np.ndarray)) and label.ndim == 1:
        vec = torch.as_tensor(label, dtype=torch.float64)
        if classes is not None and len(vec) != len(classes):
            problems.append(f"multi-hot label has {len(vec)} entries for {len(classes)} classes")
        known = vec[~torch.isnan(vec)]
        if ((known < 0) | (known > 1)).any():
            problems.append(f"multi-hot label values outside [0, 1]: {sorted(set(known.tolist()))}")
        names = list(classes) if classes is not None and len(classes) == len(vec) else range(len(vec))
        for name, v in zip(names, vec.tolist()):
            counts[str(name)] += int(v == 1)
    mask = sample.get("mask")
    if isinstance(mask, torch.Tensor) and getattr(ds, "task", None) == "segmentation":
        values = torch.unique(mask).tolist()
        if classes is not None:
            outside = [v for v in values if not 0 <= v < len(classes)]
            if outside:
                problems.append(f"mask values {outside} outside the {len(classes)} classes (0 = background)")
        for v in values:
            name = str(classes[v]) if classes is not None and 0 <= v < len(classes) else str(v)
            counts[name] += 1
    return problems


# -- check ---------------------------------------------------------------------------------------


def _error_path(exc: BaseException) -> str | None:
    for e in (exc, exc.__cause__):
        for attr in ("path", "filename"):
            p = getattr(e, attr, None)
            if p:
                return str(p)
    return None


def _problem(exc: BaseException) -> str:
    """``Type: message`` of the root error (a SampleError wrapper adds only the id and file)."""
    from medimg_bench.sample import SampleError

    if isinstance(exc, SampleError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}"


def _try_load(ds: Any, index: int) -> tuple[int, Any, BaseException | None]:
    try:
        return index, ds[index], None
    except Exception as exc:  # every failure is a finding here, whatever its type
        return index, None, exc


def _indices(n: int, max_samples: int | None, seed: int) -> list[int]:
    if max_samples is None or max_samples >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size=max_samples, replace=False).tolist())


def _check_split(
    name: str, ds: Any, *, read_pixels: bool, max_samples: int | None, num_workers: int, seed: int
) -> SplitCheck:
    manifest = ds.manifest
    sc = SplitCheck(
        name=name,
        n_samples=len(ds),
        n_patients=int(manifest["patient_id"].nunique()) if "patient_id" in manifest else len(ds),
        fingerprint=ds.fingerprint() if hasattr(ds, "fingerprint") else "",
    )
    sc.excluded = list(getattr(ds, "exclusions", None) or [])
    sc.missing = [dict(p, problem=p.get("problem", "missing file")) for p in ds.check()]
    sc.off_grid = _off_grid_pairs(ds, {str(p.get("id")) for p in sc.missing})
    have_manifest_labels = _manifest_labels(ds, sc)
    if not read_pixels:
        return sc
    missing_ids = {str(p["id"]) for p in sc.missing}
    ids = manifest["id"].astype(str).tolist()
    todo = [i for i in _indices(len(ds), max_samples, seed) if ids[i] not in missing_ids]
    counts: Counter[str] = Counter()
    if num_workers > 0:
        with ThreadPoolExecutor(max_workers=num_workers) as pool:
            results: Iterator = pool.map(lambda i: _try_load(ds, i), todo)
            results = iter(list(results))
    else:
        results = (_try_load(ds, i) for i in todo)
    for index, sample, exc in results:
        sc.n_read += 1
        if exc is not None:
            sc.unreadable.append({
                "id": ids[index], "path": _error_path(exc), "problem": _problem(exc),
            })
            continue
        for problem in _sample_labels(ds, sample, counts):
            # manifest-level checks already cover the label values themselves
            if not (have_manifest_labels and problem.startswith("label")):
                sc.bad_labels.append({"id": ids[index], "problem": problem})
    if not have_manifest_labels and counts:
        sc.label_counts = dict(counts)
        sc.label_source = "samples" if len(todo) == len(ds) else f"samples ({len(todo)} read)"
    return sc


_HEADER_SUFFIXES = (".nii", ".nii.gz", ".mgz", ".mgh")


def _off_grid_pairs(ds: Any, skip_ids: set[str]) -> list[dict[str, Any]]:
    """Image/mask pairs whose mask is not on the image grid, from the NIfTI headers alone (no
    pixels read), by the rule every loader applies (:mod:`medimg_bench.datasets.grid`)."""
    from medimg_bench.datasets.grid import grid_problem, header_grid

    manifest = ds.manifest
    image_col = "image" if "image" in manifest else getattr(ds, "image_column", None)
    mask_col = "mask" if "mask" in manifest else getattr(ds, "mask_column", None)
    if image_col not in manifest or mask_col not in manifest or not hasattr(ds, "resolve"):
        return []
    found = []
    for sid, image, mask in zip(manifest["id"].astype(str), manifest[image_col], manifest[mask_col]):
        if sid in skip_ids or not isinstance(image, str) or not isinstance(mask, str):
            continue  # multi-channel images (lists) are checked when loaded
        if not (image.lower().endswith(_HEADER_SUFFIXES) and mask.lower().endswith(_HEADER_SUFFIXES)):
            continue
        try:
            ishape, iaff = header_grid(ds.resolve(image))
            mshape, maff = header_grid(ds.resolve(mask))
        except Exception:  # unreadable headers are reported by the pixel pass
            continue
        problem = grid_problem(ishape, iaff, mshape, maff)
        if problem is not None:
            found.append({"id": sid, "path": str(ds.resolve(mask)),
                          "problem": f"{problem} (image {str(ds.resolve(image))!r})"})
    return found


def check_dataset(
    dataset_or_splits: Any,
    *,
    read_pixels: bool = True,
    max_samples: int | None = None,
    hash_images: bool = False,
    leakage_by: Sequence[str] = ("patient_id",),
    num_workers: int = 0,
    seed: int = 0,
    name: str | None = None,
) -> CheckReport:
    """Check one dataset or a dict of split name → dataset; returns a :class:`CheckReport`.

    Args:
        read_pixels: load every sample (``dataset[i]``) to find unreadable files and bad labels;
            False checks only the manifest and file existence.
        max_samples: read at most this many samples per split (a seeded random subset).
        hash_images: also look for identical image files across splits (SHA-1 of the bytes).
        leakage_by: manifest columns that must not share a value across splits.
        num_workers: threads reading samples (0: in this thread).
    """
    splits = dict(dataset_or_splits) if isinstance(dataset_or_splits, Mapping) else {
        str(getattr(dataset_or_splits, "split", None) or "all"): dataset_or_splits
    }
    first = next(iter(splits.values()), None)
    report = CheckReport(dataset=name or str(getattr(first, "name", None) or "dataset"))
    for split_name, ds in splits.items():
        report.splits[split_name] = _check_split(
            split_name, ds, read_pixels=read_pixels, max_samples=max_samples,
            num_workers=num_workers, seed=seed,
        )
    for a, b in split_pairs(splits):
        by = [c for c in leakage_by if c in splits[a].manifest and c in splits[b].manifest]
        report.leakage.append(
            leakage_report(splits[a], splits[b], by=by, hash_images=hash_images, names=(a, b))
        )
    return report


# -- configs -------------------------------------------------------------------------------------


def load_dataset_config(config: Any) -> dict[str, Any]:
    """A plain dict from a dataset config: a dict, an OmegaConf config, or a YAML file path (a
    top-level ``dataset:`` mapping is unwrapped). ``ValueError`` names what is wrong."""
    if isinstance(config, (str, Path)):
        path = Path(config)
        if not path.is_file():
            raise ValueError(f"dataset config {str(path)!r} does not exist")
        from omegaconf import OmegaConf

        try:
            config = OmegaConf.load(path)
        except Exception as exc:
            raise ValueError(f"dataset config {str(path)!r} cannot be parsed: {exc}") from exc
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        config = OmegaConf.to_container(config, resolve=True)
    if not isinstance(config, Mapping):
        raise ValueError(f"a dataset config must be a mapping, got {type(config).__name__}")
    cfg = dict(config)
    if "name" not in cfg and isinstance(cfg.get("dataset"), Mapping):
        cfg = dict(cfg["dataset"])
    if not isinstance(cfg.get("name"), str) or not cfg["name"]:
        raise ValueError(f"dataset config has no 'name' (keys: {sorted(cfg)})")
    options = cfg.get("options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"dataset config 'options' must be a mapping, got {type(options).__name__}")
    cfg["options"] = dict(options)
    return cfg


def check_from_config(
    cfg: Any,
    *,
    read_pixels: bool = True,
    max_samples: int | None = None,
    hash_images: bool = False,
    num_workers: int = 0,
) -> CheckReport:
    """Build every split named in a dataset config (``train_split``, ``val_split``, ``split``)
    with ``create_dataset(cfg["name"], root=cfg["root"], split=..., **cfg["options"])`` and check
    them together. A split that cannot be built is an error in the report; an invalid config or
    an unknown dataset name raises ``ValueError``."""
    from medimg_bench.registry import DATASETS, create_dataset

    cfg = load_dataset_config(cfg)
    name = cfg["name"]
    if name not in DATASETS:
        close = ", ".join(DATASETS.list(f"*{name[:4]}*")) if len(name) >= 4 else ""
        raise ValueError(f"unknown dataset {name!r}" + (f" (similar: {close})" if close else ""))
    split_names: list[Any] = []
    for key in SPLIT_KEYS:
        if cfg.get(key) is not None and cfg[key] not in split_names:
            split_names.append(cfg[key])
    kwargs = dict(cfg["options"])
    if cfg.get("root") is not None:
        kwargs["root"] = cfg["root"]
    splits: dict[str, Any] = {}
    errors: list[str] = []
    absent: dict[str, str] = {}
    for split in split_names or [None]:
        label = str(split) if split is not None else "all"
        try:
            splits[label] = create_dataset(name, **kwargs, **({} if split is None else {"split": split}))
        except FileNotFoundError as exc:  # maybe a folder holding only the evaluation split
            absent[label] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a missing root or CSV is a finding of the check, not a crash
            errors.append(f"split {label!r} could not be built: {type(exc).__name__}: {exc}")
    report = check_dataset(
        splits, read_pixels=read_pixels, max_samples=max_samples, hash_images=hash_images,
        num_workers=num_workers, name=name,
    )
    report.errors += errors
    evaluation = str(cfg.get("split")) if cfg.get("split") is not None else None
    for label, why in absent.items():  # only the evaluation split must be there
        if label != evaluation and evaluation in splits:
            report.notes.append(f"split {label!r} is not in this folder, not checked ({why})")
        else:
            report.errors.append(f"split {label!r} could not be built: {why}")
    return report


def run_check(
    config: Any,
    *,
    read_pixels: bool = True,
    max_samples: int | None = None,
    hash_images: bool = False,
    num_workers: int = 0,
    json_path: str | Path | None = None,
    echo: Callable[[str], Any] = print,
) -> int:
    """What ``medimg-bench datasets check <config>`` does: check, print the report (and write it
    as JSON to ``json_path``), and return the exit code (0 ok, 1 problems, 2 invalid config)."""
    try:
        report = check_from_config(
            config, read_pixels=read_pixels, max_samples=max_samples,
            hash_images=hash_images, num_workers=num_workers,
        )
    except ValueError as exc:
        echo(f"error: {exc}")
        return EXIT_CONFIG
    echo(report.format())
    if json_path is not None:
        import json

        Path(json_path).write_text(json.dumps(report.to_dict(), indent=2, default=str))
    return report.exit_code


# -- on_error="skip" -----------------------------------------------------------------------------


class SkipErrors(Wrapper):
    """``dataset[i]``, or ``None`` when that sample cannot be loaded (logged with its id, file and
    error, and kept in :attr:`skipped`). Batch with :func:`skip_collate`, which drops the Nones;
    iterating yields readable samples only and logs the skip count at the end.

    With ``DataLoader`` workers, :attr:`skipped` fills in each worker's copy; the log lines are
    the record. :func:`skip_unreadable` finds the bad rows up front instead.
    """

    def __init__(self, dataset: Any) -> None:
        super().__init__(dataset)
        self.skipped: list[dict[str, Any]] = []

    def __getitem__(self, index: int) -> Any:
        _, sample, exc = _try_load(self.dataset, index)
        if exc is None:
            return sample
        entry = {"index": index, "id": self._key_of(index), "path": _error_path(exc),
                 "problem": _problem(exc)}
        self.skipped.append(entry)
        log.warning("skipping sample %s: %s", entry["id"], entry["problem"])
        return None

    def __iter__(self) -> Iterator[Any]:
        start = len(self.skipped)
        for i in range(len(self)):
            sample = self[i]
            if sample is not None:
                yield sample
        n = len(self.skipped) - start
        if n:
            log.warning("skipped %d of %d samples of %s", n, len(self), getattr(self, "name", "dataset"))


def skip_collate(samples: Sequence[Any], collate_fn: Callable[[list], Any] | None = None) -> Any:
    """Collate the non-None samples (``medimg_bench.sample.collate`` by default); ``None`` when
    the whole batch was unreadable."""
    kept = [s for s in samples if s is not None]
    if not kept:
        return None
    if collate_fn is None:
        from medimg_bench.sample import collate as collate_fn
    return collate_fn(kept)


def skip_unreadable(dataset: Any, *, num_workers: int = 0) -> tuple[Any, list[dict[str, Any]]]:
    """Try every sample once; return ``(dataset without the unreadable rows, skipped)``, where
    ``skipped`` holds ``id``, ``path`` and ``problem`` per dropped row. Each skip is logged, then
    the count. Needs a ``ManifestDataset`` (anything with ``subset``)."""
    if not hasattr(dataset, "subset"):
        raise TypeError(f"skip_unreadable needs a ManifestDataset, got {type(dataset).__name__}")
    n = len(dataset)
    if num_workers > 0:
        with ThreadPoolExecutor(max_workers=num_workers) as pool:
            results = list(pool.map(lambda i: _try_load(dataset, i), range(n)))
    else:
        results = [_try_load(dataset, i) for i in range(n)]
    skipped = []
    for index, _, exc in results:
        if exc is not None:
            entry = {"id": dataset.sample_id(index), "path": _error_path(exc),
                     "problem": _problem(exc)}
            log.warning("skipping sample %s: %s", entry["id"], entry["problem"])
            skipped.append(entry)
    if skipped:
        log.warning("skipped %d of %d samples of %s", len(skipped), n, getattr(dataset, "name", "dataset"))
    bad = {e["id"] for e in skipped}
    clean = dataset.subset([i for i in dataset.ids if i not in bad]) if skipped else dataset
    return clean, skipped
