"""Published FactCheXcker figures (rajpurkarlab/FactCheXcker c2e1025,
``results/metrics/MIMIC-MODEL-GUIDED.json``: per model, original and updated reports) stored as
numbers in tests/metrics/text/data/factchexcker_published.json, to check that
``factchexcker_ett_scores`` computes their columns from their counts.

Re-run: fetch rajpurkarlab/FactCheXcker into /work/.mirror and ``python tools/factchexcker_reference.py``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = Path("/work/.mirror/rajpurkarlab+FactCheXcker/repo")
COMMIT = "c2e1025"
OUT = Path(__file__).resolve().parents[1] / "tests/metrics/text/data/factchexcker_published.json"
KEYS = ("TP", "FP", "FN", "TN", "precision", "recall", "F1", "accuracy", "MAE", "MSE", "RMSE", "MAE_f1", "precision_MAE")


def main() -> None:
    text = subprocess.run(["git", f"--git-dir={REPO}", "show", f"{COMMIT}:results/metrics/MIMIC-MODEL-GUIDED.json"],
                          check=True, capture_output=True, text=True).stdout
    rows = []
    for m in json.loads(text):
        for version in ("original", "updated"):
            rows.append({"model": m["model"], "version": version, **{k: m[k][version] for k in KEYS}})
    OUT.write_text(json.dumps({"meta": {"repo": "rajpurkarlab/FactCheXcker", "commit": COMMIT}, "rows": rows}, indent=0))
    print(f"wrote {len(rows)} rows to {OUT}")


if __name__ == "__main__":
    main()
