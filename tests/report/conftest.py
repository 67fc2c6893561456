"""Run directories the report tests read, built once per test process: a classification and a
segmentation run through the configuration layer (so the page written at the end of every run
is exercised), a VQA run on a small VQA-RAD layout and a report-generation run on a small IU
X-ray layout, both answered by scripted adapters whose right and wrong answers are known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import medimg_bench as mb
from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

TINY = ["bootstrap.n_resamples=20", "progress=false", "checkpoint_interval_s=0"]

# VQA-RAD-like questions: (question, answer, answer type, what the scripted model says)
VQA = {
    1: ("Is there an effusion?", "yes", "CLOSED", "Yes, there is."),            # right
    2: ("Is the heart enlarged?", "no", "CLOSED", "yes"),                       # parsed, wrong
    3: ("Is this abnormal?", "no", "CLOSED", "the image shows a lung"),         # unparsed
    4: ("Where is the opacity?", "left lung", "OPEN", "left lung"),            # right
    5: ("Which organ is shown?", "liver", "OPEN", "kidney"),                    # wrong
    6: ("Is there a fracture?", "no", "CLOSED", "No."),                         # right
    7: ("Is there free air?", "yes", "CLOSED", "maybe, hard to say"),           # unparsed
    8: ("Is the trachea midline?", "yes", "CLOSED", "no"),                      # parsed, wrong
    9: ("What modality is this?", "ct", "OPEN", "HTTP"),                        # request fails
}
VQA_FAIL = {"9"}
REPORTS = {
    "CXR1_IM-1": ("Heart size normal. Lungs are clear. No pleural effusion.", "Heart size normal. Lungs are clear."),
    "CXR2_IM-2": ("Mild cardiomegaly. Small left pleural effusion.", "No cardiomegaly. No effusion."),
    "CXR3_IM-3": ("No pneumothorax. Right lower lobe pneumonia.", "No pneumothorax. Lungs are clear."),
    "CXR4_IM-4": ("Lungs are clear.", "Lungs are clear."),
}


class Scripted(GenerativeAdapter):
    """Answers by sample id; ids in ``fail`` get an HTTP error."""

    backend = "scripted"

    def __init__(self, answers: dict[str, str], fail: set[str] = frozenset()) -> None:
        super().__init__(name="scripted")
        self.answers, self.fail = answers, set(fail)

    def identity(self) -> dict:
        return {"answers": sorted(self.answers.items())}

    def _generate(self, requests):
        return [GenerationResponse(error="HTTP 503 from http://127.0.0.1:9/v1 after 3 retries") if r.sample_id in self.fail
                else GenerationResponse(text=self.answers[r.sample_id], prompt=r.user) for r in requests]


def _vqa_rad(root: Path) -> Path:
    items = [{"qid": q, "image_name": f"img{q % 3}.png", "image_organ": "CHEST" if q % 2 else "ABD",
              "answer": a, "answer_type": t, "question_type": "PRES" if t == "CLOSED" else "ORGAN",
              "question": text, "phrase_type": "test_freeform"} for q, (text, a, t, _) in VQA.items()]
    root.mkdir(parents=True, exist_ok=True)
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(items))
    (root / "VQA_RAD Image Folder").mkdir(exist_ok=True)
    yy, xx = np.mgrid[0:48, 0:40]
    for k in range(3):
        Image.fromarray(((xx * (k + 2) + yy * 3) % 256).astype(np.uint8)).save(root / "VQA_RAD Image Folder" / f"img{k}.png")
    return root


def _iu_xray(root: Path) -> Path:
    ann = {"train": [], "val": [], "test": [{"id": sid, "report": ref, "image_path": [f"{sid}/0.png"], "split": "test"}
                                           for sid, (ref, _) in REPORTS.items()]}
    root.mkdir(parents=True, exist_ok=True)
    (root / "annotation.json").write_text(json.dumps(ann))
    for k, sid in enumerate(REPORTS):
        (root / "images" / sid).mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((40, 36), 30 + 50 * k, np.uint8)).save(root / "images" / sid / "0.png")
    return root


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report_runs")


@pytest.fixture(scope="session")
def cls_run(runs_root: Path, synthetic_root: Path) -> Path:
    """A classification run (untrained resnet10t on 32-px phantoms) with subgroups."""
    from medimg_bench.runs import run

    out = runs_root / "cls"
    run(["task=classification", "dataset=synthetic_cxr", f"dataset.options.cache_dir={synthetic_root}/cxr", "dataset.options.n=24",
         "dataset.options.size=32", "model=timm_resnet10t", "batch_size=8", "subgroups=[sex,site]", *TINY], run_dir=out)
    return out


@pytest.fixture(scope="session")
def seg_run(runs_root: Path, synthetic_root: Path) -> Path:
    """A segmentation run (untrained UNet on 32 x 32 x 16 CT phantoms), 4 worst cases kept."""
    from medimg_bench.runs import run

    out = runs_root / "seg"
    run(["task=segmentation", "dataset=synthetic_ct", f"dataset.options.cache_dir={synthetic_root}/ct",
         "dataset.options.shape=[32,32,16]", "model=monai_unet", "model.options.channels=[4,8,16]",
         "metrics=segmentation", "task.options.keep_worst=4", "batch_size=2", *TINY], run_dir=out)
    return out


@pytest.fixture(scope="session")
def vqa_run(runs_root: Path) -> Path:
    """A VQA run on a 9-question VQA-RAD layout: 3 right, 2 parsed but wrong... (see VQA)."""
    from medimg_bench.report import write_report

    root = _vqa_rad(runs_root / "vqa_rad")
    ds = mb.create_dataset("vqa_rad", root=root, split="test")
    model = Scripted({str(q): v[3] for q, v in VQA.items()}, fail=VQA_FAIL)
    res = mb.evaluate(model, ds, task="vqa", batch_size=4, progress=False, n_resamples=20)
    out = runs_root / "vqa"
    res.save(out, config={"task": {"name": "vqa"}, "dataset": {"name": "vqa_rad", "root": str(root), "split": "test"},
                          "model": {"name": "scripted"}})
    write_report(out)
    return out


@pytest.fixture(scope="session")
def report_run(runs_root: Path) -> Path:
    """A report-generation run on a 4-study IU X-ray layout."""
    from medimg_bench.report import write_report

    root = _iu_xray(runs_root / "iu")
    ds = mb.create_dataset("iu_xray", root=root, split="test")
    model = Scripted({sid: gen for sid, (_, gen) in REPORTS.items()})
    res = mb.evaluate(model, ds, task="report_generation", batch_size=2, progress=False, n_resamples=20)
    out = runs_root / "report"
    res.save(out, config={"task": {"name": "report_generation"},
                          "dataset": {"name": "iu_xray", "root": str(root), "split": "test"}, "model": {"name": "scripted"}})
    write_report(out)
    return out
