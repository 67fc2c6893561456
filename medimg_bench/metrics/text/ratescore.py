"""RaTEScore (Zhao et al. 2024, "RaTEScore: A Metric for Radiology Report Generation"):
entity-aware similarity of a generated report to its reference.

Medical entities of five types (ABNORMALITY, NON-ABNORMALITY, DISEASE, NON-DISEASE, ANATOMY)
are found by a NER model (RaTE-NER) and embedded by a synonym encoder (BioLORD-2023-C, the [CLS]
state). Each reference entity is matched to its most cosine-similar candidate entity;
``s(ref → cand) = Σ cos·w(t_ref, t_match)·n / Σ w(t_ref, t_match)`` with ``w`` the affinity matrix
and ``n`` the negation weight when one type is the negation of the other's (e.g. DISEASE vs
NON-DISEASE), else 1. RaTEScore is the harmonic mean of ``s(ref → cand)`` and ``s(cand → ref)``
(0 when both are 0) and **0.5 when either report has no entity** — the rule of the ``ratescore``
0.6.0 package (PyPI). The GitHub repository's 0.1.0 scored one direction only with a fixed
negation weight; that version is not offered.

The affinity matrices ``"long"`` (default) and ``"short"`` are the package's numbers
(:data:`AFFINITY`). Equal to the package's ``compute_score`` on 300 generated entity sets
(tests/metrics/text/test_ratescore.py). The models load from local paths (``ner_model=``,
``encoder_model=``) through transformers; the NER's span decoding is the package's
(:func:`decode_rate_spans`, equal on generated label sequences), its sentence splitting a simple
rule instead of medspacy's PyRuSH; an ``ner=`` callable (texts → lists of (entity, type)) may
replace it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = ["AFFINITY", "RATESCORE_TYPES", "decode_rate_spans", "load_rate_ner", "ratescore_pair", "ratescore_scores", "load_biolord_encoder", "RaTEScoreMetric"]

RATESCORE_TYPES = ("ABNORMALITY", "NON-ABNORMALITY", "DISEASE", "NON-DISEASE", "ANATOMY")

#: the ratescore 0.6.0 package's affinity matrices (keys "gt type_matched type"; neg_weight)
AFFINITY: dict[str, dict[str, float]] = {
    "long": {
        'abnormality_abnormality': 0.4276119164393705,
        'abnormality_anatomy': 0.6240929990607657,
        'abnormality_disease': 0.0034478181112993847,
        'abnormality_non-abnormality': 0.5431049700217344,
        'abnormality_non-disease': 0.27005425386213877,
        'anatomy_abnormality': 0.7487824274337533,
        'anatomy_anatomy': 0.2856134859160784,
        'anatomy_disease': 0.4592143222158069,
        'anatomy_non-abnormality': 0.02097055139911715,
        'anatomy_non-disease': 0.00013736314126696204,
        'disease_abnormality': 0.8396510075734789,
        'disease_anatomy': 0.9950209388542061,
        'disease_disease': 0.8460555030578727,
        'disease_non-abnormality': 0.9820689020512646,
        'disease_non-disease': 0.3789136708096537,
        'non-abnormality_abnormality': 0.16546764653692908,
        'non-abnormality_anatomy': 0.018670610691852826,
        'non-abnormality_disease': 0.719397354576018,
        'non-abnormality_non-abnormality': 0.0009357166071730684,
        'non-abnormality_non-disease': 0.0927333564267591,
        'non-disease_abnormality': 0.7759420231214385,
        'non-disease_anatomy': 0.1839139293714062,
        'non-disease_disease': 0.10073046076318157,
        'non-disease_non-abnormality': 0.03860183811876373,
        'non-disease_non-disease': 0.34065681486566446,
        'neg_weight': 0.8716553966489615,
    },
    "short": {
        'abnormality_abnormality': 0.4070293318365468,
        'abnormality_anatomy': 0.6952639610605605,
        'abnormality_disease': 0.28342529466226446,
        'abnormality_non-abnormality': 0.9479148658006686,
        'abnormality_non-disease': 0.23875064111146294,
        'anatomy_abnormality': 0.5829759950441763,
        'anatomy_anatomy': 0.7709590751917746,
        'anatomy_disease': 0.0006059634829551632,
        'anatomy_non-abnormality': 0.794672584951181,
        'anatomy_non-disease': 0.27982942400798977,
        'disease_abnormality': 0.8840397619834857,
        'disease_anatomy': 0.9637659445696822,
        'disease_disease': 0.19018958438059513,
        'disease_non-abnormality': 0.6962283914800402,
        'disease_non-disease': 0.943727057946997,
        'non-abnormality_abnormality': 0.1712744286898638,
        'non-abnormality_anatomy': 0.4485149671497294,
        'non-abnormality_disease': 0.00045065329822896076,
        'non-abnormality_non-abnormality': 0.0007887930317199857,
        'non-abnormality_non-disease': 0.8555432840895761,
        'non-disease_abnormality': 0.9555801066212176,
        'non-disease_anatomy': 0.13122106162635216,
        'non-disease_disease': 0.6072996585919443,
        'non-disease_non-abnormality': 0.05650711141169969,
        'non-disease_non-disease': 0.3214769399791204,
        'neg_weight': 0.3611577852354489,
    },
}

_NEGATED = {("NON-DISEASE", "DISEASE"), ("NON-ABNORMALITY", "ABNORMALITY"), ("DISEASE", "NON-DISEASE"),
            ("ABNORMALITY", "NON-ABNORMALITY"), ("NON-DISEASE", "ABNORMALITY"), ("NON-ABNORMALITY", "DISEASE"),
            ("DISEASE", "NON-ABNORMALITY"), ("ABNORMALITY", "NON-DISEASE")}


def decode_rate_spans(tokens: Sequence[str], labels: Sequence[str]) -> list[tuple[int, int, str]]:
    """(first, last, type) token spans of RaTE-NER's BIO labels, read as the package's
    ``post_process`` reads them (``labels`` may run past ``tokens``, over padding): a B- opens a
    span (closed at once before another B- or an O), an I- before a B- or an O closes the open
    span, [CLS]/[SEP] are skipped, a span still open at the end runs to the last word token."""
    spans: list[tuple[int, int, str]] = []
    start: int | None = None
    end: int | None = None
    kind: str | None = None
    for i, (tok, lab) in enumerate(zip(tokens, labels[: len(tokens)])):
        if tok in ("[CLS]", "[SEP]") or lab == "O" or i >= len(labels) - 1:
            continue
        nxt = labels[i + 1]
        if lab.startswith("B-"):
            if nxt.startswith("I-"):
                start, kind = i, lab[2:]
            elif nxt.startswith("B-"):
                start = end = i
                spans.append((i, i, lab[2:]))
                kind = lab[2:]  # the package leaves this span open again (start = end = i)
            elif nxt.startswith("O"):
                spans.append((i, i, lab[2:]))
                start = end = kind = None
        elif lab.startswith("I-") and (nxt.startswith("B-") or nxt.startswith("O")):
            end = i
            if start is not None:
                spans.append((start, end, kind))  # type: ignore[arg-type]
            if nxt.startswith("B-"):
                start, kind = i, lab[2:]
            else:
                start = end = kind = None
    if start is not None and end is None:
        spans.append((start, len(tokens) - 2, kind))  # type: ignore[arg-type]
    return spans


def _matrix(affinity: str | dict[str, float]) -> dict[tuple[str, str], float]:
    table = AFFINITY.get(affinity) if isinstance(affinity, str) else affinity
    if table is None:
        raise ValueError(f"ratescore: affinity must be 'long', 'short' or a mapping, got {affinity!r}")
    return {(k.split("_")[0].upper(), k.split("_")[1].upper()): float(v) for k, v in table.items()}


def _directional(a: torch.Tensor, b: torch.Tensor, a_types: Sequence[str], b_types: Sequence[str],
                 w: dict[tuple[str, str], float]) -> float:
    a, b = F.normalize(a, p=2, dim=1), F.normalize(b, p=2, dim=1)
    neg = w[("NEG", "WEIGHT")]
    num = den = 0.0
    for row, t in zip(a, a_types):
        # one matrix-vector product per entity, as the package: a matrix product rounds differently
        # in float32, and the harmonic mean of two near-zero means magnifies that
        best, j = torch.topk(b @ row, 1)
        s, j = best[0].item(), int(j[0])
        pair = (t, b_types[j])
        weight = w[pair]
        num += s * weight * (neg if pair in _NEGATED else 1)
        den += weight
    return num / den if den != 0 else 0.0


def ratescore_pair(ref_emb: Any, cand_emb: Any, ref_types: Sequence[str], cand_types: Sequence[str],
                   *, affinity: str | dict[str, float] = "long") -> float:
    """RaTEScore of one pair from its entities' embeddings ``(n, d)`` and types; 0.5 when a side
    has no entity."""
    w = _matrix(affinity)
    ref, cand = torch.as_tensor(ref_emb, dtype=torch.float32), torch.as_tensor(cand_emb, dtype=torch.float32)
    if len(ref_types) != len(ref) or len(cand_types) != len(cand):
        raise ValueError("ratescore: one type per entity embedding is needed")
    for t in (*ref_types, *cand_types):
        if t not in RATESCORE_TYPES:
            raise ValueError(f"ratescore: unknown entity type {t!r}; expected one of {RATESCORE_TYPES}")
    if len(ref) == 0 or len(cand) == 0:
        return 0.5
    p = _directional(ref.reshape(len(ref), -1), cand.reshape(len(cand), -1), ref_types, cand_types, w)
    r = _directional(cand.reshape(len(cand), -1), ref.reshape(len(ref), -1), cand_types, ref_types, w)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def load_biolord_encoder(path: str | Path, *, device: str = "cpu") -> Callable[[list[str]], torch.Tensor]:
    """Entity texts → ``(n, d)`` [CLS] embeddings with the synonym encoder at ``path`` (a local
    folder, e.g. FremyCompany/BioLORD-2023-C; max 30 tokens, as the package)."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"ratescore: encoder_model {str(path)!r} is not a local model folder "
                                "(BioLORD-2023-C); the weights are not downloaded by medimg_bench")
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(str(path)), AutoModel.from_pretrained(str(path)).eval().to(device)

    @torch.no_grad()
    def encode(texts: list[str]) -> torch.Tensor:
        if not texts:
            return torch.empty(0, model.config.hidden_size)
        enc = tok(texts, truncation=True, padding=True, return_tensors="pt", max_length=30).to(device)
        return model(**enc).last_hidden_state[:, 0, :].cpu()

    return encode


def load_rate_ner(path: str | Path, *, device: str = "cpu") -> Callable[[list[str]], list[list[tuple[str, str]]]]:
    """Texts → [(entity, type), ...] per text with the token-classification model at ``path`` (a
    local folder, e.g. Angelakeke/RaTE-NER-Deberta): one sentence at a time (512 tokens at most),
    labels by argmax, spans by :func:`decode_rate_spans`. Sentences are split at . ! ? and line
    breaks — the package splits with medspacy's PyRuSH, which can cut differently."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"ratescore: ner_model {str(path)!r} is not a local model folder "
                                "(RaTE-NER-Deberta); the weights are not downloaded by medimg_bench")
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForTokenClassification.from_pretrained(str(path)).eval().to(device)
    id2label = model.config.id2label

    @torch.no_grad()
    def ner(texts: list[str]) -> list[list[tuple[str, str]]]:
        out = []
        for text in texts:
            found: list[tuple[str, str]] = []
            for sent in re.split(r"(?<=[.!?])\s+|\n+", text):
                sent = sent.strip()
                if len(sent) < 3 or not sent.split():  # the package drops these too
                    continue
                enc = tok(sent, max_length=512, truncation=True, return_tensors="pt").to(device)
                labels = [id2label[int(k)] for k in model(**enc).logits[0].argmax(-1)]
                tokens = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
                found += [(tok.convert_tokens_to_string(tokens[a:b + 1]), t)
                          for a, b, t in decode_rate_spans(tokens, labels)]
            out.append(found)
        return out

    return ner


def ratescore_scores(
    references: Sequence[Sequence[tuple[str, str]]],
    candidates: Sequence[Sequence[tuple[str, str]]],
    *,
    encode: Callable[[list[str]], torch.Tensor],
    affinity: str | dict[str, float] = "long",
) -> list[float]:
    """RaTEScore per pair from each report's (entity text, type) list and an entity encoder."""
    if len(references) != len(candidates):
        raise ValueError(f"ratescore: {len(references)} references but {len(candidates)} candidates")
    out = []
    for ref, cand in zip(references, candidates):
        re_ = encode([e for e, _ in ref]) if ref else torch.empty(0, 1)
        ce = encode([e for e, _ in cand]) if cand else torch.empty(0, 1)
        out.append(ratescore_pair(re_, ce, [t for _, t in ref], [t for _, t in cand], affinity=affinity))
    return out


@register_metric("ratescore", tags=("report", "text"))
class RaTEScoreMetric(Metric):
    """Per-report RaTEScore. ``update(generated, references)`` takes texts; entities come from
    ``ner`` (texts → [(entity, type), ...] per text), embeddings from ``encode`` or the local
    encoder folder ``encoder_model``."""

    name = "ratescore"
    per_sample = True
    higher_is_better = True
    input_kind = "text"

    def __init__(self, *, ner: Callable[[list[str]], list[list[tuple[str, str]]]] | None = None,
                 encode: Callable[[list[str]], torch.Tensor] | None = None, encoder_model: str | None = None,
                 ner_model: str | None = None,
                 affinity: str = "long", class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=["ratescore"])
        _matrix(affinity)
        self.affinity, self._ner, self._encode, self._encoder_model = affinity, ner, encode, encoder_model
        self._ner_model = ner_model
        self._loads = {"ner_model": ner is None, "encoder_model": encode is None}  # else not read
        self._given = {"ner": ner, "encode": encode}  # the key's, as given (``_ner`` is loaded later)
        self.add_state("rows", [], dist_reduce_fx="cat")

    def key_files(self) -> dict[str, Any]:
        """The local model folders the metric loads (``ner_model``, ``encoder_model``; not those a
        given ``ner=`` / ``encode=`` replaces): a run's key holds their content."""
        return {k: v for k, v in (("ner_model", self._ner_model), ("encoder_model", self._encoder_model))
                if v is not None and self._loads[k]}

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, str) or isinstance(targets, str):
            raise ValueError(f"{self.name}: expected lists of reports, got a single string")
        if len(preds) != len(targets):
            raise ValueError(f"{self.name}: {len(preds)} generated reports but {len(targets)} references")
        if self._ner is None:
            if self._ner_model is None:
                raise RuntimeError("ratescore: entity extraction needs ner= (texts → (entity, type) lists) or "
                                   "ner_model= (a local RaTE-NER-Deberta folder); none was given")
            self._ner = load_rate_ner(self._ner_model)
        if self._encode is None:
            if self._encoder_model is None:
                raise RuntimeError("ratescore: needs encode= or encoder_model= (a local BioLORD-2023-C folder)")
            self._encode = load_biolord_encoder(self._encoder_model)
        scores = ratescore_scores(self._ner(list(targets)), self._ner(list(preds)), encode=self._encode,
                                  affinity=self.affinity)
        self._add_ids(ids, len(preds))
        self.rows.append(torch.tensor(scores, dtype=torch.float64).reshape(-1, 1))

    def values(self) -> tuple[list[str], torch.Tensor]:
        if not self.rows:
            return list(self.ids), torch.empty(0, 1, dtype=torch.float64)
        return list(self.ids), torch.cat(self.rows)

    def compute(self) -> torch.Tensor:
        return self.values()[1].mean(0)
