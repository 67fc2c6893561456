"""The ``touchstone`` dataset: Touchstone 1.0's public test cases of TotalSegmentator V2.

Touchstone (Bassi et al., NeurIPS 2024; github.com/MrGiovanni/Touchstone @f32135a9) publishes,
per model, the DSC and NSD of every TotalSegmentator case it scored in
``totalsegmentator_results/<model>/dsc.csv`` (column ``name`` = the TotalSegmentator id
``sXXXX``, then one column per organ, blank = not scored). This loader reads a TotalSegmentator
folder (``meta.csv`` + ``sXXXX/ct.nii.gz`` + ``sXXXX/segmentations/<structure>.nii.gz``) and keeps
the cases such a file lists, with Touchstone's nine organs under TotalSegmentator's file names
(:data:`TOUCHSTONE_ORGANS`: AbdomenAtlas ``gall_bladder`` / ``postcava`` are TotalSegmentator's
``gallbladder`` / ``inferior_vena_cava``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.volumetric.totalsegmentator import totalsegmentator
from medimg_bench.registry import register_dataset

__all__ = ["TOUCHSTONE_ORGANS", "read_case_list", "touchstone"]

#: Touchstone's organ (column of its dsc.csv) -> TotalSegmentator structure file
TOUCHSTONE_ORGANS = {
    "aorta": "aorta", "gall_bladder": "gallbladder", "kidney_left": "kidney_left",
    "kidney_right": "kidney_right", "liver": "liver", "pancreas": "pancreas",
    "postcava": "inferior_vena_cava", "spleen": "spleen", "stomach": "stomach",
}


def read_case_list(path: str | Path) -> list[str]:
    """The case ids of a Touchstone per-case results file (``name`` column of ``dsc.csv`` /
    ``nsd.csv``) or of a text file with one id per line, in file order."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise FileNotFoundError(f"touchstone: cannot read the case list {str(p)!r}: {exc}") from exc
    if p.suffix.lower() == ".csv":
        from io import StringIO

        table = pd.read_csv(StringIO(text), dtype={"name": str})
        if "name" not in table.columns:
            raise ValueError(f"touchstone: {str(p)!r} has no 'name' column (Touchstone's dsc.csv / nsd.csv "
                             f"have one; columns: {list(table.columns)})")
        ids = table["name"].dropna().astype(str).tolist()
    else:
        ids = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not ids:
        raise ValueError(f"touchstone: the case list {str(p)!r} names no case")
    return ids


@register_dataset("touchstone", tags=("ct", "segmentation", "3d", "abdomen"))
def touchstone(root: str | Path, split: str | None = None, *, cases: str | Path, **options: Any):
    """TotalSegmentator V2 cases listed in ``cases`` (a Touchstone ``dsc.csv`` or an id list),
    labels 1..9 = Touchstone's organs in :data:`TOUCHSTONE_ORGANS` order (TotalSegmentator names).
    ``split`` filters by ``meta.csv``'s split column as well (default: every listed case)."""
    ids = read_case_list(cases)
    ds = totalsegmentator(root, split=None, structures=list(TOUCHSTONE_ORGANS.values()), **options)
    known = set(ds.ids)
    missing = [i for i in ids if i not in known]
    if missing:
        raise ValueError(f"touchstone: {len(missing)} of the {len(ids)} cases in {str(cases)!r} are not in "
                         f"{str(root)!r}/meta.csv, e.g. {missing[:3]}")
    out = ds.subset(ids)
    if split is not None:
        out = out.filter(split=split)
        if len(out) == 0:
            raise ValueError(f"touchstone: no listed case is in split {split!r}")
    out.name = "touchstone"
    return out
