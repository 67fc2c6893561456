"""A CXReasonBench release in miniature, laid out as ttumyche/CXReasonBench commit 72357fe's
evaluation code reads it (evaluate_reasoning.py lines 57-60, 105, 129, 161-162, 192-198, 226,
252; evaluate_guidance.py lines 142-149, 172-177, 200): two diagnostic tasks (cardiomegaly, a
measurement task without custom criteria; inclusion, a perception task with ``stage1.5``) and a
few dicoms, both paths, with images under MIMIC ``files/``, ``segmask_bodypart`` and
``pnt_on_cxr``. Written for the tests; no release file was copied."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

CASES = {"cardiomegaly": ["d1", "d2", "d3"], "inclusion": ["d1", "d4"]}
MEASURE_ANSWER = "(b) 0.52 - 0.58"


def _json(path: Path, item: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(item))


def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((6, 8), value, np.uint8)).save(path)


def write_release(tmp: Path) -> tuple[Path, Path]:
    """Writes the tree under ``tmp``; returns ``(root, mimic files folder)``."""
    root, mimic = tmp / "CXReasonBench", tmp / "mimic" / "files"
    _json(root / "dx_by_dicoms.json", CASES)
    for task, dicoms in CASES.items():
        qa = root / "qa" / task
        for n, d in enumerate(dicoms):
            img = f"p10/p10{n}/s{n}/{d}.jpg"
            _png(mimic / img, 40 + 20 * n)
            _json(qa / "path1/init/basic" / f"{d}.json",
                  {"question": f"Is there {task}? (a) Yes (b) No (c) I don't know", "answer": "(a) Yes",
                   "img_path": [img]})
            _json(qa / "path1/stage1/threshold" / f"{d}.json",
                  {"question": [f"{task}: which criterion? (a) ratio (b) width", "Which threshold? (a) 0.5 (b) 0.6"],
                   "answer": ["(a) ratio", "(a) 0.5"]})
            if task == "inclusion":
                _json(qa / "path1/stage1.5/basic" / f"{d}.json",
                      {"question": "Use this custom criterion? (a) Yes (b) No", "answer": "(a) Yes"})
            _json(qa / "path1/stage2/segmask" / f"{d}.json",
                  {"question": ["Which image shows the heart? (a) 1st (b) 2nd", "Which shows the thorax? (a) 1st (b) 2nd"],
                   "answer": ["(a) 1st image", "(b) 2nd image"],
                   "img_path": [[f"/{task}/{d}/heart_1.png", f"/{task}/{d}/heart_2.png"], [f"/{task}/{d}/thorax.png"]]})
            _json(qa / "path1/stage3/basic" / f"{d}.json",
                  {"question": "What is the ratio? (a) 0.3 - 0.4 (b) 0.52 - 0.58", "answer": MEASURE_ANSWER})
            _json(qa / "path1/stage4/basic" / f"{d}.json",
                  {"question": f"So, is there {task}? (a) Yes (b) No", "answer": "(a) Yes"})
            _json(qa / "path2/stage1/basic" / f"{d}.json",
                  {"question": ["This is the heart mask. Which side is it? (a) left (b) right", "Is it complete? (a) Yes"],
                   "answer": ["(a) left", "(a) Yes"], "img_path": [f"/{task}/{d}/guide.png"]})
            _json(qa / "path2/stage2/basic" / f"{d}.json",
                  {"question": "Given the points, what is the ratio? (a) 0.3 - 0.4 (b) 0.52 - 0.58",
                   "answer": MEASURE_ANSWER, "img_path": [f"/{task}/{d}/points.png"]})
            _json(qa / "path2/stage3/basic" / f"{d}.json",
                  {"question": f"With that, is there {task}? (a) Yes (b) No", "answer": "(a) Yes"})
            for k, name in enumerate(("heart_1", "heart_2", "thorax", "guide")):
                _png(root / "segmask_bodypart" / task / d / f"{name}.png", 100 + 10 * k)
            _png(root / "pnt_on_cxr" / task / d / "points.png", 200)
    return root, mimic
