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


# -- generative tasks: a scripted model (and judge) in process ------------------------------------------
def _scripted(reply: Callable[[Any], str | None], tag: str, backend: str = "compare_scripted") -> Any:
    """A :class:`~medimg_bench.models.vlm.base.GenerativeAdapter` answering ``reply(request)``;
    None fails that request (a dropped sample fails at ``[predict]``)."""
    from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

    class Scripted(GenerativeAdapter):
        def identity(self) -> dict[str, Any]:
            return {"script": tag}

        def _generate(self, requests: list[Any]) -> list[Any]:
            texts = [reply(r) for r in requests]
            return [GenerationResponse(error="no reply scripted") if t is None else GenerationResponse(text=t, prompt=r.user)
                    for r, t in zip(requests, texts)]

    Scripted.backend = backend
    return Scripted(name=tag)


def _draw(seed: int, *key: str) -> float:
    """A uniform draw fixed by ``seed`` and ``key`` (not by the order the engine asks in)."""
    import zlib

    return float(np.random.default_rng([seed, zlib.crc32("/".join(key).encode())]).random())


# -- 3DReasonKnee (moaks_vqa) ----------------------------------------------------------------------------
KNEE_PATIENTS = ("9000099", "9000296", "9000622", "9000798")
KNEE_ITEMS = {"1": ("Size of BML (including cyst)", "Number of BML within subregion", 3),
              "60": ("Complete Tear", "ACL Repair", 1)}


def _knee_reference(qid: str, a: int, b: int) -> dict[str, Any]:
    first, second, _ = KNEE_ITEMS[qid]
    return {"MOAKS_scores": {"patella medial BML": {first: a, second: b}}} if qid == "1" else {
        "ACL": {first: a, second: b}}


def moaks_dataset(root: Path) -> Any:
    """The SFT layout (references in ``final_diagnosis``): four volumes × the two questions of
    tests/datasets/vqa/test_reasonknee.py, reference grades drawn once."""
    from tests.datasets.vqa.test_reasonknee import QUESTIONS, _volume

    data = root / "knee"
    if not (data / "data" / "generate_data" / "test_balanced.json").exists():
        (data / "volumes").mkdir(parents=True, exist_ok=True)
        items = []
        for k, pid in enumerate(KNEE_PATIENTS):
            _volume(data / "volumes" / f"{pid}.nii.gz", shape=(6, 8, 6), seed=k)
            for qid, (_, _, top) in KNEE_ITEMS.items():
                a, b = (int(_draw(7, pid, qid, j) * (top + 1)) for j in "ab")
                items.append({"image": f"volumes/{pid}.nii.gz", "prompt": QUESTIONS[qid], "answer": "...",
                              "final_diagnosis": json.dumps(_knee_reference(qid, a, b))})
        (data / "data" / "generate_data").mkdir(parents=True)
        (data / "data" / "generate_data" / "test_balanced.json").write_text(json.dumps(items))
    return mb.create_dataset("3dreasonknee", root=data, layout="sft")


def moaks_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
              drop: tuple[str, ...] = ()) -> Path:
    """JSON replies: each reference grade kept with probability ``quality`` (else the next one);
    a share ``(1 − quality) / 2`` of the replies are prose (parse failures)."""
    replies: dict[str, str] = {}
    for sid, q, ans in zip(ds.ids, ds.manifest["question"], ds.manifest["answer"]):
        qid = next(k for k in KNEE_ITEMS if KNEE_ITEMS[k][0] in q)
        top = KNEE_ITEMS[qid][2]
        ref = json.loads(ans)
        grades = [v for inner in ref.values() for v in inner.values()] if qid == "60" else list(
            ref["MOAKS_scores"]["patella medial BML"].values())
        got = [g if _draw(seed, sid, str(j)) < quality else (g + 1) % (top + 1) for j, g in enumerate(grades)]
        prose = _draw(seed, sid, "prose") < (1 - quality) / 2
        replies[sid] = "The knee looks fine." if prose else "```json\n" + json.dumps(_knee_reference(qid, *got)) + "\n```"
    model = _scripted(lambda r: None if r.sample_id in drop else replies[r.sample_id], f"{name}-{quality}-{seed}")
    return _evaluate(model, ds, mb.create_task("moaks_vqa", volume_sampling="reasonknee3d_video"), root / name)


def moaks_relabel(ds: Any) -> Any:
    def regrade(m: pd.DataFrame) -> pd.DataFrame:  # the first question's second grade moves by one
        ref = json.loads(m.loc[m.index[0], "answer"])
        inner = ref["MOAKS_scores"]["patella medial BML"]
        key = list(inner)[1]
        inner[key] = (inner[key] + 1) % 4
        m.loc[m.index[0], "answer"] = json.dumps(ref)
        return m

    return _relabelled(ds, regrade)


# -- CXReasonBench (cxreasonbench_reasoning) -------------------------------------------------------------
def cxreasonbench_dataset(root: Path) -> Any:
    """tests/datasets/vqa/cxreasonbench_fixture.py's release (5 cases, 2 diagnostic tasks), with stages."""
    from tests.datasets.vqa.cxreasonbench_fixture import write_release

    data = root / "cxr"
    release, mimic = data / "CXReasonBench", data / "mimic" / "files"
    if not (release / "dx_by_dicoms.json").exists():
        write_release(data)
    return mb.create_dataset("cxreasonbench", root=release, mimic_root=mimic, stages=True)


def _cxr_judge(request: Any) -> str:
    """The stage judge's verdict on Answer 2 (the model's reply): IDK → IDK, WRONG → False, else True."""
    reply = request.user.split("Answer 2: ")[1]
    return "IDK" if "IDK" in reply else "False" if "WRONG" in reply else "True"


def cxreasonbench_run(root: Path, name: str, ds: Any, *, quality: float = 1.0, seed: int = 0,
                      drop: tuple[str, ...] = ()) -> Path:
    """Conversations: each turn answered right with probability ``quality``, else wrong (a share
    of the initial answers IDK, which sends the case to guidance); the judge reads the reply."""
    def reply(request: Any) -> str | None:
        sid, stage = request.sample_id.split("#")
        if sid in drop:
            return None
        u = _draw(seed, sid, stage)
        if u < quality:
            return "FINAL ANSWER: (a) Yes. VALUE: 0.55"
        return "FINAL ANSWER: (c) IDK" if stage == "init" and u > (1 + quality) / 2 else "FINAL ANSWER: (b) WRONG"

    from medimg_bench.tasks.cxreasonbench import CXReasonBenchReasoningTask

    judge = _scripted(_cxr_judge, "cxr-judge", backend="compare_scripted_judge")
    return _evaluate(_scripted(reply, f"{name}-{quality}-{seed}"), ds, CXReasonBenchReasoningTask(judge=judge),
                     root / name)


def cxreasonbench_relabel(ds: Any) -> Any:
    def change(m: pd.DataFrame) -> pd.DataFrame:  # the first case's final decision has the other answer
        stages = json.loads(m.loc[m.index[0], "stages"])
        stages["path1/stage4"]["content"]["answer"] = "(b) No"
        m.loc[m.index[0], "stages"] = json.dumps(stages, sort_keys=True)
        return m

    return _relabelled(ds, change)


#: task → (dataset builder, run builder, relabel): every registered task must have an entry
TASKS = {
    "classification": (classification_dataset, classification_run, classification_relabel),
    "segmentation": (segmentation_dataset, segmentation_run, segmentation_relabel),
    "vqa": (vqa_dataset, vqa_run, vqa_relabel),
    "report_generation": (report_dataset, report_run, report_relabel),
    "phase_recognition": (phase_dataset, phase_run, phase_relabel),
    "reconstruction": (reconstruction_dataset, reconstruction_run, reconstruction_relabel),
    "moaks_vqa": (moaks_dataset, moaks_run, moaks_relabel),
    "cxreasonbench_reasoning": (cxreasonbench_dataset, cxreasonbench_run, cxreasonbench_relabel),
}


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
