"""Reference bootstrap results from an older commit, for ``tests/metrics/test_bootstrap_reference.py``.

    python tools/bootstrap_reference.py [--commit 496e5e6] [--out tests/metrics/data]

Extracts ``medimg_bench/`` of ``--commit`` (``git archive``) into a temporary folder, imports
*that* package, and runs its ``stats.bootstrap_ci`` on every problem of
``tests/metrics/bootstrap_corpus.py`` (taken from the working tree, so old and new code see the
same inputs) and its ``engine.summary.summarize`` on the corpus's multi-label run. Writes
``bootstrap_reference.npz`` (estimate / low / high / n_valid / std_error per case, and the
commit) and ``bootstrap_reference_summary.json``. The fixtures hold numbers only.

The stored fixtures were made at commit 496e5e6 (the bootstrap before the
sufficient-statistics rewrite): re-run with that commit to reproduce them bit for bit.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _old_package(commit: str, into: Path) -> str:
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", full, "medimg_bench"], check=True,
                             capture_output=True).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)
    return full


def _corpus():
    spec = importlib.util.spec_from_file_location("bootstrap_corpus", ROOT / "tests/metrics/bootstrap_corpus.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="496e5e6")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/metrics/data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        full = _old_package(args.commit, Path(tmp))
        sys.path.insert(0, tmp)
        import medimg_bench

        assert Path(medimg_bench.__file__).is_relative_to(tmp), medimg_bench.__file__
        from medimg_bench.engine.summary import summarize
        from medimg_bench.metrics.stats import bootstrap_ci
        from medimg_bench.registry import create_metric

        corpus = _corpus()
        arrays: dict[str, np.ndarray] = {"commit": np.array(full)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(corpus.N_CASES):
                for key, value in corpus.run_case(i, bootstrap_ci, create_metric).items():
                    arrays[f"{i}/{key}"] = value
            summary = corpus.run_summary(summarize, create_metric)
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "bootstrap_reference.npz", **arrays)
    summary["commit"] = full
    (args.out / "bootstrap_reference_summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    print(f"{corpus.N_CASES} cases and one summary from {full[:12]} -> {args.out}")


if __name__ == "__main__":
    main()
