"""Fixtures for ``radgraph_f1``: the reference implementations' scores of generated RadGraph
annotation pairs, stored as numbers in tests/metrics/text/data/radgraph_reference.json.

References (run, never copied):

* Stanford-AIMI/radgraph ``radgraph/rewards.py`` ``compute_reward`` (the simple / partial /
  complete rewards of ``F1RadGraph``) at two commits, because the rule changed between them:
  ``35c64b9`` (the 0.1.18 release on PyPI: tokens compared as written, except the related
  entities' tokens in the complete reward, which are lower-cased) and ``87f11a1`` (main after
  b5ab8d0 "Fix case-sensitivity bug": every token lower-cased);
* rajpurkarlab/CXR-Report-Metric ``CXRMetric/radgraph_evaluate_model.py`` at ``9c9ecad``
  (``parse_entity_relation`` + ``compute_f1``: entity F1 and relation F1; ``radgraph_combined``
  is their mean, ``run_eval.add_radgraph_col``).

Re-run: fetch both repositories into /work/.mirror (the ``fetch`` tool) and
``python tools/radgraph_reference.py``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import types
from pathlib import Path

MIRROR = Path("/work/.mirror")
RADGRAPH = MIRROR / "Stanford-AIMI+radgraph/repo"
CXRM = MIRROR / "rajpurkarlab+CXR-Report-Metric/repo"
COMMITS = {"0.1.18": "35c64b9", "main-87f11a1": "87f11a1"}
CXRM_COMMIT = "9c9ecad"
OUT = Path(__file__).resolve().parents[1] / "tests/metrics/text/data/radgraph_reference.json"

TOKENS = ["effusion", "Effusion", "pleural", "left", "Left", "lung", "opacity", "base", "basilar",
          "pneumothorax", "heart", "enlarged", "cardiomegaly", "atelectasis", "clear", "right"]
LABELS = ["ANAT-DP", "OBS-DP", "OBS-U", "OBS-DA"]
RELATIONS = ["modify", "located_at", "suggestive_of"]


def _load(path: Path, source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, str(path), "exec"), mod.__dict__)  # noqa: S102 - the reference's own file
    return mod


def _show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _annotation(rng: random.Random) -> dict:
    n = rng.choice([0, 1, 2, 3, 4, 5, 6, 8])
    ents = {}
    for i in range(1, n + 1):
        ntok = rng.choice([1, 1, 1, 2])
        ents[str(i)] = {"tokens": " ".join(rng.choice(TOKENS) for _ in range(ntok)),
                        "label": rng.choice(LABELS), "start_ix": i, "end_ix": i, "relations": []}
    for i in range(1, n + 1):
        for _ in range(rng.choice([0, 0, 1, 1, 2])):
            j = rng.randint(1, n)
            if j != i:
                ents[str(i)]["relations"].append([rng.choice(RELATIONS), str(j)])
    return {"text": "", "entities": ents}


def _perturb(rng: random.Random, ann: dict) -> dict:
    out = json.loads(json.dumps(ann))
    for e in out["entities"].values():
        r = rng.random()
        if r < 0.15:
            e["tokens"] = e["tokens"].upper() if rng.random() < 0.5 else e["tokens"].capitalize()
        elif r < 0.3:
            e["label"] = rng.choice(LABELS)
        elif r < 0.4:
            e["relations"] = []
    return out


def main() -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")  # parse_entity_relation wraps its loops in tqdm
    rng = random.Random(20261125)
    pairs = []
    for k in range(400):
        ref = _annotation(rng)
        hyp = _perturb(rng, ref) if k % 3 else _annotation(rng)
        pairs.append((hyp, ref))
    rewards = {v: _load(RADGRAPH, _show(RADGRAPH, c, "radgraph/rewards.py"), f"rewards_{c}")
               for v, c in COMMITS.items()}
    sys.modules["CXRMetric"] = types.ModuleType("CXRMetric")
    stub = types.ModuleType("CXRMetric.radgraph_inference")
    stub.inference = None
    sys.modules["CXRMetric.radgraph_inference"] = stub
    cxrm = _load(CXRM, _show(CXRM, CXRM_COMMIT, "CXRMetric/radgraph_evaluate_model.py"), "cxrm_radgraph")
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for hyp, ref in pairs:
            case = {"hyp": hyp, "ref": ref}
            for v, mod in rewards.items():
                case[f"reward_{v}"] = list(mod.compute_reward(hyp, ref, "all"))
            hp, rp = Path(tmp, "h.json"), Path(tmp, "r.json")
            hp.write_text(json.dumps({"0": hyp}))
            rp.write_text(json.dumps({"0": ref}))
            he, hr = cxrm.parse_entity_relation(str(hp))
            re_, rr = cxrm.parse_entity_relation(str(rp))
            case["cxrm_entity_f1"] = float(cxrm.compute_f1(re_["0"], he["0"]))
            case["cxrm_relation_f1"] = float(cxrm.compute_f1(rr["0"], hr["0"]))
            cases.append(case)
    meta = {"radgraph_commits": COMMITS, "cxr_report_metric_commit": CXRM_COMMIT,
            "generator": "tools/radgraph_reference.py (seed 20261125, 400 pairs)"}
    OUT.write_text(json.dumps({"meta": meta, "cases": cases}, indent=0))
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
