"""Draw the real-report candidates of the held-out labeler check (tests/metrics/text/data/labeler_heldout.jsonl).

Re-run: ``python tools/labeler_heldout_select.py [--data ../shared/data] > candidates.tsv``

Reports are split into sentences, duplicates merged (their count kept as ``copies``), the 25
commonest sentences taken once each, then a seeded draw from keyword pools that favour findings,
hedges, devices and comparisons. The keywords were written for this draw by someone who had not
read the labeler's phrase lists. The draw gives the ``iu-NNN`` rows (four of them were dropped as
uninterpretable: a contradiction and three with a masked key word); the ``iu-tNN`` rows were picked
by hand from the same pools to add positives of rare observations, and the ``own-``/``nonen-`` rows
were written. Every label in the JSONL was assigned by hand, not by this script.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
from pathlib import Path

POOLS = [  # (name, regex, how many to draw), rarest first
    ("pleural_other", r"pleural thicken|fibrosis|pleural (plaque|calcif)|apical cap|pleural scar", 20),
    ("pneumonia", r"pneumonia|infection|infectious|aspiration", 25),
    ("cardiomegaly", r"cardiomegaly|heart (size )?(is )?(mildly |moderately |markedly )?enlarged|enlarged heart"
     r"|cardiac enlargement|heart size is (upper|top|borderline)|cardiac silhouette is (mildly |moderately )?enlarged", 35),
    ("edema", r"edema|vascular congestion|interstitial|cephalization|kerley|fluid overload|chf|heart failure", 30),
    ("fracture", r"fractur|compression deformit|rib", 25),
    ("atelectasis", r"atelecta|volume loss|collapse|scar|linear opacit|subsegmental|plate", 35),
    ("lesion", r"nodul|mass|lesion|granulom|tumor|metasta|cavit|calcified", 35),
    ("opacity", r"opacit|infiltrat|density|densities|haz|markings|reticular|ground", 35),
    ("consolidation", r"consolidat|airspace disease|air space disease", 20),
    ("effusion", r"effusion|pleural fluid|blunting|costophrenic", 30),
    ("pneumothorax", r"pneumothora", 15),
    ("devices", r"tube|catheter|pacemaker|pacer|wire|clip|line|port|stent|valve|prosthe|hardware|sternotomy"
     r"|device|leads?\b|defibrillator|picc|icd\b|fixation|screw|plate|surgical", 35),
    ("enl_cm", r"mediastin|hilar|aort|tortuous|widen", 25),
    ("uncertain", r"may|possibl|probabl|likely|suggest|cannot|could|question|suspic|concern|equivocal|versus|vs\b"
     r"|not exclude|differential|consider|perhaps|suspect", 25),
    ("compare", r"prior|previous|interval|unchanged|stable|improv|worse|resolv|new\b|since|again|persist|decreas|increas", 15),
]
_SPLIT = re.compile(r"(?<=[.?!])\s+(?=[A-Z0-9(])")


def sentences(data: Path) -> dict[str, list[str]]:
    """Each distinct sentence of both report files -> its sources, in file order."""
    out: dict[str, list[str]] = {}
    ann = json.loads((data / "iu_xray_cvt2distilgpt2" / "annotation.json").read_text())
    for split in ("train", "val", "test"):
        for entry in ann[split]:
            text = re.sub(r"\s+", " ", entry["report"].strip())
            for i, s in enumerate(p for p in _SPLIT.split(text) if p.strip()):
                out.setdefault(s.strip(), []).append(
                    f"iu_xray_cvt2distilgpt2/annotation.json {split} {entry['id']} sentence {i + 1}")
    with open(data / "iu_xray_moerad_rexrank" / "gts.csv", newline="") as f:
        for row in csv.DictReader(f):
            text = re.sub(r"\s+", " ", row["report"].strip())
            for i, s in enumerate(p for p in _SPLIT.split(text) if p.strip()):
                out.setdefault(s.strip(), []).append(
                    f"iu_xray_moerad_rexrank/gts.csv {row['study_id']} sentence {i + 1}")
    return out


def draw(sents: dict[str, list[str]], *, seed: int = 20240521) -> list[tuple[str, str]]:
    """(pool, sentence) pairs: the 25 commonest sentences, then each pool's seeded draw."""
    rng = random.Random(seed)
    chosen = [("common", s) for s in sorted(sents, key=lambda s: -len(sents[s]))[:25]]
    seen = {s for _, s in chosen}
    for name, pattern, n in POOLS:
        pool = sorted(s for s in sents if s not in seen and len(s) > 3 and re.search(pattern, s, re.I))
        rng.shuffle(pool)
        chosen += [(name, s) for s in pool[:n]]
        seen.update(pool[:n])
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
    args = ap.parse_args()
    sents = sentences(args.data)
    for k, (pool, s) in enumerate(draw(sents)):
        print(f"iu-{k:03d}\t{pool}\t{sents[s][0]}\t{len(sents[s])}\t{s}")


if __name__ == "__main__":
    main()
