"""Fixtures for ``green``: the GREEN authors' own parsing and score of model outputs, stored as
numbers in tests/metrics/text/data/green_reference.json.

Reference (run, never copied): Stanford-AIMI/GREEN at d72c195 — ``green_score/green.py``
``GREEN.compute_green`` (the score), ``GREEN.compute_error_count`` (the six clinically
significant error counts + matched findings), ``GREEN.parse_error_counts`` on the clinically
insignificant errors, ``GREEN.compute_accuracy`` (share of reports with no error of each
sub-category) and ``green_score/utils.py`` ``clean_responses`` / ``make_prompt``. No GREEN model
runs: the inputs are the five model outputs their ``tests/test_repro.py`` ships (the
``expected_green_score_list`` of StanfordAIMI/GREEN-radllama2-7b) and a generated corpus of
outputs in and out of their format (lettered / numbered sub-categories, "No errors", missing
sections, counts without a period, extra blank lines, chat-template debris).

Re-run: fetch Stanford-AIMI/GREEN into /work/.mirror (the ``fetch`` tool) and
``python tools/green_reference.py``.
"""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
import types
from pathlib import Path

REPO = Path("/work/.mirror/Stanford-AIMI+GREEN/repo")
COMMIT = "d72c195"
OUT = Path(__file__).resolve().parents[1] / "tests/metrics/text/data/green_reference.json"
SUBS = ["False report of a finding in the candidate", "Missing a finding present in the reference",
        "Misidentification of a finding's anatomic location/position",
        "Misassessment of the severity of a finding", "Mentioning a comparison that isn't in the reference",
        "Omitting a comparison detailing a change from a prior study"]


def _show(path: str) -> str:
    return subprocess.run(["git", f"--git-dir={REPO}", "show", f"{COMMIT}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _stub(name: str, **attrs: object) -> None:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod


def _load_reference() -> tuple[object, types.ModuleType]:
    # the scoring code needs none of the model stack: stub what green.py / utils.py import
    for name in ("datasets", "datasets.distributed", "sentence_transformers", "sklearn", "sklearn.metrics",
                 "sklearn.cluster", "sklearn.preprocessing", "scipy", "scipy.spatial", "transformers",
                 "transformers.utils"):
        _stub(name)
    sys.modules["datasets"].Dataset = object
    sys.modules["datasets.distributed"].split_dataset_by_node = None
    sys.modules["sentence_transformers"].SentenceTransformer = None
    sys.modules["sklearn.metrics"].silhouette_score = None
    sys.modules["sklearn.cluster"].KMeans = None
    sys.modules["sklearn"].preprocessing = None
    sys.modules["scipy.spatial"].distance = None
    sys.modules["transformers"].AutoModelForCausalLM = sys.modules["transformers"].AutoTokenizer = None
    sys.modules["transformers.utils"].logging = types.SimpleNamespace(
        get_logger=lambda *_: types.SimpleNamespace(setLevel=lambda *_: None), ERROR=40)
    pkg = types.ModuleType("green_score")
    pkg.__path__ = []
    sys.modules["green_score"] = pkg
    utils = types.ModuleType("green_score.utils")
    exec(compile(_show("green_score/utils.py"), "green_score/utils.py", "exec"), utils.__dict__)  # noqa: S102
    sys.modules["green_score.utils"] = utils
    green = types.ModuleType("green_score.green")
    exec(compile(_show("green_score/green.py"), "green_score/green.py", "exec"), green.__dict__)  # noqa: S102
    scorer = green.GREEN.__new__(green.GREEN)
    scorer.categories = ["Clinically Significant Errors", "Clinically Insignificant Errors", "Matched Findings"]
    scorer.sub_categories = [f"({c}) {s}" for c, s in zip("abcdef", SUBS)]
    return scorer, utils


def _shipped_outputs() -> tuple[list[str], list[str], list[str]]:
    tree = ast.parse(_show("tests/test_repro.py"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("refs", "hyps", "expected_green_score_list"):
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found["refs"], found["hyps"], found["expected_green_score_list"]


def _section(rng: random.Random, numbered: bool) -> str:
    lines = []
    for i, s in enumerate(SUBS):
        if rng.random() < 0.1:
            continue  # a sub-category left out
        tag = f"({i + 1})" if numbered else f"({'abcdef'[i]})"
        n = rng.choice([0, 0, 0, 1, 1, 2, 3, 12])
        items = "; ".join(f"finding {k}" for k in range(n))
        end = rng.choice([".", ".", "", " errors."])
        lines.append(f"{tag} {s}: {n}{end}{(' ' + items) if n else ''}")
    rng.shuffle(lines) if rng.random() < 0.2 else None
    return "\n".join(lines)


def _output(rng: random.Random) -> str:
    parts = []
    if rng.random() < 0.8:
        parts.append("[Explanation]:\nThe candidate and the reference differ in a few findings.")
    numbered = rng.random() < 0.25
    if rng.random() < 0.9:
        body = "No clinically significant errors." if rng.random() < 0.1 else _section(rng, numbered)
        parts.append("[Clinically Significant Errors]:\n" + body)
    if rng.random() < 0.8:
        parts.append("[Clinically Insignificant Errors]:\n" + _section(rng, numbered))
    if rng.random() < 0.9:
        m = rng.choice([0, 1, 2, 3, 5])
        head = rng.choice([f"{m}.", f"{m}", "No matched findings.", f" {m}."])
        parts.append("[Matched Findings]:\n" + head + " " + "; ".join(f"match {k}" for k in range(m)))
    sep = rng.choice(["\n\n", "\n\n", "\n", "\n\n\n"])
    text = sep.join(parts)
    if rng.random() < 0.1:
        text = "<|assistant|>\n" + text + "</s>"
    return text


def main() -> None:
    scorer, utils = _load_reference()
    refs, hyps, shipped = _shipped_outputs()
    rng = random.Random(20261125)
    outputs = [*shipped, *(_output(rng) for _ in range(400))]
    cases = []
    for raw in outputs:
        text = utils.clean_responses(raw)
        _, insig = scorer.parse_error_counts(text, scorer.categories[1])
        cases.append({"raw": raw, "cleaned": text, "green": scorer.compute_green(text),
                      "counts": [int(x) for x in scorer.compute_error_count(text)],
                      "insignificant": [int(x) for x in insig]})
    accuracy = scorer.compute_accuracy([c["cleaned"] for c in cases])
    prompts = [utils.make_prompt(r, h) for r, h in zip(refs, hyps)]
    OUT.write_text(json.dumps({"meta": {"repo": "Stanford-AIMI/GREEN", "commit": COMMIT, "shipped": len(shipped)},
                               "refs": refs, "hyps": hyps, "prompts": prompts, "cases": cases,
                               "accuracy": list(accuracy.values())}, indent=0))
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
