"""Per-organ means of Touchstone's published per-case DSC (the values of the card
``touchstone_1_0_totalsegmentator``).

Source: github.com/MrGiovanni/Touchstone at commit f32135a9342fedd3fc21abca68f30c7497265019,
``totalsegmentator_results/<model>/dsc.csv`` (column ``name`` = TotalSegmentator case id, then one
DSC column per organ, blank = not scored). The mean of each organ is taken over its non-blank
cells; the script prints the count of cases and of scored cells per organ beside it.

Re-run::

    git clone https://github.com/MrGiovanni/Touchstone && git -C Touchstone checkout f32135a9
    python tools/touchstone_card_values.py Touchstone nnU-Net_STU-Net_B

(or ``git --git-dir=<bare mirror> archive f32135a9 totalsegmentator_results | tar -x``). The
script reads the CSV only; it contains none of Touchstone's code.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

# Touchstone column -> the class name our touchstone loader gives it (TotalSegmentator file name)
ORGANS = {"aorta": "aorta", "gall_bladder": "gallbladder", "kidney_left": "kidney_left",
          "kidney_right": "kidney_right", "liver": "liver", "pancreas": "pancreas",
          "postcava": "inferior_vena_cava", "spleen": "spleen", "stomach": "stomach"}


def organ_means(path: Path) -> tuple[int, dict[str, tuple[float, int]]]:
    """(number of cases, {our class name: (mean DSC over scored cells, scored cells)})."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for col, ours in ORGANS.items():
        vals = [float(r[col]) for r in rows if r.get(col, "").strip()]
        vals = [v for v in vals if not math.isnan(v)]
        out[ours] = (sum(vals) / len(vals), len(vals))
    return len(rows), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("touchstone", type=Path, help="a Touchstone checkout at f32135a9")
    ap.add_argument("model", help="folder under totalsegmentator_results/, e.g. nnU-Net_STU-Net_B")
    args = ap.parse_args()
    path = args.touchstone / "totalsegmentator_results" / args.model / "dsc.csv"
    n, means = organ_means(path)
    print(f"{path}: {n} cases")
    for name, (mean, k) in means.items():
        print(f"    {name}: {mean:.6f}   # {k} scored cases")
    print(f"    # mean of the 9 organ means: {sum(m for m, _ in means.values()) / len(means):.6f}")


if __name__ == "__main__":
    main()
