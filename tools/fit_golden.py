"""Record every number of the training scenarios in ``tests/models/_fit_scenarios.py`` (loss
curve, learning rates, validation curve, kept epoch, SHA-256 of the final weights) as
``tests/models/fixtures/fit_golden.json``, with the environment they were recorded in.

Recorded with ``fit`` as it was before it became a recipe + loop (h-medmnist @ 8c09737, the
225-line ``models/training.py``), so ``tests/models/test_training_golden.py`` shows the
restructured code trains to the same weights bit for bit. Re-run (from a checkout of that
commit, or any later one to re-record):

    PYTHONPATH=. python tools/fit_golden.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.models._fit_scenarios import SCENARIOS, environment, run_scenario

OUT = Path(__file__).resolve().parents[1] / "tests" / "models" / "fixtures" / "fit_golden.json"


def main() -> None:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=OUT.parents[3], check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    out = {"commit": commit, "environment": environment(),
           "scenarios": {name: run_scenario(name) for name in SCENARIOS}}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT} ({len(SCENARIOS)} scenarios)")


if __name__ == "__main__":
    main()
