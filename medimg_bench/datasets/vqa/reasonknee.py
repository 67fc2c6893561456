"""The ``3dreasonknee`` dataset: 3DReasonKnee (Sambara et al. 2025, arXiv 2510.20967; questions and
labels on Hugging Face ``rajpurkarlab/3DReasonKnee``, DESS knee MRI from the OAI, which needs an
NDA account) in the layouts its code reads (rajpurkarlab/3DReasonKnee commit bcc32ba):

``layout="zero_shot"`` — ``code/zero_shot/{qwen2vl,qwen2vl-3b,o1}.py``::

    ROOT/data/split_files/<split>_split.csv     patient_id, time, study_folder, series_folder,
                                                 knee_side, image_filepath (NIfTI), label_filepath
    ROOT/data/question_files/questions_nobbox_<questions>.json   {"1": question text, ...}

every volume of the split asked every question (``questions``: ``guided``, the file those scripts
read, or ``zeroshot``; ``question_ids`` keeps some). The id is the key the scripts store results
under, ``{patient_id}_{time}_{study_folder}_{series_folder}_{knee_side}_{question id}``. These
files carry **no reference answer**: a run scores how replies parse and whether they give every
grade the question asks (task ``moaks_vqa``), not their accuracy.

``layout="sft"`` — ``code/sft/sft_qwen25vl3b{,_inference}.py``::

    ROOT/data/generate_data/<split>_balanced.json   [{"image", "prompt", "answer", "final_diagnosis"}, ...]

one sample per item: ``question`` = ``prompt``, the reference = ``final_diagnosis`` (the text the
inference script compares with what follows the reply's last ``Final diagnosis:``), ``answer``
(reasoning and diagnosis) kept in ``meta["reasoning"]``. The content of ``final_diagnosis`` is not
in the code; the task reads it as a JSON object and a reference that is none fails its sample.

``image_filepath`` / ``image`` name NIfTI volumes (``.nii.gz``), read with nibabel as stored; a
relative path is resolved against ``volume_root`` (default ``ROOT``). ``axis0_slices=160`` applies
``code/sft/data_preprocess.py``'s rule (a volume whose first axis is not 160 long is transposed
``(2, 0, 1)``); the zero-shot scripts slice axis 0 as stored (the default, None). Samples: ``image``
``1×X×Y×Z`` float32 (voxel values, not rescaled: the task's ``volume_sampling`` makes the images),
``question``, ``answer`` (the reference text or None), ``answer_type`` ``"json"``, ``meta``
(``patient_id``, ``question_id``, ``finding``, ``knee_side``, ``affine``, ``spacing``, ``path``).
``finding`` is our grouping of the 69 questions by what they ask (``bml``, ``cartilage``,
``osteophyte``, ``synovitis``, ``meniscal_extrusion``, ``meniscal_morphology``, ``meniscal_cyst``,
``meniscal_hypertrophy``, ``meniscal_root_tear``, ``ligament``, ``patellar_tendon``, ``other``),
for ``subgroups=[finding]``.

Not built: the 3D boxes and the per-study MOAKS grades of the release (its other files), whose
layout is not in the code we read (docs/datasets.md, "3DReasonKnee").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import torch

from medimg_bench.datasets.base import ManifestDataset
from medimg_bench.datasets.vqa.base import finish
from medimg_bench.datasets.vqa.readers import RowErrors, load_json, text_or_none
from medimg_bench.registry import register_dataset

__all__ = ["ReasonKneeDataset", "reasonknee3d", "SPLIT_COLUMNS", "finding_of"]

#: the columns the zero-shot scripts read from ``<split>_split.csv``
SPLIT_COLUMNS = ("patient_id", "time", "study_folder", "series_folder", "knee_side", "image_filepath",
                 "label_filepath")
_QUESTION_FILES = {"guided": "questions_nobbox_guided.json", "zeroshot": "questions_nobbox_zeroshot.json"}
_SFT_FIELDS = ("image", "prompt", "answer", "final_diagnosis")
# (what the question's first sentence names, finding): first match wins
_FINDINGS = (("bone-marrow lesion", "bml"), ("cartilage lesion", "cartilage"), ("osteophyte", "osteophyte"),
             ("synovitis", "synovitis"), ("extrusion", "meniscal_extrusion"),
             ("morphology", "meniscal_morphology"), ("meniscal cyst", "meniscal_cyst"),
             ("hypertrophy", "meniscal_hypertrophy"), ("root tear", "meniscal_root_tear"),
             ("acl", "ligament"), ("pcl", "ligament"), ("patellar tendon", "patellar_tendon"))


def finding_of(question: str) -> str:
    """Our grouping of a 3DReasonKnee question by what its first sentence asks (module docstring)."""
    first = question.split("?")[0].split(". ")[0].casefold()
    return next((f for key, f in _FINDINGS if key in first), "other")


class ReasonKneeDataset(ManifestDataset):
    """Questions on knee MRI volumes (module docstring). Manifest: ``id``, ``patient_id``,
    ``image_path`` (a NIfTI file), ``question``, ``answer`` (reference text or None),
    ``question_id`` and ``finding``; other columns named in ``meta_columns`` go to ``meta``."""

    task = "vqa"

    def __init__(self, manifest: pd.DataFrame, *, root: str | Path | None = None, axis0_slices: int | None = None,
                 meta_columns: Sequence[str] = (), transform: Callable[[dict], dict] | None = None,
                 name: str = "3dreasonknee") -> None:
        super().__init__(manifest, root=root, path_columns=["image_path"], transform=transform, name=name)
        self.axis0_slices = None if axis0_slices is None else int(axis0_slices)
        self.meta_columns = tuple(meta_columns)

    def _volume(self, path: Path) -> tuple[torch.Tensor, dict[str, Any]]:
        from medimg_bench.datasets.io import ImageReadError, check_pixels, read_nifti

        array, meta = read_nifti(path)
        if array.ndim != 3:
            raise ImageReadError(path, f"expected a 3D volume, got shape {array.shape}")
        check_pixels(array, path)  # before the cast: complex voxels are an error, not their real part
        array = np.asarray(array, dtype=np.float32)
        if self.axis0_slices is not None and array.shape[0] != self.axis0_slices:
            # code/sft/data_preprocess.py: "NII data shape is not 160 ... transposed"
            array = array.transpose(2, 0, 1)
            meta["spacing"] = tuple(meta["spacing"][i] for i in (2, 0, 1))
            meta["affine"] = meta["affine"][:, [2, 0, 1, 3]]
        return torch.from_numpy(np.ascontiguousarray(array))[None], meta

    def load(self, row: Mapping[str, Any]) -> dict[str, Any]:
        path = self.resolve(row["image_path"])
        image, vmeta = self._volume(path)
        meta = self.meta_for(row)
        for col in ("question_id", "finding", *self.meta_columns):
            value = row.get(col)
            if value is not None and not (isinstance(value, float) and pd.isna(value)):
                meta[col] = value
        meta.update(path=str(path), affine=vmeta["affine"], spacing=tuple(float(s) for s in vmeta["spacing"]))
        answer = row.get("answer")
        return {"id": str(row["id"]), "image": image, "question": str(row["question"]), "options": None,
                "answer": None if answer is None or (isinstance(answer, float) and pd.isna(answer)) else str(answer),
                "answer_type": "json", "meta": meta}


def _data_dir(root: Path) -> Path:
    return root / "data" if (root / "data").is_dir() else root


def _questions(data: Path, questions: str, question_ids: Sequence[Any] | None) -> dict[str, str]:
    if questions not in _QUESTION_FILES:
        raise ValueError(f"3dreasonknee: questions must be one of {sorted(_QUESTION_FILES)}, got {questions!r}")
    path = data / "question_files" / _QUESTION_FILES[questions]
    table = load_json(path)
    if not isinstance(table, dict) or not table:
        raise ValueError(f"3dreasonknee: {str(path)!r} must hold an object {{question id: question text}}")
    bad = [k for k, v in table.items() if not text_or_none(v)]
    if bad:
        raise ValueError(f"3dreasonknee: {str(path)!r}: question(s) {bad[:5]} have no text")
    if question_ids is None:
        return {str(k): str(v) for k, v in table.items()}
    wanted = [str(q) for q in question_ids]
    missing = [q for q in wanted if q not in table]
    if missing:
        raise ValueError(f"3dreasonknee: question id(s) {missing} are not in {str(path)!r}")
    return {q: str(table[q]) for q in wanted}


def _read_split(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"3dreasonknee: {str(path)!r} does not exist (data/split_files of the "
                                "Hugging Face release rajpurkarlab/3DReasonKnee)")
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"3dreasonknee: cannot read {str(path)!r}: {exc}") from exc
    missing = [c for c in SPLIT_COLUMNS[:-1] if c not in frame.columns]
    if missing:
        raise ValueError(f"3dreasonknee: {str(path)!r} lacks column(s) {missing} (has {list(frame.columns)})")
    return frame


def _zero_shot_records(data: Path, split: str, questions: dict[str, str], errors: RowErrors) -> list[dict[str, Any]]:
    path = data / "split_files" / f"{split}_split.csv"
    records = []
    for n, row in enumerate(_read_split(path).to_dict("records")):
        volume = text_or_none(row["image_filepath"])
        if not volume or not text_or_none(row["patient_id"]):
            errors(path, n, "missing patient_id or image_filepath")
            continue
        key = "_".join(str(row[c]) for c in SPLIT_COLUMNS[:5])
        for qid, text in questions.items():
            records.append({"id": f"{key}_{qid}", "patient_id": str(row["patient_id"]), "image_path": volume,
                            "question": text, "answer": None, "question_id": qid, "finding": finding_of(text),
                            "knee_side": row["knee_side"], "time": row["time"], "split": split})
    return records


def _sft_records(data: Path, split: str, errors: RowErrors) -> list[dict[str, Any]]:
    path = data / "generate_data" / f"{split}_balanced.json"
    items = load_json(path)
    if not isinstance(items, list):
        raise ValueError(f"3dreasonknee: {str(path)!r} must hold a JSON list of items")
    records = []
    for n, item in enumerate(items):
        if not isinstance(item, dict) or any(text_or_none(item.get(k)) is None for k in ("image", "prompt", "final_diagnosis")):
            errors(path, n, f"an item needs non-empty {list(_SFT_FIELDS[:2])} and 'final_diagnosis'")
            continue
        image = str(item["image"])
        stem = PurePosixPath(image.replace("\\", "/")).name.removesuffix(".gz").removesuffix(".nii")
        records.append({"id": f"{stem}_{n}", "patient_id": stem, "image_path": image,
                        "question": str(item["prompt"]), "answer": str(item["final_diagnosis"]),
                        "question_id": None, "finding": finding_of(str(item["prompt"])),
                        "reasoning": text_or_none(item.get("answer")), "json_row": n, "split": split})
    return records


@register_dataset("3dreasonknee", tags=("vqa", "3d", "mri", "knee", "grounding", "structured"))
def reasonknee3d(
    root: str | Path,
    split: str = "test",
    *,
    layout: str = "zero_shot",
    questions: str = "guided",
    question_ids: Sequence[Any] | None = None,
    volume_root: str | Path | None = None,
    axis0_slices: int | None = None,
    on_error: str = "raise",
    transform: Callable[[dict], dict] | None = None,
) -> ReasonKneeDataset:
    """3DReasonKnee in the layout its code reads (module docstring): ``layout`` ``zero_shot``
    (``<split>_split.csv`` × a question file) or ``sft`` (``<split>_balanced.json``). Returns a
    :class:`ReasonKneeDataset` of NIfTI volumes with questions (and, for ``sft``, references)."""
    root = Path(root)
    data = _data_dir(root)
    errors = RowErrors("3dreasonknee", on_error)
    if layout == "zero_shot":
        records = _zero_shot_records(data, split, _questions(data, questions, question_ids), errors)
        meta_columns: tuple[str, ...] = ("knee_side", "time")
    elif layout == "sft":
        records = _sft_records(data, split, errors)
        meta_columns = ("reasoning",)
    else:
        raise ValueError(f"3dreasonknee: layout must be 'zero_shot' or 'sft', got {layout!r}")
    frame = finish(records, errors, "3dreasonknee", data)
    return ReasonKneeDataset(frame, root=Path(volume_root) if volume_root is not None else root,
                             axis0_slices=axis0_slices, meta_columns=meta_columns, transform=transform)

