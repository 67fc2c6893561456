"""Agreement of ``medimg_bench.metrics.label_reports`` with the held-out hand labels.

Re-run: ``PYTHONPATH=. python tools/labeler_heldout_agreement.py [--resamples 2000] [--disagreements]``

Reads ``tests/metrics/text/data/labeler_heldout.jsonl`` (labelled by hand before the labeler was
run on it; see docs/reports.md, "Independent check of the labeler"), labels every sentence and
prints a Markdown table per observation: counts of hand labels, 4-class accuracy over all English
sentences (positive / negative / uncertain / not mentioned), Cohen's kappa over the same 4
classes, agreement where the hand label mentions the observation, and F1 of the positive class,
each with a 95 % percentile bootstrap interval over sentences (medimg_bench.metrics.stats.
bootstrap_ci, seed 0). Then the same summary for subsets (real sentences, real without masked
hedges, written structured sentences) and what the labeler returned for the non-English ones.
``--disagreements`` lists every sentence where the labeler and the hand labels differ.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

OBSERVATIONS = [
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion",
    "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
    "Pleural Other", "Fracture", "Support Devices",
]
DATA = Path(__file__).resolve().parents[1] / "tests" / "metrics" / "text" / "data" / "labeler_heldout.jsonl"
# class codes: 0 not mentioned, 1 positive, 2 negative, 3 uncertain
_CODE = {1: 1, 0: 2, -1: 3}
_NAME = {0: "·", 1: "1", 2: "0", 3: "-1"}
PER_OBS = ("accuracy", "kappa", "agree_mentioned", "f1_positive")
OVERALL = ("exact_sentence", "cell_accuracy", "mention_agreement", "macro_kappa")


def load(path: Path = DATA) -> list[dict]:
    """The JSONL rows, in file order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def encode_gold(rows: list[dict]) -> np.ndarray:
    """(N, 14) class codes of the hand labels."""
    return np.array([[_CODE[r["labels"][o]] if o in r["labels"] else 0 for o in OBSERVATIONS] for r in rows])


def encode_frame(df) -> np.ndarray:
    """(N, 14) class codes of a ``label_reports`` DataFrame (NaN = not mentioned)."""
    v = df[OBSERVATIONS].to_numpy(dtype=float)
    out = np.zeros(v.shape, dtype=np.int64)
    for value, code in _CODE.items():
        out[v == value] = code
    return out


def _kappa(p: np.ndarray, g: np.ndarray) -> float:
    po = float(np.mean(p == g))
    pe = sum(float(np.mean(p == k)) * float(np.mean(g == k)) for k in range(4))
    return float("nan") if pe >= 1.0 else (po - pe) / (1.0 - pe)


def statistics(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Flat vector: per observation the ``PER_OBS`` values, then the ``OVERALL`` values."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    out = []
    kappas = []
    for j in range(gold.shape[1]):
        p, g = pred[:, j], gold[:, j]
        mentioned = g != 0
        tp = float(np.sum((p == 1) & (g == 1)))
        denom = tp * 2 + float(np.sum((p == 1) & (g != 1))) + float(np.sum((p != 1) & (g == 1)))
        k = _kappa(p, g)
        kappas.append(k)
        out += [float(np.mean(p == g)), k,
                float(np.mean(p[mentioned] == g[mentioned])) if mentioned.any() else float("nan"),
                2 * tp / denom if denom else float("nan")]
    either = (pred[:, 1:] != 0) | (gold[:, 1:] != 0)  # No Finding is derived: left out here
    out += [float(np.mean(np.all(pred == gold, axis=1))), float(np.mean(pred == gold)),
            float(np.mean(pred[:, 1:][either] == gold[:, 1:][either])) if either.any() else float("nan"),
            float(np.nanmean(kappas))]
    return np.array(out)


def measure(pred: np.ndarray, gold: np.ndarray, *, n_resamples: int, seed: int = 0):
    """(estimate, low, high) of :func:`statistics`, percentile bootstrap over sentences."""
    from medimg_bench.metrics.stats import bootstrap_ci

    res = bootstrap_ci(statistics, pred, gold, n_resamples=n_resamples, seed=seed)
    return res.estimate, res.low, res.high


def _fmt(est: float, lo: float, hi: float) -> str:
    if np.isnan(est):
        return "–"
    return f"{est:.3f} [{lo:.3f}, {hi:.3f}]"


def table(rows: list[dict], gold: np.ndarray, est, lo, hi) -> str:
    """The per-observation Markdown table."""
    lines = ["| observation | hand 1 / 0 / −1 | labeler 1 / 0 / −1 | accuracy (4 classes) | Cohen's κ |"
             " agree where mentioned | F1 positive |", "| --- | --- | --- | --- | --- | --- | --- |"]
    return "\n".join(lines + [_obs_line(j, gold, est, lo, hi) for j in range(len(OBSERVATIONS))])


def _obs_line(j: int, gold: np.ndarray, est, lo, hi) -> str:
    g = gold[:, j]
    counts = " / ".join(str(int(np.sum(g == c))) for c in (1, 2, 3))
    cells = [_fmt(est[4 * j + i], lo[4 * j + i], hi[4 * j + i]) for i in range(4)]
    return f"| {OBSERVATIONS[j]} | {counts} | {{pred_{j}}} | " + " | ".join(cells) + " |"


def summary_line(name: str, n: int, est, lo, hi) -> str:
    base = 4 * len(OBSERVATIONS)
    cells = [_fmt(est[base + i], lo[base + i], hi[base + i]) for i in range(len(OVERALL))]
    return f"| {name} | {n} | " + " | ".join(cells) + " |"


def disagreements(rows: list[dict], pred: np.ndarray, gold: np.ndarray) -> list[str]:
    """One line per differing (sentence, observation): id, observation, hand, labeler, text."""
    out = []
    for r, p, g in zip(rows, pred, gold):
        for j in np.flatnonzero(p != g):
            out.append(f"{r['id']}\t{OBSERVATIONS[j]}\thand {_NAME[int(g[j])]}\tlabeler {_NAME[int(p[j])]}"
                       f"\t{r['text']}" + (f"\t# {r['note']}" if r.get("note") else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--disagreements", action="store_true")
    args = ap.parse_args()
    from medimg_bench.metrics import label_reports

    rows = load()
    en = [r for r in rows if r["lang"] == "en"]
    gold, pred = encode_gold(en), encode_frame(label_reports([r["text"] for r in en]))
    est, lo, hi = measure(pred, gold, n_resamples=args.resamples)
    text = table(en, gold, est, lo, hi)
    for j in range(len(OBSERVATIONS)):
        text = text.replace(f"{{pred_{j}}}", " / ".join(str(int(np.sum(pred[:, j] == c))) for c in (1, 2, 3)))
    print(f"## {len(en)} English sentences, {args.resamples} bootstrap resamples over sentences (seed 0)\n")
    print(text + "\n")
    print("| sentences | n | all 14 agree | cell accuracy | agreement where either mentions | mean κ |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(summary_line("all English", len(en), est, lo, hi))
    subsets = {
        "real (IU X-ray)": lambda r: r["id"].startswith("iu-"),
        "real, masked hedges left out": lambda r: r["id"].startswith("iu-") and not r.get("masked"),
        "written, structured style": lambda r: r["id"].startswith("own-"),
    }
    for name, keep in subsets.items():
        idx = np.array([keep(r) for r in en])
        e, lo_, hi_ = measure(pred[idx], gold[idx], n_resamples=args.resamples)
        print(summary_line(name, int(idx.sum()), e, lo_, hi_))
    other = [r for r in rows if r["lang"] != "en"]
    if other:
        print("\nNon-English sentences (expected: unsupported):\n")
        df = label_reports([r["text"] for r in other])
        for r, (_, p) in zip(other, df.iterrows()):
            got = {o: p[o] for o in OBSERVATIONS if not np.isnan(p[o])}
            print(f"- {r['id']} ({r['lang']}) {r['text']!r}: hand {r['labels']}; labeler {got}")
    if args.disagreements:
        print("\n" + "\n".join(disagreements(en, pred, gold)))


if __name__ == "__main__":
    main()
