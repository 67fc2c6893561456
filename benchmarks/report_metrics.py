"""Report metrics speed, side by side with pycocoevalcap in one run (2-core CPU target).

    python benchmarks/report_metrics.py [--n 10000]

Prints: offline labeler reports/s (goal >= 2,000/s); BLEU-1..4 + ROUGE-L + CIDEr-D on N report
pairs for medimg_bench and pycocoevalcap (goal < 20 s for ours), the ratio, and the largest
difference between the two (they must agree)."""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SENTENCES = [
    "the heart size is normal", "mild cardiomegaly", "no pleural effusion or pneumothorax",
    "small left pleural effusion", "bibasilar atelectasis", "possible right lower lobe pneumonia",
    "the lungs are clear", "no focal consolidation", "endotracheal tube tip 4 cm above the carina",
    "mild pulmonary edema", "no acute cardiopulmonary process", "stable appearance of the chest",
    "degenerative changes of the thoracic spine", "atelectasis cannot be excluded",
]


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    gen = [". ".join(rng.sample(SENTENCES, rng.randint(2, 5))) + "." for _ in range(n)]
    ref = [". ".join(rng.sample(SENTENCES, rng.randint(2, 6))) + "." for _ in range(n)]
    return gen, ref


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    args = ap.parse_args()
    from medimg_bench.metrics import label_reports
    from medimg_bench.metrics.text.nlg import bleu_scores, cider_d_scores, rouge_l_scores, tokenize

    gen, ref = corpus(args.n)
    label_reports(gen[:10])  # compile the patterns once
    t = time.perf_counter()
    label_reports(gen)
    dt = time.perf_counter() - t
    print(f"labeler: {args.n} reports in {dt:.2f} s = {args.n / dt:,.0f} reports/s (goal >= 2,000/s)")

    g = [tokenize(x) for x in gen]
    r = [[tokenize(x)] for x in ref]
    t = time.perf_counter()
    ours_bleu, _ = bleu_scores(g, r)
    ours_rouge, _ = rouge_l_scores(g, r)
    ours_cider, _ = cider_d_scores(g, r)
    ours = time.perf_counter() - t
    print(f"medimg_bench BLEU+ROUGE-L+CIDEr-D on {args.n} pairs: {ours:.2f} s (goal < 20 s)")
    try:
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.rouge.rouge import Rouge
    except ImportError:
        print("pycocoevalcap not installed: no comparison")
        return
    gts = {i: x for i, x in enumerate(r)}
    res = {i: [x] for i, x in enumerate(g)}
    t = time.perf_counter()
    ref_bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    ref_rouge, _ = Rouge().compute_score(gts, res)
    ref_cider, _ = Cider().compute_score(gts, res)
    theirs = time.perf_counter() - t
    diff = max(max(abs(a - b) for a, b in zip(ours_bleu, ref_bleu)), abs(ours_rouge - ref_rouge),
               abs(ours_cider - ref_cider))
    print(f"pycocoevalcap same inputs: {theirs:.2f} s  -> ratio {theirs / ours:.2f}x; "
          f"largest difference {diff:.2e}")


if __name__ == "__main__":
    main()
