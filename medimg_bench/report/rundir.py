"""Reading run directories for the page: one run (``summary.json`` + ``manifest.json``, and
``samples.parquet``, ``plots/``, ``worst/``, the task's extra files when present) or every run
below a folder (a benchmark such as the demo, a Hydra multirun)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunData", "load_run", "find_runs", "is_run_dir", "label_runs", "per_sample_columns"]


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds ``summary.json`` and ``manifest.json``."""
    return (path / "summary.json").is_file() and (path / "manifest.json").is_file()


@dataclass
class RunData:
    """One run directory, read."""

    path: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    samples: Any = None  # pandas DataFrame, or None when the run has no samples.parquet
    label: str = ""
    overrides: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # files that could not be read, and why

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config") or {})

    def _name(self, key: str) -> str:
        node = self.config.get(key)
        if isinstance(node, dict):
            return str(node.get("name") or "")
        return str(self.manifest.get(key) or "")

    @property
    def task(self) -> str:
        return self._name("task") or str(self.manifest.get("task") or "")

    @property
    def dataset(self) -> str:
        return self._name("dataset")

    @property
    def model(self) -> str:
        return self._name("model")

    @property
    def protocol(self) -> str:
        node = self.config.get("protocol")
        return str(node.get("name") or "") if isinstance(node, dict) else str(node or "")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def _overrides(path: Path) -> list[str]:
    """Hydra's ``.hydra/overrides.yaml`` of the run (or of its benchmark's folder)."""
    import yaml

    for folder in (path, path.parent):
        f = folder / ".hydra" / "overrides.yaml"
        if f.is_file():
            try:
                return [str(o) for o in (yaml.safe_load(f.read_text()) or [])]
            except (OSError, yaml.YAMLError):
                return []
    return []


def load_run(path: str | Path) -> RunData:
    """Read the run directory ``path``; a missing or unreadable ``summary.json`` /
    ``manifest.json`` is a ``ValueError`` naming the file, an unreadable ``samples.parquet`` a
    problem listed on the page."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory")
    for name in ("summary.json", "manifest.json"):
        if not (path / name).is_file():
            raise ValueError(f"{path}: not a run directory ({name} is missing)")
    run = RunData(path=path, summary=_read_json(path / "summary.json"),
                  manifest=_read_json(path / "manifest.json"), overrides=_overrides(path))
    parquet = path / "samples.parquet"
    if parquet.is_file():
        import pandas as pd

        try:
            run.samples = pd.read_parquet(parquet)
        except Exception as exc:  # a damaged table: the page says so and shows the rest
            run.problems.append(f"{parquet}: cannot read ({type(exc).__name__}: {exc})")
    else:
        run.problems.append(f"{parquet} is missing: no per-sample tables or worst cases")
    return run


def find_runs(path: str | Path) -> list[Path]:
    """``[path]`` when it is a run directory, else every run directory below it, sorted (a
    benchmark's entries, a multirun's jobs). A ``ValueError`` when there is none."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    if is_run_dir(path):
        return [path]
    if not path.is_dir():
        raise ValueError(f"{path}: not a run directory")
    found = sorted({p.parent for p in path.rglob("summary.json") if is_run_dir(p.parent)},
                   key=lambda p: [int(s) if s.isdigit() else s for s in p.relative_to(path).parts])
    found = [p for p in found if not any(part.startswith(".") for part in p.relative_to(path).parts)]
    if not found:
        raise ValueError(f"{path}: no run directory (summary.json + manifest.json) in it or below it")
    return found


def label_runs(runs: Sequence[RunData], roots: Sequence[Path] = ()) -> None:
    """Give each run a short ``label``: its overrides that differ between the runs (a sweep's
    swept keys), else its path below the folder it was found in, else its folder name."""
    keyed = []
    for r in runs:
        kv = {}
        for o in r.overrides:
            if "=" in o and not o.startswith(("hydra", "~")):
                k, v = o.split("=", 1)
                kv[k.lstrip("+")] = v
        keyed.append(kv)
    keys = sorted({k for kv in keyed for k in kv})
    varying = [k for k in keys if len({kv.get(k) for kv in keyed}) > 1 and k not in ("output_dir",)]
    for r, kv in zip(runs, keyed):
        rel = ""
        for root in roots:
            try:
                rel = str(r.path.resolve().relative_to(Path(root).resolve()))
            except ValueError:
                continue
            break
        swept = " ".join(f"{k}={kv[k]}" for k in varying if k in kv)
        base = rel if rel not in ("", ".") else r.path.name
        r.label = f"{base}: {swept}" if swept and len(runs) > 1 else base


def per_sample_columns(run: RunData) -> list[str]:
    """The per-sample metric columns of ``samples.parquet`` (summary kind ``per_sample``)."""
    cols = set(run.samples.columns) if run.samples is not None else set()
    return [k for k, v in (run.summary.get("metrics") or {}).items() if v.get("kind") == "per_sample" and k in cols]
