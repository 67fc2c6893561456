"""Write the MedMNIST release metadata (split sizes and MD5 of every official file) read from
the ``medmnist`` package's own ``info.py`` at several versions, as a JSON fixture:
``tests/datasets/fixtures/medmnist_release.json``.

Each version's ``INFO`` is loaded from the package's wheel (nothing of its code is copied: the
script imports ``medmnist/info.py`` and writes the numbers it holds). Re-run:

    pip download --no-deps medmnist==2.0.2 medmnist==2.1.0 medmnist==3.0.2 -d /tmp/mmwheels
    python tools/medmnist_release_info.py /tmp/mmwheels

Versions used (PyPI, 2025): 2.0.2 (Zenodo record 5208230, the MedMNIST v2 paper's files),
2.1.0 (record 6496656), 3.0.2 (record 10519652, MedMNIST+ sizes 64/128/224; 2.2.x point at
record 10519195 with the same MD5s). The test ``tests/datasets/test_medmnist_release.py``
compares ``medimg_bench.datasets.medmnist.release`` with this file.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import zipfile
from pathlib import Path

VERSIONS = ("2.0.2", "2.1.0", "3.0.2")
OUT = Path(__file__).resolve().parents[1] / "tests" / "datasets" / "fixtures" / "medmnist_release.json"


def _info(wheel: Path) -> tuple[str, dict]:
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        zf.extract("medmnist/info.py", tmp)
        spec = importlib.util.spec_from_file_location("medmnist_info", Path(tmp) / "medmnist" / "info.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.__version__, mod.INFO


def main(wheel_dir: str) -> None:
    out: dict = {"source": "medmnist/info.py of the PyPI wheels medmnist==" + ", ".join(VERSIONS), "versions": {}}
    for wheel in sorted(Path(wheel_dir).glob("medmnist-*.whl")):
        version, info = _info(wheel)
        if version not in VERSIONS:
            continue
        flags = {}
        for flag, d in info.items():
            md5 = {("28" if k == "MD5" else k.split("_", 1)[1]): v for k, v in d.items() if k.startswith("MD5")}
            flags[flag] = {"n_samples": d["n_samples"], "md5": md5, "url": d["url"], "task": d["task"],
                           "n_channels": d["n_channels"], "label": d["label"]}
        out["versions"][version] = flags
    missing = set(VERSIONS) - set(out["versions"])
    if missing:
        raise SystemExit(f"no wheel for medmnist {sorted(missing)} in {wheel_dir}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
