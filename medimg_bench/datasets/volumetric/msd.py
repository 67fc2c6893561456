"""The ``msd`` dataset. Medical Segmentation Decathlon task (any of the 10) from its ``dataset.json``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from medimg_bench.datasets.volumetric.manifest import checked_root, finish, rel, split_options
from medimg_bench.datasets.volumetric.volume import (
    VolumeDataset,
    nifti_stem,
)
from medimg_bench.registry import register_dataset

__all__ = ["msd"]


# -- Medical Segmentation Decathlon ------------------------------------------------------------
def _msd_task_dir(root: Path, task: str | None) -> Path:
    if (root / "dataset.json").is_file() and task is None:
        return root
    tasks = sorted(p for p in root.iterdir() if p.is_dir() and (p / "dataset.json").is_file())
    if task is not None:
        matches = [
            p
            for p in tasks
            if p.name == task
            or p.name.startswith(task + "_")
            or p.name.lower().endswith("_" + task.lower())
        ]
        if len(matches) != 1:
            raise FileNotFoundError(
                f"msd: task {task!r} not found under {str(root)!r} (tasks: {[p.name for p in tasks]})"
            )
        return matches[0]
    if not tasks:
        raise FileNotFoundError(
            f"msd: no dataset.json in {str(root)!r} nor in a Task folder below it"
        )
    raise ValueError(
        f"msd: {str(root)!r} holds several tasks {[p.name for p in tasks]}; pass task="
    )


@register_dataset("msd", tags=("ct", "mri", "segmentation", "3d"))
def msd(root: str | Path, split: str | None = "train", *, task: str | None = None, **options: Any):
    """Medical Segmentation Decathlon task (any of the 10) from its ``dataset.json``.

    ``root`` is a task folder (``Task09_Spleen/`` with ``dataset.json``, ``imagesTr``,
    ``labelsTr``, ``imagesTs``) or their parent with ``task="Task09_Spleen"`` (or ``"Task09"``,
    ``"Spleen"``). Splits: ``train`` (the ``training`` list, labelled) and ``test`` (the ``test``
    list, no labels). Multi-modal 4D images give one channel per modality, in dataset.json order.
    """
    options, slice_axis, only = split_options(options, "msd")
    task_dir = _msd_task_dir(checked_root(root, "msd"), task)
    meta_path = task_dir / "dataset.json"
    try:
        info = json.loads(meta_path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"msd: cannot parse {str(meta_path)!r}: {exc}") from exc
    for key in ("labels", "training"):
        if key not in info:
            raise ValueError(f"msd: {str(meta_path)!r} has no {key!r} entry")
    labels = {int(k): str(v) for k, v in info["labels"].items()}
    if sorted(labels) != list(range(len(labels))):
        raise ValueError(f"msd: labels in {str(meta_path)!r} are not 0..K-1: {sorted(labels)}")
    modalities = [
        str(v) for _, v in sorted(info.get("modality", {}).items(), key=lambda kv: int(kv[0]))
    ]
    modality = "CT" if "CT" in modalities else "MR"
    rows = []
    for entry in info["training"]:
        rows.append({"image": rel(entry["image"]), "mask": rel(entry["label"]), "split": "train"})
    for entry in info.get("test", []):
        path = entry["image"] if isinstance(entry, Mapping) else entry
        rows.append({"image": rel(path), "mask": None, "split": "test"})
    manifest = pd.DataFrame(rows, columns=["image", "mask", "split"])
    manifest.insert(0, "id", [nifti_stem(Path(p).name) for p in manifest["image"]])
    manifest["patient_id"] = manifest["id"]
    manifest["modality"] = modality
    ds = VolumeDataset(
        manifest,
        root=task_dir,
        classes=[labels[i] for i in range(len(labels))],
        channel_names=modalities,
        name=f"msd/{info.get('name', task_dir.name)}",
        **options,
    )
    return finish(ds, split, slice_axis, only)
