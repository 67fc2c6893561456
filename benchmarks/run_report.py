"""Time to write report.html for a 451-question VQA run and a 40-case segmentation run (goal:
under 5 s each on the 2-core machine), and what keeping the worst slices costs a run.

    python benchmarks/run_report.py [--questions 451] [--cases 40] [--shape 96 96 48] [--repeat 3]
        [--out DIR]

Builds the two run directories first (not timed): a VQA-RAD layout with ``questions`` questions
on 512 × 512 images, answered by a scripted adapter (55 % right, 30 % parsed but wrong, 15 %
unparseable, so the page has many wrong answers to show); and ``cases`` CT phantoms
(``synthetic_ct``) segmented by a stand-in model that returns the reference shifted by two
voxels with a class swapped in every fifth case (realistic errors; the report's cost does not
depend on the model). Then it times, side by side:

* ``write_report`` in the process that ran the evaluation (what every run does at its end),
  median of ``repeat``;
* ``medimg-bench report RUN_DIR`` as a new process (interpreter start and imports included);
* the segmentation evaluation with ``keep_worst=8`` against ``keep_worst=0`` (the slices the
  run keeps for its page).

Prints wall-clock and CPU seconds (CPU time does not grow when other jobs share the cores) and
the ratios to the 5 s goal, with the load average, on whatever machine runs it; `--reuse` times
the pages of runs already built in `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

GOAL_S = 5.0


def _vqa_rad(root: Path, n: int) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    n_images = max(1, int(n * 0.7))
    items = []
    for q in range(n):
        closed = q % 3 != 0
        items.append({"qid": q, "image_name": f"img{q % n_images:04d}.png", "image_organ": ("CHEST", "ABD", "HEAD")[q % 3],
                      "answer": ("yes" if q % 2 else "no") if closed else f"organ{q % 7}",
                      "answer_type": "CLOSED" if closed else "OPEN", "question_type": ("PRES", "POS", "ORGAN")[q % 3],
                      "question": f"Question {q}: is there a finding in region {q % 11}?", "phrase_type": "test_freeform"})
    root.mkdir(parents=True, exist_ok=True)
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(items))
    folder = root / "VQA_RAD Image Folder"
    folder.mkdir(exist_ok=True)
    base = (np.add.outer(np.arange(512), np.arange(512)) % 256).astype(np.uint8)
    for k in range(n_images):
        noise = rng.integers(0, 40, size=(512, 512), dtype=np.uint8)
        Image.fromarray(base + noise).save(folder / f"img{k:04d}.png")
    return root


def _answers(ds: Any) -> dict[str, str]:
    rng = np.random.default_rng(1)
    out = {}
    for sid, answer in zip(ds.manifest["id"], ds.manifest["answer"]):
        u = rng.random()
        if u < 0.55:
            out[sid] = str(answer)
        elif u < 0.85:
            out[sid] = "no" if str(answer) == "yes" else ("yes" if str(answer) == "no" else "spleen")
        else:
            out[sid] = "the image is hard to interpret"
    return out


def build_vqa_run(work: Path, n: int) -> Path:
    import medimg_bench as mb
    from medimg_bench.models.vlm.base import GenerationResponse, GenerativeAdapter

    class Scripted(GenerativeAdapter):
        backend = "scripted"

        def __init__(self, answers: dict[str, str]) -> None:
            super().__init__(name="scripted")
            self.answers = answers

        def identity(self) -> dict:
            return {"n": len(self.answers)}

        def _generate(self, requests):
            return [GenerationResponse(text=self.answers[r.sample_id], prompt=r.user) for r in requests]

    root = _vqa_rad(work / "vqa_rad", n)
    ds = mb.create_dataset("vqa_rad", root=root, split="test")
    res = mb.evaluate(Scripted(_answers(ds)), ds, task="vqa", batch_size=32, progress=False, n_resamples=200)
    out = work / "vqa_run"
    res.save(out, config={"task": {"name": "vqa"}, "dataset": {"name": "vqa_rad", "root": str(root), "split": "test"},
                          "model": {"name": "scripted"}})
    return out


class ShiftedReference:
    """A stand-in segmentation model: the reference moved by two voxels, a class swapped in
    every fifth case."""

    def to(self, device: Any) -> ShiftedReference:
        return self

    def eval(self) -> ShiftedReference:
        return self

    def predict(self, batch: dict[str, Any]) -> dict[str, Any]:
        import torch

        labels = torch.roll(torch.as_tensor(batch["mask"]), shifts=2, dims=1)
        for i, sid in enumerate(batch["id"]):
            if int(str(sid).rsplit("_", 1)[-1]) % 5 == 0:
                labels[i][labels[i] == 1] = 2
        return {"labels": labels}


def build_seg_run(work: Path, cases: int, shape: list[int], keep: int) -> tuple[Path, float]:
    import medimg_bench as mb
    from medimg_bench.tasks.segmentation import SegmentationTask

    n = round(cases / 0.375)
    ds = mb.create_dataset("synthetic_ct", cache_dir=work / "ct", split="test", n=n, shape=shape)
    task = SegmentationTask(keep_worst=keep)
    metrics = {"dice": {}, "hd95": {}, "assd": {}, "nsd": {"tolerance": 2.0}}
    start = time.process_time()
    res = mb.evaluate(ShiftedReference(), ds, task=task, metrics=metrics, batch_size=2, progress=False, n_resamples=200)
    seconds = time.process_time() - start  # CPU: the wall time swings with the machine's load
    out = work / f"seg_run_keep{keep}"
    res.save(out, config={"task": {"name": "segmentation", "options": {"keep_worst": keep}},
                          "dataset": {"name": "synthetic_ct", "root": str(ds.root), "split": "test",
                                      "options": {"n": n, "shape": shape}}, "model": {"name": "shifted_reference"}})
    return out, seconds


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_report(run_dir: Path, repeat: int) -> dict[str, float]:
    """Median wall and CPU seconds in-process and as a new process (CPU time does not grow when
    other jobs share the cores; wall time does), and the page's size in KB."""
    from medimg_bench.report import write_report

    warm, warm_cpu, cold, cold_cpu = [], [], [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        page = write_report(run_dir)
        warm.append(time.perf_counter() - start)
        warm_cpu.append(time.process_time() - cpu)
        start, cpu = time.perf_counter(), _child_cpu()
        subprocess.run([sys.executable, "-m", "medimg_bench.cli", "report", str(run_dir)], check=True,
                       capture_output=True, text=True)
        cold.append(time.perf_counter() - start)
        cold_cpu.append(_child_cpu() - cpu)
    med = statistics.median
    return {"warm": med(warm), "warm_cpu": med(warm_cpu), "cold": med(cold), "cold_cpu": med(cold_cpu),
            "kb": page.stat().st_size / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=451)
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--shape", type=int, nargs=3, default=[96, 96, 48])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None, help="keep the run directories here (default: a temporary folder)")
    ap.add_argument("--reuse", action="store_true", help="time the pages of the runs already in --out (no build)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.out or tmp)
        vqa, seg = work / "vqa_run", work / "seg_run_keep8"
        if not (args.reuse and vqa.is_dir() and seg.is_dir()):
            vqa = build_vqa_run(work, args.questions)
            _, first = build_seg_run(work, args.cases, args.shape, keep=0)  # also warms up
            seg, with_keep = build_seg_run(work, args.cases, args.shape, keep=8)
            _, again = build_seg_run(work, args.cases, args.shape, keep=0)
            without = min(first, again)
            print(f"segmentation evaluation, CPU: keep_worst=8 {with_keep:.2f} s, keep_worst=0 {without:.2f} s "
                  f"(ratio {with_keep / without:.3f}; keep_worst=0 the faster of two runs)")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; median of {args.repeat}; "
              "wall s (CPU s); the last column: the slower wall time / the 5 s goal")
        print(f"{'run':<30}{'in-process':>16}{'new process':>16}{'/ 5 s':>8}{'page KB':>9}")
        for label, run in ((f"VQA, {args.questions} questions", vqa), (f"segmentation, {args.cases} cases", seg)):
            t = time_report(run, args.repeat)
            warm, cold = f"{t['warm']:.2f} ({t['warm_cpu']:.2f})", f"{t['cold']:.2f} ({t['cold_cpu']:.2f})"
            print(f"{label:<30}{warm:>16}{cold:>16}{max(t['warm'], t['cold']) / GOAL_S:>8.2f}{t['kb']:>9.0f}")


if __name__ == "__main__":
    main()
