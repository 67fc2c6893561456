"""The ``synthetic_vqa`` dataset. Closed yes/no questions about the synthetic chest X-ray phantoms ("Is there a pleural
effusion?"), answered from the phantoms' labels: one question per finding and image, plus one
open question ("Which view is this?"). Images are the phantom PNGs, read through the toolkit's
readers, so the VQA path runs end to end offline. A random model scores near chance here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from medimg_bench.datasets.vqa.base import VQADataset
from medimg_bench.registry import register_dataset


@register_dataset("synthetic_vqa", tags=("vqa", "synthetic", "demo"))
def synthetic_vqa(
    root: str | Path | None = None,
    split: str | None = "test",
    *,
    n: int = 40,
    size: int = 64,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    transform: Callable[[dict], dict] | None = None,
) -> VQADataset:
    """Closed yes/no questions about the synthetic chest X-ray phantoms ("Is there a pleural
    effusion?"), answered from the phantoms' labels: one question per finding and image, plus one
    open question ("Which view is this?"). Images are the phantom PNGs, read through the toolkit's
    readers, so the VQA path runs end to end offline. A random model scores near chance here.
    The phantoms are those of ``synthetic_cxr`` (same ``cache_dir`` and ``root`` rules)."""
    from medimg_bench.datasets.synthetic import CXR_FINDINGS, synthetic_cxr

    base = synthetic_cxr(root=root, split=split, n=n, size=size, seed=seed, cache_dir=cache_dir)
    wording = {"nodule": "a lung nodule", "effusion": "a pleural effusion", "cardiomegaly": "cardiomegaly"}
    records = []
    for row in base.manifest.to_dict("records"):
        for finding in CXR_FINDINGS:
            records.append({
                "id": f"{row['id']}_{finding}", "image_path": row["image"], "patient_id": row["patient_id"],
                "question": f"Is there {wording[finding]} in this chest X-ray?", "options": None,
                "answer": "yes" if int(row[finding]) == 1 else "no", "answer_type": "closed",
                "question_type": "presence",
            })
        records.append({
            "id": f"{row['id']}_view", "image_path": row["image"], "patient_id": row["patient_id"],
            "question": "Which projection is this chest X-ray, PA or AP?", "options": None,
            "answer": str(row["view"]).lower(), "answer_type": "open", "question_type": "view",
        })
    return VQADataset(pd.DataFrame(records), root=base.root, meta_columns=("question_type",),
                      transform=transform, name="synthetic_vqa")
