"""A seeded corpus of report pairs (generated, reference) and a training split, written for the
pipeline fixtures (tools/make_report_text_fixtures.py): report-like sentences with the things the
R2Gen cleaning and CXR-Report-Metric's preparation treat specially — numbered lists ("1. ",
"2. "), doubled full stops, quotes, slashes, brackets, decimals, upper case, XXXX de-identification,
commas attached to words — and hypotheses that share part of their reference."""

from __future__ import annotations

import random

from ptb_corpus import ABBREVS, FINDINGS, HYPHENATED, PLACES, SLASHED, WORDS, _num, _sentence

NORMAL = [
    "The heart is normal in size.", "The mediastinum is unremarkable.", "The lungs are clear.",
    "No pneumothorax or pleural effusion.", "No acute bony abnormality.", "Heart size is normal.",
    "The cardiomediastinal silhouette is within normal limits.", "No focal airspace consolidation.",
    "There is no pneumothorax.", "Lungs are clear bilaterally.", "XXXX XXXX are intact.",
    "Degenerative changes of the thoracic spine.", "The XXXX are grossly normal.",
    "No evidence of active disease.", "Pulmonary vascularity is within normal limits.",
]


def _abnormal(rng: random.Random) -> str:
    f, p = rng.choice(FINDINGS), rng.choice(PLACES)
    t = rng.randrange(9)
    if t == 0:
        return f"There is a {_num(rng)} cm {f} in the {p}."
    if t == 1:
        return f"{rng.choice(HYPHENATED).capitalize()} {f}, {rng.choice(['stable', 'new', 'increased'])}."
    if t == 2:
        return f'"{f.capitalize()}" of the {p} ({_num(rng)} mm)..'
    if t == 3:
        return f"Findings c/w {f} {rng.choice(SLASHED)} {p}; {rng.choice(ABBREVS)} follow-up."
    if t == 4:
        return f"{f.upper()} IN THE {p.upper()}."
    if t == 5:
        return f"Mild {f} at the {p}, which may represent atelectasis vs. scarring."
    if t == 6:
        return f"{f.capitalize()}: {p}, {rng.choice(WORDS)}, {rng.choice(WORDS)}!"
    if t == 7:
        return f"Possible {f} in the {p}?"
    return _sentence(rng)


def _report(rng: random.Random) -> str:
    n = rng.randrange(1, 9)
    sents = [rng.choice(NORMAL) if rng.random() < 0.6 else _abnormal(rng) for _ in range(n)]
    if rng.random() < 0.15:
        sents = [f"{k + 1}. {s}" for k, s in enumerate(sents)]
    sep = rng.choice([" ", " ", " ", "  ", "\n", ".  "])
    text = sep.join(sents)
    if rng.random() < 0.05:
        text = text.lower()
    return text


def _hypothesis(rng: random.Random, ref: str) -> str:
    words = ref.split(" ")
    r = rng.random()
    if r < 0.1:
        return _report(rng)
    if r < 0.15:
        return rng.choice(NORMAL)
    out = []
    for w in words:
        x = rng.random()
        if x < 0.1:
            continue
        if x < 0.2:
            out.append(rng.choice(WORDS))
        else:
            out.append(w)
        if rng.random() < 0.03:
            out.append(rng.choice(NORMAL))
    return " ".join(out) or rng.choice(NORMAL)


def report_corpus(n_pairs: int = 2000, n_train: int = 2000, seed: int = 0) -> dict[str, list[str]]:
    """``{"train": [...], "generated": [...], "references": [...]}``, deterministic for a seed."""
    rng = random.Random(seed)
    train = [_report(rng) for _ in range(n_train)]
    refs = [_report(rng) for _ in range(n_pairs)]
    gens = [_hypothesis(rng, r) for r in refs]
    return {"train": train, "generated": gens, "references": refs}
