"""Write a checkpoint as the previous release wrote it (version 3 ``.pt`` parts, torch.save) for
``tests/engine/test_checkpoint_parts.py::test_a_checkpoint_of_the_previous_release_resumes``.

The parts are written by ``medimg_bench/engine/checkpoint.py`` as of commit bf777f4 (the last
commit before the safetensors parts), taken from git and run unchanged; the data are the
deterministic ones of ``v3_states`` below, which the test builds again.

Run from the repository root: ``python tools/make_v3_checkpoint_fixture.py`` (needs git and the
commit in the repository's history). Writes ``tests/engine/data/checkpoint_v3/``.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMMIT = "bf777f4"
OUT = ROOT / "tests" / "engine" / "data" / "checkpoint_v3"
KEY = {"dataset": {"fingerprint": "fixture"}, "task": "classification", "metrics": ["auroc", "ece"],
       "amp": False, "shard": None}


def main() -> None:
    source = subprocess.run(["git", "show", f"{COMMIT}:medimg_bench/engine/checkpoint.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "checkpoint_v3_code.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("checkpoint_v3_code", path)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        shutil.rmtree(OUT, ignore_errors=True)
        ck = old.Checkpoint(OUT, key=KEY)
        ck.begin_segment("2026-11-25T00:00:00", index=0)
        replay(ck.save)
    print(f"wrote {sorted(p.name for p in OUT.iterdir())} with the code of {COMMIT}")


def replay(save) -> None:
    """Three blocks of 8 samples x 3 labels (one failure in the second), ``save`` after each, as
    a run does (``tests/engine/test_checkpoint_parts.py`` replays the same run)."""
    import numpy as np
    import torch

    from medimg_bench.engine.results import Records
    from medimg_bench.registry import create_metric

    g = torch.Generator().manual_seed(3)
    metrics = {n: create_metric(n) for n in ("auroc", "ece")}
    done, records, failures = [], Records(), []
    names = np.asarray(["a", "b", "c"], dtype=object)
    for part in range(3):
        ids = [f"s{part * 8 + i:03d}" for i in range(8)]
        preds, target = torch.rand(8, 3, generator=g), (torch.rand(8, 3, generator=g) > 0.5).float()
        for m in metrics.values():
            m.update(preds, target, ids=ids)
        col = np.empty(8, dtype=object)
        col[:] = ids
        records.add({"id": np.repeat(col, 3), "class": np.tile(names, 8),
                     "score": preds.double().numpy().reshape(-1), "label": target.double().numpy().reshape(-1)})
        done.extend(ids)
        if part == 1:
            failures.append({"id": "s999", "stage": "load", "error": "OSError: unreadable"})
            done.append("s999")
        save(done=done, records=records, failures=failures, metrics=metrics, elapsed_s=1.5 * (part + 1))


if __name__ == "__main__":
    main()
