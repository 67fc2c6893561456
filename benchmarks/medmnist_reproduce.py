"""Re-run the MedMNIST real-data verdicts of docs/baselines.md and print their table.

For every (card, flag) it calls ``reproduce CARD --seeds ...`` on the official files, in passes
(first seed 0 of every pair, then seed 1, ...) so that a partial run already gives one value of
everything; a seed whose run directory is finished is reused, never retrained, so the same
command finishes an interrupted job. Each call's wall time and the machine are appended to
``OUT/log.jsonl``; the table (published, mean ± SD over seeds, interval, verdict, wall time,
machine) is written to ``OUT/table.md`` and printed.

    python benchmarks/medmnist_reproduce.py --root ../shared/data/medmnist --out /work/runs_medmnist \
        --job medmnist_v2_resnet18_28:0,1,2 --job medmnist_v2_resnet50_28:0 \
        --flags breastmnist,retinamnist
    python benchmarks/medmnist_reproduce.py --out /work/runs_medmnist --table-only   # table of what exists

On the 2-core CPU this is many hours (measured, ResNet-18: ~47-49 min per BreastMNIST seed at
load 1-6, a RetinaMNIST seed ~1 h 45 min at load 3-5; on a faster machine of the same kind a
RetinaMNIST seed took 27 min idle with ResNet-18 and 91 min with ResNet-50 beside a test suite,
a BreastMNIST seed 50 min idle with ResNet-50; the issue's first runs took 22 and 31 min); add
``device=cuda`` for a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

DEFAULT_JOBS = ("medmnist_v2_resnet18_28:0,1,2", "medmnist_v2_resnet50_28:0")


def machine() -> str:
    """CPU model, cores and torch threads, or the GPU's name."""
    import torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__})"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads)"


def run_pass(jobs: list[tuple[str, list[int]]], flags: list[str], n: int, args: argparse.Namespace) -> None:
    from medimg_bench.baselines.reproduce import reproduce

    for card, seeds in jobs:
        if len(seeds) < n:
            continue
        for flag in flags:
            run_dir = Path(args.out) / card / f"flag={flag}"
            ovs = [f"flag={flag}", f"dataset.root={args.root}", *args.overrides]  # progress: a line per epoch
            t0, load0 = time.perf_counter(), os.getloadavg()[0]
            out = reproduce(card, ovs, run_dir=run_dir, seeds=seeds[:n])
            entry = {"card": card, "flag": flag, "seeds": seeds[:n], "wall_s": round(time.perf_counter() - t0, 1),
                     "load_before": load0, "load_after": os.getloadavg()[0], "machine": machine(),
                     "time": time.strftime("%Y-%m-%d %H:%M:%S"), "reproduced": out["reproduced"]}
            with open(Path(args.out) / "log.jsonl", "a") as f:
                f.write(json.dumps(entry) + "\n")
            print(json.dumps(entry), flush=True)


def _fmt(v: Any, d: int = 3) -> str:
    return "–" if v is None else f"{v:.{d}f}"


def table(out_dir: Path) -> str:
    """The Markdown table of every ``reproduce.json`` under ``out_dir``."""
    log = {}
    if (out_dir / "log.jsonl").is_file():
        for line in (out_dir / "log.jsonl").read_text().splitlines():
            e = json.loads(line)
            log[(e["card"], e["flag"])] = e
    lines = ["| card | flag | metric | published | mean ± SD (seeds) | per seed | 95 % interval | verdict "
             "| train + eval per seed (min) | machine |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for path in sorted(out_dir.glob("*/flag=*/reproduce.json")):
        rep = json.loads(path.read_text())
        flag = rep["params"].get("flag")
        runs = rep.get("runs") or []
        mins = [((r.get("train_s") or 0) + (r.get("eval_s") or 0)) / 60 for r in runs]
        wall = ", ".join(f"{m:.0f}" for m in mins) or "–"
        mach = log.get((rep["card"], flag), {}).get("machine", runs[0].get("device") if runs else "–")
        for r in rep["rows"]:
            seeds = r.get("per_seed") or []
            sd = f" ± {r['sd']:.3f}" if r.get("sd") is not None else ""
            per = ", ".join(_fmt(p["value"]) for p in seeds)
            ci = "–" if r["ci_low"] is None else f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
            lines.append(f"| {rep['card']} | {flag} | {r['metric']} | {_fmt(r['published'])} | "
                         f"{_fmt(r['measured'])}{sd} ({len(seeds) or 1}) | {per} | {ci} | {r['verdict']} | "
                         f"{wall} | {mach} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="../shared/data/medmnist")
    ap.add_argument("--out", default="runs/medmnist_reproduce")
    ap.add_argument("--job", action="append", help="CARD:SEEDS, e.g. medmnist_v2_resnet18_28:0,1,2")
    ap.add_argument("--flags", default="breastmnist,retinamnist")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("overrides", nargs="*", help="extra overrides for every run, e.g. device=cuda")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        jobs = [(j.split(":")[0], [int(s) for s in j.split(":")[1].split(",")]) for j in (args.job or DEFAULT_JOBS)]
        flags = [f for f in args.flags.split(",") if f]
        for n in range(1, max(len(s) for _, s in jobs) + 1):
            run_pass(jobs, flags, n, args)
    text = table(out)
    (out / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
