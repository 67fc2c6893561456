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

__all__ = ["Results", "build_samples_table", "environment_info"]

_KEY_COLUMNS = ["id", "patient_id", "class", "status", "error"]


def build_samples_table(
    records: Sequence[Mapping[str, Any]],
    metrics: Mapping[str, Any],
    failures: Sequence[Mapping[str, Any]],
    patients: Mapping[str, str],
) -> pd.DataFrame:
    """Merge task records, per-sample metric values and failures into one long table."""
    from medimg_bench.engine.summary import metric_value_tables

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
    table["patient_id"] = table["id"].map(lambda i: patients.get(i, i))
    first = [c for c in _KEY_COLUMNS if c in table.columns]
    return table[first + [c for c in table.columns if c not in first]].reset_index(drop=True)


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
    return {"packages": versions, "git": git, "host": platform.node(), "platform": platform.platform()}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
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

    def per_sample_metric_columns(self) -> list[str]:
        """Columns of :attr:`samples` holding per-sample metric values."""
        return [k for k, v in self.summary.get("metrics", {}).items() if v.get("kind") == "per_sample" and k in self.samples.columns]

    @property
    def failures(self) -> pd.DataFrame:
        return self.samples[self.samples["status"] == "failed"][["id", "patient_id", "error"]]

    def save(self, run_dir: str | Path, *, config: Mapping[str, Any] | None = None, plots: bool = True) -> Path:
        """Write the run directory (see module docstring); returns its path."""
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        samples = self.samples.copy()
        for col in samples.columns:  # parquet needs one type per column
            if samples[col].dtype == object and col not in ("id", "patient_id", "class", "status", "error"):
                samples[col] = samples[col].astype(str)
        samples.to_parquet(run_dir / "samples.parquet", index=False)
        (run_dir / "summary.json").write_text(json.dumps(_jsonable(self.summary), indent=2))
        manifest = {**self.manifest, "environment": environment_info()}
        if config is not None:
            manifest["config"] = config
        (run_dir / "manifest.json").write_text(json.dumps(_jsonable(manifest), indent=2))
        if plots and self.task is not None:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            self.task.plots(self, plot_dir)
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

    def table(self) -> Any:
        """A rich Table of the summary (metric, class, value [CI])."""
        from medimg_bench.engine.report import summary_table

        return summary_table(self)
