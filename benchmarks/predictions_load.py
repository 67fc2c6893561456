"""Cost of checking stored predictions when they are loaded (``model=predictions``).

    python benchmarks/predictions_load.py [--n 100000] [--classes 14] [--repeats 3]

Writes a CSV of ``n`` ids × ``classes`` probabilities and a JSONL of ``n`` answers into a temporary
folder, then times, in one run, side by side (best of ``repeats``, wall-clock seconds):

* scores: the bare read (``pandas.read_csv`` + the score columns to a float32 matrix) vs
  ``ScoresFromFile`` (read, id checks, columns matched by name, every value checked);
* answers: the bare read (``json.loads`` per line into ``{id: text}``) vs ``AnswersFromFile``
  (UTF-8, objects, repeated keys, id / text types, blanks, duplicates);

and prints the ratio checked / bare for each.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from _timing import best_of as _best  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--classes", type=int, default=14)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from medimg_bench.models.predictions import AnswersFromFile, ScoresFromFile

    rng = np.random.default_rng(0)
    classes = [f"finding_{j}" for j in range(args.classes)]
    ids = [f"img{i:07d}" for i in range(args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "predictions.csv"
        table = pd.DataFrame({"id": ids, **{c: rng.random(args.n) for c in reversed(classes)}})
        table.to_csv(csv, index=False)
        jsonl = Path(tmp) / "answers.jsonl"
        jsonl.write_text("".join(json.dumps({"id": i, "text": "yes" if k % 2 else "no"}) + "\n"
                                 for k, i in enumerate(ids)))

        def bare_scores() -> object:
            t = pd.read_csv(csv, dtype={"id": str})
            return t[classes].to_numpy(dtype=np.float32)

        def bare_answers() -> object:
            out = {}
            for line in jsonl.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                out[str(rec["id"])] = str(rec["text"])
            return out

        rows = [
            ("scores", _best(bare_scores, args.repeats),
             _best(lambda: ScoresFromFile(csv, dataset_classes=classes, multilabel=True), args.repeats)),
            ("answers", _best(bare_answers, args.repeats), _best(lambda: AnswersFromFile(jsonl), args.repeats)),
        ]
    print(f"n={args.n} classes={args.classes} (best of {args.repeats})")
    print(f"{'file':<10}{'bare read s':>14}{'checked s':>12}{'ratio':>8}")
    for name, bare, checked in rows:
        print(f"{name:<10}{bare:>14.3f}{checked:>12.3f}{checked / bare:>8.2f}")


if __name__ == "__main__":
    main()
