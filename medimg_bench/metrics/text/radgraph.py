"""RadGraph F1 of generated reports: entity / relation overlap of RadGraph annotations.

Two reference definitions, both offered by name:

* ``F1RadGraph`` of the ``radgraph`` package (Stanford-AIMI/radgraph ``rewards.py``): per report
  pair three rewards, each the F1 of two sets —
  ``simple`` (entities as (tokens, label)), ``partial`` (entities with a flag "has a relation")
  and ``complete`` (an entity without relations as (tokens, label); one with relations as one
  (tokens, label, relation, target tokens) item per relation). A pair where either side has no
  entity (or an empty text) scores 0. The rule changed between versions (``version=``):
  ``"0.1.18"`` (the PyPI release, commit 35c64b9: tokens compared as written, except that the
  complete reward lower-cases the tokens of entities that have relations) and ``"main"``
  (commit 87f11a1, after b5ab8d0 "Fix case-sensitivity bug": all tokens lower-cased).
* CXR-Report-Metric's (rajpurkarlab, commit 9c9ecad) ``radgraph_combined``: the mean of entity F1
  (sets of (tokens, label), case kept) and relation F1 (sets of
  ((tokens, label), (target tokens, target label), relation)); an empty set on both sides gives 0.

Annotations are RadGraph's JSON: ``{"entities": {id: {"tokens", "label", "relations":
[[relation, target id], ...]}}}``. Producing them needs a RadGraph model: :func:`load_annotator`
runs the ``radgraph`` package's model from a local path / model name, and refuses clearly when
the package or the weights are absent (they cannot be downloaded on an offline machine).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from medimg_bench.metrics.base import Metric
from medimg_bench.registry import register_metric

__all__ = [
    "RADGRAPH_VERSIONS",
    "RADGRAPH_COLUMNS",
    "radgraph_rewards",
    "cxr_metric_radgraph",
    "radgraph_f1",
    "load_annotator",
    "RadGraphF1",
]

RADGRAPH_VERSIONS = ("main", "0.1.18")
#: per-report columns of the metric: F1RadGraph's three rewards, then CXR-Report-Metric's scores
RADGRAPH_COLUMNS = ("radgraph_simple", "radgraph_partial", "radgraph_complete",
                    "radgraph_entity_f1", "radgraph_relation_f1", "radgraph_combined")

Annotation = Mapping[str, Any]


def _entities(ann: Annotation, where: str) -> Mapping[str, Any]:
    ents = ann.get("entities") if isinstance(ann, Mapping) else None
    if not isinstance(ents, Mapping):
        raise ValueError(f"radgraph: {where}: an annotation needs an 'entities' mapping")
    for k, e in ents.items():
        if not isinstance(e, Mapping) or not {"tokens", "label", "relations"} <= set(e):
            raise ValueError(f"radgraph: {where}: entity {k!r} needs tokens, label and relations")
        for rel in e["relations"]:
            if len(rel) != 2 or str(rel[1]) not in ents:
                raise ValueError(f"radgraph: {where}: entity {k!r} has a relation to an unknown entity {rel!r}")
    return ents


def _set_f1(hyp: set, ref: set) -> float:
    # F1RadGraph: precision and recall of the two sets, each 0 when its set is empty
    p = len(hyp & ref) / len(hyp) if hyp else 0.0
    r = len(ref & hyp) / len(ref) if ref else 0.0
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _reward_sets(ents: Mapping[str, Any], version: str) -> tuple[set, set, set]:
    low_all = version == "main"

    def tok(e: Mapping[str, Any]) -> str:
        return e["tokens"].lower() if low_all else e["tokens"]

    simple, partial, complete = set(), set(), set()
    for e in ents.values():
        simple.add((tok(e), e["label"]))
        if not e["relations"]:
            partial.add((tok(e), e["label"]))
            complete.add((tok(e), e["label"]))
        else:
            partial.add((tok(e), e["label"], True))
            complete.update((e["tokens"].lower(), e["label"], r[0], ents[str(r[1])]["tokens"].lower())
                            for r in e["relations"])
    return simple, partial, complete


def radgraph_rewards(hyp: Annotation, ref: Annotation, *, version: str = "main") -> tuple[float, float, float]:
    """F1RadGraph's (simple, partial, complete) rewards, in [0, 1], of one annotated pair."""
    if version not in RADGRAPH_VERSIONS:
        raise ValueError(f"radgraph: version must be one of {RADGRAPH_VERSIONS}, got {version!r}")
    h, r = _entities(hyp, "hypothesis"), _entities(ref, "reference")
    if not h or not r:
        return 0.0, 0.0, 0.0
    hs, rs = _reward_sets(h, version), _reward_sets(r, version)
    return tuple(_set_f1(a, b) for a, b in zip(hs, rs))  # type: ignore[return-value]


def _cxrm_sets(ents: Mapping[str, Any]) -> tuple[set, set]:
    entities = {(e["tokens"], e["label"]) for e in ents.values()}
    relations = set()
    for e in ents.values():
        for rel in e["relations"]:
            t = ents[str(rel[1])]
            relations.add(((e["tokens"], e["label"]), (t["tokens"], t["label"]), rel[0]))
    return entities, relations


def _cxrm_f1(test: set, retrieved: set) -> float:
    tp = len(test & retrieved)
    p = tp / len(retrieved) if retrieved else 0.0
    r = tp / len(test) if test else 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def cxr_metric_radgraph(hyp: Annotation, ref: Annotation) -> tuple[float, float, float]:
    """CXR-Report-Metric's (entity F1, relation F1, radgraph_combined) of one annotated pair."""
    he, hr = _cxrm_sets(_entities(hyp, "hypothesis"))
    re_, rr = _cxrm_sets(_entities(ref, "reference"))
    ef, rf = _cxrm_f1(re_, he), _cxrm_f1(rr, hr)
    return ef, rf, (ef + rf) / 2


def load_annotator(model: str | Path = "radgraph", *, model_cache_dir: str | Path | None = None,
                   batch_size: int = 1, cuda: int | None = None) -> Callable[[list[str]], list[Annotation]]:
    """Texts → RadGraph annotations with the ``radgraph`` package's model ``model``
    ("radgraph", "radgraph-xl", "modern-radgraph-xl") whose archive lies in ``model_cache_dir``
    (a local path: ``model_cache_dir/<model>/`` holds the extracted archive; nothing is
    downloaded; the archive's BERT tokenizer/embedder is read from the Hugging Face cache). Raises
    with what is missing when it cannot load."""
    # the package downloads into model_cache_dir/<model> when that folder is empty: require it filled
    folder = Path(model_cache_dir) / str(model) if model_cache_dir is not None else None
    if folder is None or not (folder / "config.json").is_file() or not (folder / "weights.th").is_file():
        raise FileNotFoundError(f"radgraph_f1: {str(folder)!r} does not hold the extracted {model!r} model "
                                "(config.json, weights.th, vocabulary/ from the radgraph package's archive); "
                                "set model_cache_dir to its parent — medimg_bench downloads no weights")
    try:
        from radgraph import RadGraph  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError("radgraph_f1: annotating texts needs the 'radgraph' package (pip install "
                           "radgraph==0.1.18) and its model weights; or pass annotations directly") from exc
    graph = RadGraph(model_type=str(model), model_cache_dir=str(model_cache_dir), batch_size=batch_size, cuda=cuda)

    def annotate(texts: list[str]) -> list[Annotation]:
        out = graph(list(texts))
        return [out[str(i)] for i in range(len(texts))]

    return annotate


def radgraph_f1(
    hyp_annotations: Sequence[Annotation],
    ref_annotations: Sequence[Annotation],
    *,
    version: str = "main",
    empty: Sequence[bool] | None = None,
) -> torch.Tensor:
    """``(N, 6)`` float64 tensor of :data:`RADGRAPH_COLUMNS` per report pair. ``empty[i]`` marks a
    pair where either text was empty (F1RadGraph's 0 for its three rewards)."""
    if len(hyp_annotations) != len(ref_annotations):
        raise ValueError(f"radgraph_f1: {len(hyp_annotations)} hypotheses but {len(ref_annotations)} references")
    rows = []
    for i, (h, r) in enumerate(zip(hyp_annotations, ref_annotations)):
        try:
            rew = (0.0, 0.0, 0.0) if empty is not None and empty[i] else radgraph_rewards(h, r, version=version)
            rows.append([*rew, *cxr_metric_radgraph(h, r)])
        except ValueError as exc:
            raise ValueError(f"{exc} (report pair {i})") from None
    return torch.tensor(rows, dtype=torch.float64).reshape(-1, len(RADGRAPH_COLUMNS))


@register_metric("radgraph_f1", tags=("report", "text"))
class RadGraphF1(Metric):
    """Per-report RadGraph F1 (:data:`RADGRAPH_COLUMNS`). ``update(generated, references)`` takes
    texts (annotated by ``annotator`` or the model named by ``model`` / ``model_cache_dir``) or
    RadGraph annotation dicts (``annotated=True``)."""

    name = "radgraph_f1"
    per_sample = True
    higher_is_better = True
    input_kind = "text"
    value_range = (0.0, 1.0)

    def __init__(self, *, version: str = "main", annotated: bool = False, model: str = "radgraph",
                 model_cache_dir: str | None = None, annotator: Callable[[list[str]], list[Annotation]] | None = None,
                 class_names: Sequence[str] | None = None) -> None:
        super().__init__(class_names=list(RADGRAPH_COLUMNS))
        if version not in RADGRAPH_VERSIONS:
            raise ValueError(f"{self.name}: version must be one of {RADGRAPH_VERSIONS}, got {version!r}")
        self.version, self.annotated = version, annotated
        self._annotator, self._model, self._cache = annotator, model, model_cache_dir
        self._loads_model = annotator is None and not annotated  # else no model is read
        self._given_annotator = annotator  # the key's, as given (``_annotator`` is loaded later)
        self.add_state("rows", [], dist_reduce_fx="cat")

    def key_files(self) -> dict[str, Any]:
        """``{"model_cache_dir": <dir>/<model>}``, the folder the ``radgraph`` package reads, when
        texts are annotated by it (a run's key holds its content); nothing otherwise."""
        if not self._loads_model or self._cache is None:
            return {}
        return {"model_cache_dir": Path(self._cache).expanduser() / str(self._model)}

    def _annotate(self, texts: list[str]) -> list[Annotation]:
        if self._annotator is None:
            self._annotator = load_annotator(self._model, model_cache_dir=self._cache)
        return self._annotator(texts)

    def update(self, preds: Any, targets: Any, meta: Any = None, *, ids: Sequence[str] | None = None) -> None:
        if isinstance(preds, str) or isinstance(targets, str):
            raise ValueError(f"{self.name}: expected lists of reports, got a single string")
        if len(preds) != len(targets):
            raise ValueError(f"{self.name}: {len(preds)} generated reports but {len(targets)} references")
        if self.annotated:
            hyp, ref, empty = list(preds), list(targets), None
        else:
            empty = [not str(g).strip() or not str(r).strip() for g, r in zip(preds, targets)]
            keep = [i for i, e in enumerate(empty) if not e]
            anns = self._annotate([preds[i] for i in keep] + [targets[i] for i in keep]) if keep else []
            blank: Annotation = {"entities": {}}
            hyp, ref = [blank] * len(preds), [blank] * len(preds)
            for j, i in enumerate(keep):
                hyp[i], ref[i] = anns[j], anns[j + len(keep)]
        self._add_ids(ids, len(preds))
        self.rows.append(radgraph_f1(hyp, ref, version=self.version, empty=empty))

    def values(self) -> tuple[list[str], torch.Tensor]:
        if not self.rows:
            return list(self.ids), torch.empty(0, len(RADGRAPH_COLUMNS), dtype=torch.float64)
        return list(self.ids), torch.cat(self.rows)

    def compute(self) -> torch.Tensor:
        return self.values()[1].mean(0)
