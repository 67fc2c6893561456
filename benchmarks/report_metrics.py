"""Report metrics speed, side by side with pycocoevalcap in one run (2-core CPU target).

    python benchmarks/report_metrics.py [--n 10000]

Prints: offline labeler reports/s (goal >= 2,000/s); BLEU-1..4 + ROUGE-L + CIDEr-D on N report
pairs for medimg_bench and pycocoevalcap (goal < 20 s for ours), the ratio, and the largest
difference between the two (they must agree). Then the text pipelines on N raw report pairs
(METEOR left out on both sides: the same jar): pycocoevalcap's own pipeline (PTBTokenizer on
both sides, then Bleu, Rouge, Cider) against ``report_text_scores(tokenizer="ptb")`` with the
jar and with the pure-Python lexer, and against ``scoring=r2gen`` (goal: no slower)."""

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


def _raw(texts: list[str]) -> list[str]:
    """Report-like capitalisation and punctuation, so tokenizers have work to do."""
    out = []
    for k, t in enumerate(texts):
        sents = [x.strip().capitalize() for x in t.split(".") if x.strip()]
        extra = ["Heart size 1.5 x 2.3 cm, left-sided (stable).", "It cannot be excluded; e.g. XXXX."][k % 2]
        out.append(". ".join(sents) + ". " + extra)
    return out


def pipelines(n: int) -> None:
    """pycocoevalcap's pipeline against ours on N raw pairs, side by side (prints ratios)."""
    try:
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.rouge.rouge import Rouge
        from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
    except ImportError:
        print("pycocoevalcap not installed: no pipeline comparison")
        return
    from medimg_bench.metrics.text import _ptb_lexer
    from medimg_bench.metrics.text.nlg import report_text_scores
    from medimg_bench.metrics.text.pipelines import coco_scores, r2gen_texts, score_reports
    from medimg_bench.metrics.text.tokenizers import ptb_jar_path, ptb_tokenize

    gen, ref = corpus(n, seed=1)
    gen, ref = _raw(gen), _raw(ref)
    train, _ = corpus(2000, seed=2)
    t = time.perf_counter()
    tok = PTBTokenizer()
    gts = tok.tokenize({i: [{"caption": x}] for i, x in enumerate(ref)})
    res = tok.tokenize({i: [{"caption": x}] for i, x in enumerate(gen)})
    theirs_bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    theirs_rouge, _ = Rouge().compute_score(gts, res)
    theirs_cider, _ = Cider().compute_score(gts, res)
    theirs = time.perf_counter() - t
    print(f"pycocoevalcap pipeline (PTBTokenizer + Bleu + Rouge + Cider) on {n} raw pairs: {theirs:.2f} s")
    if ptb_jar_path() is not None:
        t = time.perf_counter()
        ours = report_text_scores(gen, ref, tokenizer="ptb", meteor=False)
        dt = time.perf_counter() - t
        diff = max(abs(ours["bleu1"] - theirs_bleu[0]), abs(ours["rouge_l"] - theirs_rouge),
                   abs(ours["cider_d"] - theirs_cider))
        print(f"  ours, tokenizer=ptb (jar):    {dt:.2f} s -> pycocoevalcap / ours = {theirs / dt:.2f}x; "
              f"largest difference {diff:.2e}")
    _ptb_lexer._CHUNK_CACHE.clear()
    t = time.perf_counter()
    g, r = ptb_tokenize(gen, backend="python"), ptb_tokenize(ref, backend="python")
    corpus_py, _ = coco_scores(g, r, meteor=False)
    dt = time.perf_counter() - t
    print(f"  ours, tokenizer=ptb (Python): {dt:.2f} s -> {theirs / dt:.2f}x; "
          f"BLEU-1 difference {abs(corpus_py['BLEU_1'] - theirs_bleu[0]):.2e}")
    t = time.perf_counter()
    r2, _ = score_reports(gen, ref, scoring="r2gen", train_reports=train, meteor=False)
    dt = time.perf_counter() - t
    print(f"  ours, scoring=r2gen:          {dt:.2f} s -> {theirs / dt:.2f}x")
    gr, rr = r2gen_texts(gen, ref, train_reports=train)
    t = time.perf_counter()
    gts2 = {i: [x] for i, x in enumerate(rr)}
    res2 = {i: [x] for i, x in enumerate(gr)}
    Bleu(4).compute_score(gts2, res2, verbose=0)
    Rouge().compute_score(gts2, res2)
    Cider().compute_score(gts2, res2)
    dt2 = time.perf_counter() - t
    print(f"  (pycocoevalcap's scorers alone on the r2gen texts: {dt2:.2f} s)")


if __name__ == "__main__":
    main()
    pipelines(int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 10_000)
