"""Run results and the on-disk layout users script against.

A run directory holds:

* ``samples.parquet`` — one row per sample × class (or per sample) with ``id``, ``patient_id``,
  ``class``, ``status`` (``ok``/``failed``), ``error``, the task's columns (scores and labels,
  voxel counts) and one column per per-sample metric;
* ``summary.json`` — aggregates per metric: per class and macro mean, 95 % bootstrap CIs
  clustered by patient, counts of failed samples and of absent/missed structures;
* ``manifest.json`` — resolved config, package versions, git revision, device, dataset
  fingerprint, start/end time, wall time, seed;
* ``plots/*.png`` — ROC curves (classification), per-class metric distributions (segmentation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from medimg_bench._secrets import (  # noqa: F401  (re-exported: their old home)
    REDACTED,
    SecretFilter,
    is_secret_key,
    looks_like_secret,
    redact_files,
    redact_secrets,
    redact_text,
    secret_values,
)

__all__ = ["Records", "Results", "EvaluationFailed", "build_samples_table", "environment_info", "redact_secrets",
           "is_secret_key", "secret_values", "redact_files", "answer_counts"]

_KEY_COLUMNS = ["id", "patient_id", "class", "status", "error"]


def _column(values: Any, n: int | None = None) -> np.ndarray:
    """One column as a 1-D array: numeric arrays as they are, text and mixed values as objects."""
    if hasattr(values, "detach"):  # torch tensor
        values = values.detach().cpu().numpy()
    if isinstance(values, np.ndarray):
        values = values.reshape(-1) if values.ndim != 1 else values
        return values.astype(object) if values.dtype.kind in "US" else values
    values = list(values)
    if values and all(isinstance(v, (bool, np.bool_)) for v in values):
        return np.asarray(values, dtype=bool)
    if values and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values):
        return np.asarray(values, dtype=np.int64)
    if values and all(v is None or (isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_)))
                      for v in values) and any(v is not None for v in values):
        return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _as_chunk(rows: Any) -> dict[str, np.ndarray]:
    """Rows (a list of dicts) or columns (a dict of equal-length sequences) → columns."""
    if isinstance(rows, Mapping):
        cols = {k if isinstance(k, str) else str(k): _column(v) for k, v in rows.items()}
    else:
        rows = list(rows)
        keys: dict[str, None] = {}
        for r in rows:
            keys.update(dict.fromkeys(r))
        cols = {k: _column([r.get(k) for r in rows]) for k in keys}
    lengths = [len(v) for v in cols.values()]
    if lengths and min(lengths) != max(lengths):
        raise ValueError("per-sample record columns have different lengths: "
                         f"{ {k: len(v) for k, v in cols.items()} }")
    return cols


def _chunk_len(chunk: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(chunk.values()))) if chunk else 0


class Records:
    """Per-sample rows kept as one chunk of columns per batch (no Python dict per sample × class).

    ``add`` accepts what ``Task.sample_records`` returns: a dict of equal-length columns (arrays,
    tensors, lists) or a list of row dicts. ``to_frame`` concatenates the chunks once."""

    def __init__(self, chunks: Sequence[Mapping[str, np.ndarray]] = ()) -> None:
        self.chunks: list[dict[str, np.ndarray]] = [dict(c) for c in chunks if c and _chunk_len(c)]

    def add(self, rows: Any) -> None:
        chunk = _as_chunk(rows)
        if chunk and _chunk_len(chunk):
            self.chunks.append(chunk)

    def __len__(self) -> int:
        return sum(_chunk_len(c) for c in self.chunks)

    @classmethod
    def concat(cls, parts: Sequence[Records]) -> Records:
        return cls([c for p in parts for c in p.chunks])

    def columns(self) -> dict[str, np.ndarray]:
        """Every column over all chunks (missing values: NaN for numbers, None otherwise)."""
        names: dict[str, np.dtype] = {}
        for c in self.chunks:
            for k, v in c.items():
                names.setdefault(k, v.dtype)
        out: dict[str, np.ndarray] = {}
        for k, dtype in names.items():
            parts = []
            for c in self.chunks:
                if k in c:
                    parts.append(c[k])
                else:
                    fill = np.full(_chunk_len(c), np.nan) if dtype.kind == "f" else np.full(_chunk_len(c), None, dtype=object)
                    parts.append(fill)
            out[k] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return out

    def to_frame(self) -> pd.DataFrame:
        if not self.chunks:
            return pd.DataFrame({"id": pd.Series(dtype=str)})
        return pd.DataFrame(self.columns())

    def sorted_by(self, order: Mapping[str, int]) -> Records:
        """The rows sorted (stably) by ``order[id]``, as one chunk."""
        if not self.chunks:
            return Records()
        cols = self.columns()
        key = np.asarray([order.get(i, len(order)) for i in cols["id"]], dtype=np.int64)
        perm = np.argsort(key, kind="stable")
        return Records([{k: v[perm] for k, v in cols.items()}])

    def to_state(self, start: int = 0) -> list[dict[str, Any]]:
        """Chunks ``start:`` in a form ``torch.load(weights_only=True)`` reads back exactly."""
        import torch

        out = []
        for c in self.chunks[start:]:
            enc: dict[str, Any] = {}
            for k, v in c.items():
                if v.dtype.kind in "biuf":
                    enc[k] = torch.from_numpy(np.ascontiguousarray(v))
                else:
                    items = v.tolist()
                    if set(map(type, items)) != {str}:  # text only (ids, classes): as it is
                        items = [x.item() if isinstance(x, np.generic) else x for x in items]
                    enc[k] = items
            out.append(enc)
        return out

    @classmethod
    def from_state(cls, state: Sequence[Mapping[str, Any]]) -> Records:
        return cls([{k: (v.numpy() if hasattr(v, "numpy") else _object(v)) for k, v in enc.items()}
                    for enc in state])


def _object(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def build_samples_table(
    records: Sequence[Mapping[str, Any]],
    metrics: Mapping[str, Any],
    failures: Sequence[Mapping[str, Any]],
    patients: Mapping[str, str],
) -> pd.DataFrame:
    """Merge task records, per-sample metric values and failures into one long table."""
    from medimg_bench.engine.summary import metric_value_tables

    if isinstance(records, Records):
        table = records.to_frame()
    else:
        table = pd.DataFrame(list(records)) if records else pd.DataFrame({"id": pd.Series(dtype=str)})
    for key, metric in metrics.items():
        if not metric.per_sample:
            continue
        for column, (ids, values) in metric_value_tables(metric).items():
            name = column if column != metric.name else key
            v = values.detach().double().cpu().numpy()
            if v.ndim == 1:
                v = v[:, None]
            names = metric.class_names if metric.class_names and len(metric.class_names) == v.shape[1] else [str(i) for i in range(v.shape[1])]
            long = pd.DataFrame(
                {"id": np.repeat(np.asarray(ids, dtype=object), v.shape[1]), "class": np.tile(np.asarray(names, dtype=object), len(ids)), name: v.reshape(-1)}
            )
            if "class" in table.columns:
                how = "left" if records else "outer"  # records list every sample × class
                table = table.merge(long, on=["id", "class"], how=how)
            elif len(table.columns) <= 1:
                table = long if table.empty else table.merge(long, on="id", how="outer")
            else:
                table = table.merge(long, on="id", how="outer")
    table["status"] = "ok"
    table["error"] = None
    if failures:
        fail = pd.DataFrame([{"id": f["id"], "status": "failed", "error": f"[{f.get('stage', '?')}] {f['error']}"} for f in failures])
        table = pd.concat([table, fail], ignore_index=True)
    if patients:  # vectorised lookup; samples without a patient are their own patient
        table["patient_id"] = table["id"].map(patients).where(lambda p: p.notna(), table["id"])
    else:
        table["patient_id"] = table["id"]
    first = [c for c in _KEY_COLUMNS if c in table.columns]
    return table[first + [c for c in table.columns if c not in first]].reset_index(drop=True)


def answer_counts(samples: pd.DataFrame) -> dict[str, int] | None:
    """``{"n_answers", "n_cached_answers", "n_live_answers"}`` of a generative run's per-sample
    table (None for other tasks): every answer a scored sample used (CircularEval rotations and
    judge replies included, where the task records ``n_answers``) and how many of them came from
    the response cache rather than from the model in this run."""
    if "cached" not in samples.columns:
        return None
    ok = samples[samples["status"] == "ok"].drop_duplicates("id")
    cached = pd.to_numeric(ok.get("n_cached_answers", ok["cached"]), errors="coerce").fillna(0)
    total = pd.to_numeric(ok["n_answers"], errors="coerce").fillna(1) if "n_answers" in ok else pd.Series(1, index=ok.index)
    n, k = int(total.sum()), int(cached.astype(float).sum())
    return {"n_answers": n, "n_cached_answers": k, "n_live_answers": n - k}


def environment_info() -> dict[str, Any]:
    """Versions of Python and the key packages, git revision of the code, host name."""
    import importlib.metadata as md
    import platform
    import subprocess

    versions = {"python": platform.python_version()}
    for pkg in ("medimg-bench", "torch", "torchvision", "monai", "timm", "numpy", "scipy", "scikit-learn",
                "pandas", "hydra-core", "pydicom", "nibabel", "SimpleITK", "open_clip_torch"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    git: dict[str, Any] = {"revision": None, "dirty": None}
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        if rev.returncode == 0:
            git["revision"] = rev.stdout.strip()
            st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                capture_output=True, text=True, timeout=5)
            git["dirty"] = bool(st.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    import os

    return {"packages": versions, "git": git, "host": platform.node(), "platform": platform.platform(),
            "pid": os.getpid()}


def jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


@dataclass
class Results:
    """The outcome of :func:`medimg_bench.evaluate`: per-sample table, summary and manifest."""

    name: str
    task: Any
    samples: pd.DataFrame
    summary: dict[str, Any]
    manifest: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict, repr=False)
    run_dir: Path | None = None
    #: records, failures, ids, patients and subgroup labels of the run (what a merge of shards needs)
    parts: dict[str, Any] = field(default_factory=dict, repr=False)

    def per_sample_metric_columns(self) -> list[str]:
        """Columns of :attr:`samples` holding per-sample metric values."""
        return [k for k, v in self.summary.get("metrics", {}).items() if v.get("kind") == "per_sample" and k in self.samples.columns]

    @property
    def failures(self) -> pd.DataFrame:
        return self.samples[self.samples["status"] == "failed"][["id", "patient_id", "error"]]

    def save(self, run_dir: str | Path, *, config: Mapping[str, Any] | None = None, plots: bool = True,
             overwrite: bool = False) -> Path:
        """Write the run directory (see module docstring); returns its path. A directory that
        already holds results (``summary.json`` or ``samples.parquet``) is refused with
        ``FileExistsError`` unless ``overwrite=True``, as the CLI refuses without ``overwrite=true``."""
        run_dir = Path(run_dir)
        held = [f for f in ("summary.json", "samples.parquet") if (run_dir / f).exists()]  # run_dir.RESULT_FILES
        if held and not overwrite:
            raise FileExistsError(f"run directory {run_dir} already holds results ({', '.join(held)}); "
                                  "pass overwrite=True to replace it")
        run_dir.mkdir(parents=True, exist_ok=True)
        samples = self.samples.copy()
        for col in samples.columns:  # parquet needs one type per column
            if samples[col].dtype == object and col not in ("id", "patient_id", "class", "status", "error"):
                samples[col] = samples[col].astype(str)
        known = secret_values(config or {}) | secret_values(self.manifest)
        if "error" in samples.columns:  # error messages may quote a URL or a request
            samples["error"] = [redact_text(e, known) if isinstance(e, str) else e for e in samples["error"]]
        samples.to_parquet(run_dir / "samples.parquet", index=False)
        answers = answer_counts(self.samples)
        if answers is not None:  # generative runs: how many answers the response cache served
            self.summary.update(answers)
            self.manifest.update(answers)
        summary = redact_secrets(jsonable(self.summary), known)
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        manifest = {**self.manifest, "environment": environment_info()}
        if self.task is not None:  # task-level facts to pin (vqa: the judge's identity, the volume sampling)
            manifest.update(redact_secrets(self.task.manifest_notes()))
        if config is not None:
            manifest["config"] = config
        manifest = redact_secrets(jsonable(manifest), known)
        (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
        if self.task is not None:  # task-level files (vqa: submission.tsv, per_category.csv)
            self.task.write_outputs(self, run_dir)
        if plots and self.task is not None:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            self.task.plots(self, plot_dir)
            if not any(plot_dir.iterdir()):  # a task without plots (vqa, reports) leaves no folder
                plot_dir.rmdir()
        self.run_dir = run_dir
        return run_dir

    @classmethod
    def load(cls, run_dir: str | Path) -> Results:
        """Read a saved run directory back (metric objects are not restored)."""
        run_dir = Path(run_dir)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        return cls(
            name=manifest.get("name", run_dir.name),
            task=None,
            samples=pd.read_parquet(run_dir / "samples.parquet"),
            summary=json.loads((run_dir / "summary.json").read_text()),
            manifest=manifest,
            run_dir=run_dir,
        )

    def exceeds_failure_rate(self, rate: float = 1.0) -> bool:
        """True when no sample was scored, or when more than ``rate`` (a fraction, 0-1) of the
        samples failed. ``rate=1.0``: only a run that scored nothing. An empty shard of a sharded
        run (``shard=i/n`` that the ids' hash gave no sample) has failed nothing: the merge judges
        the whole."""
        n, failed = int(self.summary.get("n_samples", 0)), int(self.summary.get("n_failed", 0))
        if n == 0 and (self.manifest or {}).get("shard"):
            return False
        return n - failed <= 0 or failed > rate * n

    def failure_report(self, rate: float = 1.0, *, n_errors: int = 3) -> str | None:
        """Why the run :meth:`exceeds_failure_rate` ``rate`` (counts and the first
        ``n_errors`` errors), or None when it does not."""
        if not self.exceeds_failure_rate(rate):
            return None
        n, failed = int(self.summary.get("n_samples", 0)), int(self.summary.get("n_failed", 0))
        if n - failed <= 0:
            head = f"no sample was scored ({failed} of {n} failed)"
        else:
            head = f"{failed} of {n} samples failed ({failed / n:.1%}), more than max_failure_rate={rate:g}"
        lines = [f"{self.name}: {head}"]
        if failed and "status" in self.samples.columns:
            rows = self.samples[self.samples["status"] == "failed"].drop_duplicates("id").head(n_errors)
            lines += [f"  {sid}: {_clip(str(err))}" for sid, err in zip(rows["id"], rows["error"])]
            if failed > len(rows):
                lines.append(f"  ... and {failed - len(rows)} more (samples.parquet, status == 'failed')")
        return "\n".join(lines)

    def scored_line(self) -> str:
        """``scored N of M samples (K failed)``: the console's last line of every run."""
        n, failed = int(self.summary.get("n_samples", 0)), int(self.summary.get("n_failed", 0))
        return f"scored {n - failed} of {n} samples ({failed} failed)"

    def table(self) -> Any:
        """A rich Table of the summary (metric, class, value [CI])."""
        from medimg_bench.engine.report import summary_table

        return summary_table(self)


class EvaluationFailed(RuntimeError):
    """Raised by :func:`~medimg_bench.evaluate` (and the Python API's ``run``) when no sample was
    scored, or more than ``max_failure_rate`` of them failed: a run that failed is never returned
    as if it had succeeded. ``results`` holds everything the run computed (``results.failures``
    lists the errors; ``results.save(dir)`` still writes it)."""

    def __init__(self, results: Results, rate: float = 1.0) -> None:
        self.results, self.rate = results, rate
        super().__init__(f"{results.failure_report(rate) or results.name}\n{results.scored_line()}")


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
