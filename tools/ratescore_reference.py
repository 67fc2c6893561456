"""Fixtures for ``ratescore``: the RaTEScore package's own scoring of generated entity sets,
stored as numbers in tests/metrics/text/data/ratescore_reference.json.

Reference (run, never copied): ``ratescore==0.6.0`` from PyPI (``pip download ratescore==0.6.0
--no-deps``; the wheel unpacked to RATESCORE_DIR): ``RaTEScore.compute_score`` with its NER
(``run_ner``) and its embedding step (``process_embedding``) replaced by generated entities and
embeddings, so the scoring — ``utils.compute`` both ways, the F1 of the two, 0.5 when a side has
no entity, the "long" and "short" affinity matrices — is theirs. medspacy (imported at load time
for sentence splitting only) is stubbed. The matrices' numbers are stored too, to check ours.

Re-run: ``RATESCORE_DIR=/tmp/rate/x python tools/ratescore_reference.py``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import types
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[1] / "tests/metrics/text/data/ratescore_reference.json"
TYPES = ["ABNORMALITY", "NON-ABNORMALITY", "DISEASE", "NON-DISEASE", "ANATOMY"]


def _load(root: Path) -> types.ModuleType:
    sys.modules["medspacy"] = types.SimpleNamespace(load=lambda **_: None)  # sentence splitting unused
    sys.path.insert(0, str(root))
    import RaTEScore.scorer as scorer  # noqa: PLC0415 - the reference, from RATESCORE_DIR

    return scorer


def _span_cases(rng: random.Random) -> list[dict]:
    """RaTE-NER span decoding (``utils.post_process``) on generated token / BIO label sequences."""
    import RaTEScore.utils as rutils  # noqa: PLC0415 - the reference, from RATESCORE_DIR

    tok = types.SimpleNamespace(convert_tokens_to_string=lambda toks: " ".join(toks))
    labels = ["O", "O", *(f"{p}-{t}" for p in "BI" for t in TYPES)]
    out = []
    for _ in range(400):
        n = rng.randint(1, 12)
        tokens = ["[CLS]", *(f"w{k}" for k in range(n)), "[SEP]"]
        pad = rng.randint(0, 3)  # labels run over padding, as the model's argmax does
        lab = [rng.choice(labels) if rng.random() < 0.7 else rng.choice(labels[2:]) for _ in range(len(tokens) + pad)]
        out.append({"tokens": tokens, "labels": lab, "entities": [list(p) for p in rutils.post_process(tokens, lab, tok)]})
    return out


def main() -> None:
    scorer = _load(Path(os.environ.get("RATESCORE_DIR", "/tmp/rate/x")))
    rng = random.Random(20261125)
    g = torch.Generator().manual_seed(20261125)
    cases = []
    for k in range(300):
        n_ref, n_hyp = rng.choice([0, 1, 2, 3, 5, 8]), rng.choice([0, 1, 2, 3, 5, 8])
        dim = 8
        ref_e = torch.randn(n_ref, dim, generator=g)
        hyp_e = torch.randn(n_hyp, dim, generator=g)
        if n_ref and n_hyp and k % 2:  # near-synonyms: candidate entities close to reference ones
            idx = torch.randint(0, n_ref, (n_hyp,), generator=g)
            hyp_e = ref_e[idx] + 0.3 * torch.randn(n_hyp, dim, generator=g)
        ref_t = [rng.choice(TYPES) for _ in range(n_ref)]
        hyp_t = [rng.choice(TYPES) for _ in range(n_hyp)]
        cases.append({"ref_emb": ref_e.tolist(), "hyp_emb": hyp_e.tolist(), "ref_types": ref_t, "hyp_types": hyp_t})
    queue: list[tuple[torch.Tensor, list[str]]] = []

    def fake_run_ner(texts, *_a, **_k):
        return [int(t) for t in texts]  # the case index stands for the report

    def fake_embedding(pair, *_a, **_k):
        return queue.pop(0)

    scorer.run_ner, scorer.process_embedding = fake_run_ner, fake_embedding
    for matrix in ("long", "short"):
        rs = scorer.RaTEScore.__new__(scorer.RaTEScore)
        table = scorer.DEFAULT_MATRIX_LONG if matrix == "long" else scorer.DEFAULT_MATRIX_SHORT
        rs.affinity_matrix = {(a.split("_")[0].upper(), a.split("_")[1].upper()): v for a, v in table.items()}
        rs.batch_size, rs.visualization_path = 1, None
        rs.tokenizer = rs.model = rs.eval_tokenizer = rs.eval_model = rs.device = rs.idx2label = None
        for c in cases:  # compute_score embeds the reference, then the candidate, per pair
            queue.append((torch.tensor(c["ref_emb"]).reshape(-1, 8), c["ref_types"]))
            queue.append((torch.tensor(c["hyp_emb"]).reshape(-1, 8), c["hyp_types"]))
        ids = [str(i) for i in range(len(cases))]
        scores = rs.compute_score(ids, ids)
        for c, s in zip(cases, scores):
            c[f"score_{matrix}"] = float(s)
    spans = _span_cases(rng)
    OUT.write_text(json.dumps({"meta": {"package": "ratescore==0.6.0"}, "spans": spans,
                               "matrices": {"long": scorer.DEFAULT_MATRIX_LONG, "short": scorer.DEFAULT_MATRIX_SHORT},
                               "cases": cases}))
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
