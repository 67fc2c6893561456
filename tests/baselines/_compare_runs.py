"""Run directories of every task for the ``compare`` tests: a dataset, predictions on disk
(``model=predictions``) and the engine's ``evaluate`` → ``Results.save``; ``relabel`` gives the
same dataset with some references changed (the issue's "run B with other labels")."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import medimg_bench as mb

REPORTS = {
    "CXR1_IM-1": "Heart size normal. Lungs are clear. No pleural effusion.",
    "CXR2_IM-2": "Mild cardiomegaly. Small left pleural effusion.",
    "CXR3_IM-3": "No pneumothorax. Endotracheal tube tip 4.5 cm above the carina.",
    "CXR4_IM-4": "Possible right lower lobe pneumonia.",
    "CXR5_IM-5": "Stable cardiomegaly. No focal consolidation.",
    "CXR6_IM-6": "Large right pleural effusion with atelectasis.",
}


def _relabelled(ds: Any, change: Callable[[pd.DataFrame], pd.DataFrame]) -> Any:
    out = copy.copy(ds)
    out.manifest = change(ds.manifest.copy())
    return out


def _evaluate(model: Any, ds: Any, task: str, out: Path, **kw: Any) -> Path:
    res = mb.evaluate(model, ds, task=task, progress=False, n_resamples=20, **kw)
    return res.save(out, plots=False)


# -- classification ------------------------------------------------------------------------------------
def classification_dataset(root: Path) -> Any:
    return mb.create_dataset("synthetic_cxr", cache_dir=root / "cache", split="test", n=200, size=16)


def classification_run(root: Path, name: str, ds: Any, *, quality: float = 0.6, seed: int = 0,
                       drop: tuple[str, ...] = (), scores_from: Any = None) -> Path:
    """Scores ``quality × label + noise`` for every sample but ``drop`` (those fail), from the
    labels of ``scores_from`` (default ``ds``: the run is then scored against other labels)."""
    y = (scores_from if scores_from is not None else ds).manifest[list(ds.classes)].to_numpy(float)
    rng = np.random.default_rng(seed)
    scores = np.clip(y * quality + rng.random(y.shape) * (1 - quality), 0, 1)
    table = pd.DataFrame({"id": ds.ids, **{c: scores[:, j] for j, c in enumerate(ds.classes)}})
    table = table[~table["id"].isin(drop)]
    folder = root / f"pred_{name}"
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "predictions.csv", index=False)
    model = mb.create_model("predictions", root=folder / "predictions.csv", num_classes=len(ds.classes))
    return _evaluate(model, ds, "classification", root / name, metrics={"auroc": {}, "auprc": {}})


def classification_relabel(ds: Any, column: str = "effusion", fraction: float = 0.5) -> Any:
    def flip(m: pd.DataFrame) -> pd.DataFrame:
        rows = m.index[: int(len(m) * fraction)]
        m.loc[rows, column] = 1 - m.loc[rows, column]
        return m

    return _relabelled(ds, flip)


# -- segmentation --------------------------------------------------------------------------------------
def segmentation_dataset(root: Path) -> Any:
    return mb.create_dataset("synthetic_ct", cache_dir=root / "cache", split=None, n=4, shape=(16, 12, 8))


def segmentation_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
                     drop: tuple[str, ...] = ()) -> Path:
    """Label maps: the reference with a share ``1 − quality`` of its voxels set to background."""
    import nibabel as nib

    folder = root / f"pred_{name}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for sid, mask in zip(ds.manifest["id"], ds.manifest["mask"]):
        if sid in drop:
            continue
        img = nib.load(str(ds.resolve(mask)))
        lab = np.asarray(img.dataobj).copy()
        lab[rng.random(lab.shape) > quality] = 0
        nib.save(nib.Nifti1Image(lab.astype(np.uint8), img.affine), str(folder / f"{sid}.nii.gz"))
    model = mb.create_model("predictions", root=folder)
    metrics = {"segmentation": {"metric": "segmentation", "metrics": ["dice", "hd95", "nsd"]}}
    return _evaluate(model, ds, "segmentation", root / name, metrics=metrics)


def segmentation_relabel(ds: Any) -> Any:
    def swap(m: pd.DataFrame) -> pd.DataFrame:  # the first case gets the second case's mask
        m.loc[m.index[0], "mask"] = m.loc[m.index[1], "mask"]
        return m

    return _relabelled(ds, swap)


# -- VQA -------------------------------------------------------------------------------------------------
def vqa_dataset(root: Path) -> Any:
    return mb.create_dataset("synthetic_vqa", cache_dir=root / "cache", n=8, size=16)


def vqa_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
            drop: tuple[str, ...] = ()) -> Path:
    """Answers: the reference for a share ``quality`` of the questions, else a wrong or empty one."""
    rng = np.random.default_rng(seed)
    lines = []
    for sid, row in zip(ds.ids, ds.manifest.to_dict("records")):
        if sid in drop:
            continue
        answer = str(row["answer"])
        if rng.random() > quality:
            answer = {"yes": "no", "no": "yes"}.get(answer, "I cannot tell")
        lines.append(json.dumps({"id": sid, "text": answer.capitalize() + "."}))
    path = root / f"pred_{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return _evaluate(mb.create_model("predictions", root=path), ds, "vqa", root / name)


def vqa_relabel(ds: Any) -> Any:
    def flip(m: pd.DataFrame) -> pd.DataFrame:
        closed = m.index[m["answer"].isin(["yes", "no"])][:3]
        m.loc[closed, "answer"] = m.loc[closed, "answer"].map({"yes": "no", "no": "yes"})
        return m

    return _relabelled(ds, flip)


# -- report generation ---------------------------------------------------------------------------------
def report_dataset(root: Path) -> Any:
    from PIL import Image

    data = root / "iu"
    if not (data / "annotation.json").exists():
        ann = {"train": [], "val": [], "test": [
            {"id": sid, "report": rep, "image_path": [f"{sid}/0.png"], "split": "test"} for sid, rep in REPORTS.items()]}
        for k, sid in enumerate(REPORTS):
            (data / "images" / sid).mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.full((12, 10), 20 * k, np.uint8)).save(data / "images" / sid / "0.png")
        (data / "annotation.json").write_text(json.dumps(ann))
    return mb.create_dataset("iu_xray", root=data, split="test")


def report_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
               drop: tuple[str, ...] = ()) -> Path:
    """Generated reports: the reference's first ``quality`` share of words."""
    lines = []
    for sid, rep in zip(ds.ids, ds.manifest["report"]):
        if sid in drop:
            continue
        words = str(rep).split()
        lines.append(json.dumps({"id": sid, "text": " ".join(words[: max(1, int(len(words) * quality))])}))
    path = root / f"pred_{name}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return _evaluate(mb.create_model("predictions", root=path), ds, "report_generation", root / name)


def report_relabel(ds: Any) -> Any:
    def rewrite(m: pd.DataFrame) -> pd.DataFrame:
        m.loc[m.index[0], "report"] = "Completely different reference report. No effusion."
        return m

    return _relabelled(ds, rewrite)


# -- phase recognition -----------------------------------------------------------------------------------
PHASE_VIDEOS = (41, 42, 43, 44, 45, 46)


def phase_dataset(root: Path) -> Any:
    """Cholec80's layout (annotations only: stored predictions read no frames), six videos of
    40 one-second frames from the phase corpus."""
    from medimg_bench.datasets.video.cholec80 import CHOLEC80_PHASES
    from tests.datasets._video_layouts import write_cholec80_annotations
    from tests.metrics._phase_corpus import cholec80_corpus

    data = root / "cholec80"
    if not (data / "phase_annotations").exists():
        for n, (gt, _) in zip(PHASE_VIDEOS, cholec80_corpus(len(PHASE_VIDEOS), seed=21)):
            per_frame = np.repeat(gt[:40], 25)
            write_cholec80_annotations(data, n, [CHOLEC80_PHASES[p] for p in per_frame],
                                       {i: (1, 0, 1, 0, 0, 0, 0) for i in range(0, per_frame.size, 25)})
    return mb.create_dataset("cholec80", root=data, videos=list(PHASE_VIDEOS),
                             frame_template="none/video{video}/{frame:06d}.png")


def phase_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
              drop: tuple[str, ...] = ()) -> Path:
    """Per-frame phases: the reference for a share ``quality`` of the frames, else another phase."""
    rng = np.random.default_rng(seed)
    m = ds.manifest
    k = len(ds.classes)
    rows = []
    for sid, video, frame, label in zip(m["id"], m["video_id"], m["frame_index"], m["label"]):
        if sid in drop:
            continue
        phase = int(label) if rng.random() < quality else int((label + rng.integers(1, k)) % k)
        rows.append({"video": video, "frame": int(frame), "phase": ds.classes[phase]})
    path = root / f"pred_{name}.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    model = mb.create_model("predictions", root=path, num_classes=k)
    return _evaluate(model, ds, "phase_recognition", root / name, metrics={"phase": {"metric": "phase_frames"}})


def phase_relabel(ds: Any) -> Any:
    def shift(m: pd.DataFrame) -> pd.DataFrame:  # five frames of the first video get the next phase
        rows = m.index[:5]
        m.loc[rows, "label"] = (m.loc[rows, "label"] + 1) % 7
        return m

    return _relabelled(ds, shift)


# -- reconstruction --------------------------------------------------------------------------------------
def reconstruction_dataset(root: Path) -> Any:
    """SKM-TEA's layout (tests/datasets/test_mri_recon.py's k-space fixture): the test split's
    three scans (three patients) × two echoes."""
    from tests.datasets.test_mri_recon import make_skm_tea

    data = root / "skm_tea"
    if not data.exists():
        make_skm_tea(data, scans=("MTR_001", "MTR_002", "MTR_003", "MTR_004", "MTR_005"))
    return mb.create_dataset("skm_tea", root=data, split="test", accelerations=[4], center_fractions=[0.25])


def reconstruction_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
                       drop: tuple[str, ...] = ()) -> Path:
    """``<id>.h5`` reconstructions: the target plus noise of a share ``1 − quality`` of its peak."""
    import h5py

    folder = root / f"pred_{name}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(len(ds)):
        sample = ds[i]
        if sample["id"] in drop:
            continue
        target = sample["target"].numpy()
        noise = rng.normal(size=target.shape) * (1 - quality) * float(target.max())
        with h5py.File(folder / f"{sample['id']}.h5", "w") as f:
            f["reconstruction"] = np.abs(target + noise).astype(np.float32)
    model = mb.create_model("predictions", root=folder, kind="reconstruction")
    return _evaluate(model, ds, "reconstruction", root / name, metrics={"psnr": {}, "ssim": {}, "nmse": {}})


def reconstruction_relabel(ds: Any) -> Any:
    def swap(m: pd.DataFrame) -> pd.DataFrame:  # the first volume is scored against its other echo's target
        m.loc[m.index[0], "echo"] = 3 - int(m.loc[m.index[0], "echo"])
        return m

    return _relabelled(ds, swap)


#: task → (dataset builder, run builder, relabel): every registered task must have an entry
TASKS = {
    "classification": (classification_dataset, classification_run, classification_relabel),
    "segmentation": (segmentation_dataset, segmentation_run, segmentation_relabel),
    "vqa": (vqa_dataset, vqa_run, vqa_relabel),
    "report_generation": (report_dataset, report_run, report_relabel),
    "phase_recognition": (phase_dataset, phase_run, phase_relabel),
    "reconstruction": (reconstruction_dataset, reconstruction_run, reconstruction_relabel),
}


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
