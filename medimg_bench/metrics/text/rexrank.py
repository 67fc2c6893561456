"""CXR-Report-Metric's per-report scores and the RadCliQ composite (``scoring=rexrank``), as
rajpurkarlab/CXR-Report-Metric at 9c9ecad39be6cb2be8e75be1d1c50ef8888a3e40 computes them
(``CXRMetric/run_eval.py``, ``config.py``, ``CXRMetric/CheXbert/src/encode.py``), the scores
ReXrank prints:

* ``bleu_score`` — BLEU-2 of one report: ``prep_reports`` (lower case, ``.`` -> `` .``, split on
  single spaces, empty strings dropped) then fast_bleu's ``BLEU([gt], {"bigram": (1/2, 1/2)})``.
* ``bertscore`` — bert-score's F1 with ``model_type="distilroberta-base"`` (bert-score's default
  layer for it: 5), ``lang="en"``, ``rescale_with_baseline=True``, ``idf=False`` (``config.py``
  ``USE_IDF = False``); both texts with runs of spaces collapsed. The rescaling is bert-score's
  ``(F - b) / (1 - b)`` with ``b`` the F column of bert-score's baseline file
  ``rescale_baseline/en/distilroberta-base.tsv`` at that layer (:data:`BERTSCORE_BASELINES`).
* ``semb_score`` — cosine (float32) of the CheXbert [CLS] embeddings of the two reports:
  the last hidden state of the CheXbert checkpoint's BERT at position 0, text stripped, newlines
  and whitespace runs made single spaces, WordPiece tokens with [CLS] / [SEP], over 512 ids cut
  to 511 + [SEP], an empty report encoded as [CLS] [SEP].
* ``radgraph_combined`` — the mean of RadGraph entity F1 and relation F1
  (:func:`~medimg_bench.metrics.text.radgraph.cxr_metric_radgraph`) on RadGraph annotations.
* ``RadCliQ-v0`` / ``RadCliQ-v1`` — linear models of the four scores in the order ``COLS =
  [radgraph_combined, bertscore, semb_score, bleu_score]``: v0 standardises with
  ``normalizer.pkl`` and applies ``composite_metric_model.pkl`` (a scikit-learn
  ``LinearRegression``); v1 is ``radcliq-v1.pkl`` (their ``CompositeMetric``: its own
  ``StandardScaler``, then coefficients with the intercept last). Lower is better. The numbers
  are :data:`RADCLIQ_MODELS`, read out of those pickles by ``tools/rexrank_reference.py`` (the
  package never unpickles).

Models come from options (a local folder or a hub id; nothing is guessed): without one a score
is absent, with the reason, and RadCliQ is absent unless all four are present.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "REXRANK_COLUMNS",
    "RADCLIQ_INPUTS",
    "RADCLIQ_MODELS",
    "BERTSCORE_BASELINES",
    "REXRANK_OPTIONS",
    "REXRANK_FILE_OPTIONS",
    "prep_reports_rexrank",
    "rexrank_bleu2",
    "radcliq",
    "bertscore_baseline",
    "rexrank_bertscore",
    "semb_scores",
    "radgraph_combined_scores",
    "RexrankScorer",
    "rexrank_scores",
]

#: per-report columns, named as CXR-Report-Metric writes them
REXRANK_COLUMNS = ("bleu_score", "bertscore", "semb_score", "radgraph_combined", "RadCliQ-v0", "RadCliQ-v1")
#: run_eval.COLS: the composite's inputs, in its order
RADCLIQ_INPUTS = ("radgraph_combined", "bertscore", "semb_score", "bleu_score")

#: (mean, scale, coefficients, intercept) per version, from CXR-Report-Metric @9c9ecad:
#: v0 = CXRMetric/normalizer.pkl (StandardScaler mean_, scale_) + CXRMetric/composite_metric_model.pkl
#: (LinearRegression coef_, intercept_); v1 = CXRMetric/radcliq-v1.pkl (scaler.mean_, scaler.scale_,
#: coefs[:4], coefs[4]). Printed by tools/rexrank_reference.py.
RADCLIQ_MODELS: dict[str, tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], float]] = {
    "RadCliQ-v0": (
        (0.5398376019082272, 0.6312549595000001, 0.7716797866672277, 0.4607372064809605),
        (0.3018344440559102, 0.22466950746141123, 0.24750333805236252, 0.30336670936092264),
        (-0.4796252644863446, -0.6762170542369337, -0.46366575161751994, 0.2165861905287535),
        1.641666666666666,
    ),
    "RadCliQ-v1": (
        (0.5379231241355762, 0.6175725628125001, 0.7647942121140658, 0.44738335396242174),
        (0.3028258411486429, 0.22430938459304575, 0.2539439110169773, 0.2989271671041838),
        (-0.37708368261038905, -0.37030009974480316, -0.25261621789593225, 4.315048405024756e-12),
        2.466552561323256e-10,
    ),
}

#: bert-score's rescaling baselines (P, R, F) per layer: bert-score 0.3.13,
#: bert_score/rescale_baseline/en/distilroberta-base.tsv (rows LAYER 0..6)
BERTSCORE_BASELINES: dict[tuple[str, str], tuple[tuple[float, float, float], ...]] = {
    ("en", "distilroberta-base"): (
        (0.42608285, 0.4272089, 0.42462298),
        (0.7367886, 0.7370362, 0.736573),
        (0.79922664, 0.799593, 0.7991632),
        (0.8329021, 0.8333321, 0.83291864),
        (0.8442, 0.84462386, 0.84425896),
        (0.84732, 0.84759504, 0.8473319),
        (0.89334005, 0.8935088, 0.8933471),
    ),
}
#: bert-score's default layer (``model2layers``) of the model types CXR-Report-Metric uses
_DEFAULT_LAYERS = {"distilroberta-base": 5}

#: the options that name a model file or folder, or a file of annotations: they enter a run's key
#: by content (:meth:`RexrankScorer.files`), not by path
REXRANK_FILE_OPTIONS = ("bertscore_model", "chexbert_checkpoint", "chexbert_bert_path",
                        "radgraph_model_cache_dir", "radgraph_annotations")
#: the ``scoring.*`` options of ``scoring=rexrank`` and their defaults
REXRANK_OPTIONS: dict[str, Any] = {
    "bertscore_model": None,  # distilroberta-base: a hub id or a local folder
    "bertscore_baseline": "distilroberta-base",  # baseline table; false: no rescaling
    "bertscore_num_layers": None,  # None: bert-score's layer for the baseline model (5)
    "chexbert_checkpoint": None,  # chexbert.pth (local or hf://org/name/chexbert.pth)
    "chexbert_bert_path": None,  # bert-base-uncased: a hub id or a local folder
    "radgraph_model_cache_dir": None,  # folder holding the radgraph package's extracted model
    "radgraph_model": "radgraph",
    "radgraph_annotations": None,  # JSON {report text: RadGraph annotation}, made elsewhere
    "device": "cpu",
    "batch_size": 32,
}
_SPACES = re.compile(" +")
log = logging.getLogger(__name__)
_WHITESPACE = re.compile(r"\s+")


def prep_reports_rexrank(report: str) -> list[str]:
    """CXR-Report-Metric's ``prep_reports`` for one report: lower case, ``.`` -> `` .``, split on
    single spaces, empty strings dropped."""
    return [t for t in str(report).lower().replace(".", " .").split(" ") if t != ""]


def _bleu2(hyp: list[str], ref: list[str]) -> float:
    """BLEU-2 of one hypothesis and one reference as fast_bleu 0.0.90 computes it (NLTK's
    ``sentence_bleu`` with weights (1/2, 1/2) and smoothing method 1, epsilon 0.1)."""
    if not hyp:
        return 0.0
    log_sum = 0.0
    for n in (1, 2):
        h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
        r = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
        num = sum(min(c, r[g]) for g, c in h.items())
        den = max(1, sum(h.values()))
        if n == 1 and num == 0:
            return 0.0
        log_sum += 0.5 * math.log((num if num else 0.1) / den)
    c, rl = len(hyp), len(ref)
    bp = 1.0 if c > rl else math.exp(1 - rl / c)
    return bp * math.exp(log_sum)


def _check_pairs(generated: Sequence[str], references: Sequence[str]) -> None:
    if len(generated) != len(references):
        raise ValueError(f"{len(generated)} generated reports but {len(references)} references")


def rexrank_bleu2(generated: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Per-report BLEU-2 (``bleu_score``) as CXR-Report-Metric computes it (one reference)."""
    _check_pairs(generated, references)
    return np.array([_bleu2(prep_reports_rexrank(g), prep_reports_rexrank(r))
                     for g, r in zip(generated, references)], dtype=float)


def radcliq(components: Mapping[str, Sequence[float]] | np.ndarray, *, version: str = "RadCliQ-v1") -> np.ndarray:
    """RadCliQ per report (lower is better) from the four component scores: a mapping with
    :data:`RADCLIQ_INPUTS` or an ``(N, 4)`` array in that order. ``version``: ``RadCliQ-v0`` or
    ``RadCliQ-v1``."""
    if version not in RADCLIQ_MODELS:
        raise ValueError(f"radcliq: version must be one of {list(RADCLIQ_MODELS)}, got {version!r}")
    if isinstance(components, Mapping):
        missing = [c for c in RADCLIQ_INPUTS if c not in components]
        if missing:
            raise ValueError(f"radcliq: {version} needs {list(RADCLIQ_INPUTS)}; missing {missing}")
        x = np.column_stack([np.asarray(components[c], dtype=np.float64) for c in RADCLIQ_INPUTS])
    else:
        x = np.asarray(components, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != 4:
            raise ValueError(f"radcliq: expected an (N, 4) array of {list(RADCLIQ_INPUTS)}, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"radcliq: non-finite component score in row {int(np.argwhere(~np.isfinite(x))[0, 0])}")
    mean, scale, coef, intercept = (np.asarray(v, dtype=np.float64) for v in RADCLIQ_MODELS[version])
    return ((x - mean) / scale) @ coef + intercept


def bertscore_baseline(model_type: str, layer: int, *, lang: str = "en") -> tuple[float, float, float]:
    """bert-score's rescaling baseline (P, R, F) of ``model_type`` at ``layer``: the stored table,
    else the file of the installed ``bert-score`` package (``rescale_baseline/<lang>/<model>.tsv``)."""
    rows = BERTSCORE_BASELINES.get((lang, model_type))
    if rows is None:
        try:
            from importlib.resources import files

            text = files("bert_score").joinpath(f"rescale_baseline/{lang}/{model_type}.tsv").read_text()
        except (ImportError, FileNotFoundError, OSError) as exc:
            raise ValueError(f"rexrank: no bert-score baseline for {model_type!r} ({lang}) (option "
                             f"`scoring.bertscore_baseline`): stored for {sorted(m for _, m in BERTSCORE_BASELINES)}, "
                             "others are read from an installed bert-score package") from exc
        rows = tuple(tuple(float(v) for v in line.split(",")[1:4]) for line in text.strip().splitlines()[1:])
    if not 0 <= layer < len(rows):
        raise ValueError(f"rexrank: the {model_type!r} baseline has layers 0..{len(rows) - 1}, not {layer} "
                         "(option `scoring.bertscore_num_layers`)")
    return rows[layer]  # type: ignore[return-value]


def rexrank_bertscore(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    model_path: str | Path,
    baseline: str | None = "distilroberta-base",
    num_layers: int | None = None,
    device: str = "cpu",
    batch_size: int = 32,
) -> np.ndarray:
    """Per-report ``bertscore`` (F1, rescaled with ``baseline``'s table unless ``baseline`` is
    None) with CXR-Report-Metric's settings; ``num_layers`` None: bert-score's layer for the
    baseline model type."""
    from medimg_bench.metrics.text.bertscore import bertscore

    _check_pairs(generated, references)
    if num_layers is None:
        if baseline not in _DEFAULT_LAYERS:
            raise ValueError("rexrank: set `scoring.bertscore_num_layers` (bert-score's layer is known for "
                             f"{sorted(_DEFAULT_LAYERS)} only, baseline is {baseline!r})")
        num_layers = _DEFAULT_LAYERS[baseline]
    gen = [_SPACES.sub(" ", str(g)) for g in generated]
    refs = [_SPACES.sub(" ", str(r)) for r in references]
    f1 = bertscore(gen, refs, model_path=model_path, num_layers=num_layers, batch_size=batch_size,
                   device=device)["f1"]
    if baseline is None:
        return f1
    b = bertscore_baseline(str(baseline), int(num_layers))[2]
    return (f1 - b) / (1 - b)


def _chexbert_ids(tok: Any, text: str) -> list[int]:
    """CheXbert's ``bert_tokenizer.tokenize`` of one report (``get_impressions_from_csv`` first)."""
    text = _WHITESPACE.sub(" ", str(text).strip().replace("\n", " ")).strip()
    tokens = tok.tokenize(text) if text else []
    if not tokens:
        return [tok.cls_token_id, tok.sep_token_id]
    ids = [tok.cls_token_id, *tok.convert_tokens_to_ids(tokens), tok.sep_token_id]
    return ids[:511] + [tok.sep_token_id] if len(ids) > 512 else ids


def _chexbert_embeddings(texts: Sequence[str], tok: Any, model: Any, *, device: str, batch_size: int) -> np.ndarray:
    """``(N, hidden)`` float32 [CLS] states of CheXbert's BERT (``encode.py``, ``bert_encoder``)."""
    import torch

    out = []
    for start in range(0, len(texts), batch_size):
        ids = [torch.tensor(_chexbert_ids(tok, t)) for t in texts[start : start + batch_size]]
        padded = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=0)
        mask = (torch.arange(padded.shape[1])[None, :] < torch.tensor([len(i) for i in ids])[:, None]).long()
        with torch.inference_mode():
            hidden = model.bert(padded.to(device), attention_mask=mask.to(device))[0]
        out.append(hidden[:, 0, :].float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


def _cosine32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # add_semb_col: (label * pred).sum() / (norm(label) * norm(pred)) on float32 rows
    return np.array([(x * y).sum() / (np.linalg.norm(x) * np.linalg.norm(y)) for x, y in zip(a, b)],
                    dtype=np.float32).astype(np.float64)


def semb_scores(
    generated: Sequence[str],
    references: Sequence[str],
    *,
    checkpoint: str | Path,
    bert_path: str | Path,
    device: str = "cpu",
    batch_size: int = 18,
) -> np.ndarray:
    """Per-report ``semb_score``: cosine of CheXbert [CLS] embeddings (see the module docstring)."""
    from medimg_bench.metrics.text.chexbert import build, require

    _check_pairs(generated, references)
    tok, model = build(require(bert_path, "chexbert_bert_path", "a bert-base-uncased folder or hub id"),
                        require(checkpoint, "chexbert_checkpoint", "the CheXbert checkpoint"), device)
    gen = _chexbert_embeddings(list(generated), tok, model, device=device, batch_size=batch_size)
    ref = _chexbert_embeddings(list(references), tok, model, device=device, batch_size=batch_size)
    return _cosine32(ref, gen)


def radgraph_combined_scores(
    generated: Sequence[str], references: Sequence[str], *, annotate: Callable[[list[str]], list[Mapping[str, Any]]]
) -> np.ndarray:
    """Per-report ``radgraph_combined`` from an annotator (texts -> RadGraph annotations); an
    empty text has no entities (score 0)."""
    from medimg_bench.metrics.text.radgraph import cxr_metric_radgraph

    _check_pairs(generated, references)
    texts = sorted({str(t) for t in (*generated, *references) if str(t).strip()})
    anns = dict(zip(texts, annotate(texts))) if texts else {}
    blank: Mapping[str, Any] = {"entities": {}}
    out = []
    for i, (g, r) in enumerate(zip(generated, references)):
        try:
            out.append(cxr_metric_radgraph(anns.get(str(g), blank), anns.get(str(r), blank))[2])
        except ValueError as exc:
            raise ValueError(f"{exc} (report pair {i})") from None
    return np.array(out, dtype=float)


def _check_path(option: str, value: Any, *, hub: bool) -> None:
    """A set path option must exist (or be a hub id / hf:// file where hubs are allowed)."""
    from medimg_bench.hub import looks_like_hub_id

    text = str(value)
    if Path(text).expanduser().exists() or (hub and (text.startswith("hf://") or looks_like_hub_id(text))):
        return
    raise FileNotFoundError(f"scoring=rexrank: `scoring.{option}` = {text!r} does not exist"
                            + (" and is not a hub id" if hub else ""))


class RexrankScorer:
    """CXR-Report-Metric's per-report scores with the models the options name (loaded once, on
    first use). Options are :data:`REXRANK_OPTIONS`; a path that does not exist is an error naming
    its option, here. ``absent``: column -> why it is not computed."""

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(REXRANK_OPTIONS))
        if unknown:
            raise ValueError(f"scoring=rexrank: unknown option(s) {unknown}; known: {sorted(REXRANK_OPTIONS)}")
        self.options = {**REXRANK_OPTIONS, **{k: v for k, v in options.items() if v is not None}}
        o = self.options
        for name, hub in (("bertscore_model", True), ("chexbert_checkpoint", True), ("chexbert_bert_path", True),
                          ("radgraph_model_cache_dir", False), ("radgraph_annotations", False)):
            if o[name] is not None:
                _check_path(name, o[name], hub=hub)
        if (o["chexbert_checkpoint"] is None) != (o["chexbert_bert_path"] is None):
            have, need = (("chexbert_checkpoint", "chexbert_bert_path") if o["chexbert_bert_path"] is None
                          else ("chexbert_bert_path", "chexbert_checkpoint"))
            raise ValueError(f"scoring=rexrank: `scoring.{have}` is set but `scoring.{need}` is not; "
                             "semb_score needs both (the CheXbert checkpoint and bert-base-uncased)")
        if o["bertscore_baseline"] is False or str(o["bertscore_baseline"]).lower() in ("false", "none"):
            o["bertscore_baseline"] = None
        self.absent = self._absent()
        self._chexbert: tuple[Any, Any] | None = None
        self._annotate: Callable[[list[str]], list[Mapping[str, Any]]] | None = None

    def _absent(self) -> dict[str, str]:
        o, out = self.options, {}
        if o["bertscore_model"] is None:
            out["bertscore"] = ("no model: set `scoring.bertscore_model` to distilroberta-base (a hub id or "
                                "a local folder), CXR-Report-Metric's BERTScore model")
        if o["chexbert_checkpoint"] is None:
            out["semb_score"] = ("no model: set `scoring.chexbert_checkpoint` (chexbert.pth) and "
                                 "`scoring.chexbert_bert_path` (bert-base-uncased)")
        if o["radgraph_model_cache_dir"] is None and o["radgraph_annotations"] is None:
            out["radgraph_combined"] = ("no model: set `scoring.radgraph_model_cache_dir` (the radgraph package's "
                                        "extracted model; needs `pip install radgraph`) or "
                                        "`scoring.radgraph_annotations` (a JSON of RadGraph annotations by text)")
        if out:
            why = "needs all four of " + ", ".join(RADCLIQ_INPUTS) + "; absent: " + ", ".join(out)
            out.update({"RadCliQ-v0": why, "RadCliQ-v1": why})
        return out

    @property
    def columns(self) -> list[str]:
        """The per-report columns this scorer writes."""
        return [c for c in REXRANK_COLUMNS if c not in self.absent]

    def _annotator(self) -> Callable[[list[str]], list[Mapping[str, Any]]]:
        if self._annotate is None:
            o = self.options
            if o["radgraph_annotations"] is not None:
                self._annotate = _annotations_from_file(Path(o["radgraph_annotations"]))
            else:
                from medimg_bench.metrics.text.radgraph import load_annotator

                self._annotate = load_annotator(o["radgraph_model"], model_cache_dir=o["radgraph_model_cache_dir"])
        return self._annotate

    def _semb(self, generated: list[str], references: list[str]) -> np.ndarray:
        from medimg_bench.metrics.text.chexbert import build, require

        o = self.options
        if self._chexbert is None:
            self._chexbert = build(require(o["chexbert_bert_path"], "scoring.chexbert_bert_path", "bert-base-uncased"),
                                    require(o["chexbert_checkpoint"], "scoring.chexbert_checkpoint", "chexbert.pth"),
                                    o["device"])
        tok, model = self._chexbert
        kw = {"device": o["device"], "batch_size": int(o["batch_size"])}
        return _cosine32(_chexbert_embeddings(references, tok, model, **kw),
                         _chexbert_embeddings(generated, tok, model, **kw))

    def score(self, generated: Sequence[str], references: Sequence[str]) -> dict[str, np.ndarray]:
        """Per-report values of :attr:`columns` for the pairs, float64 arrays (N,)."""
        generated, references = [str(g) for g in generated], [str(r) for r in references]
        _check_pairs(generated, references)
        o = self.options
        out = {"bleu_score": rexrank_bleu2(generated, references)}
        if "bertscore" not in self.absent:
            out["bertscore"] = rexrank_bertscore(
                generated, references, model_path=self._bertscore_path(), baseline=o["bertscore_baseline"],
                num_layers=o["bertscore_num_layers"], device=o["device"], batch_size=int(o["batch_size"]))
        if "semb_score" not in self.absent:
            out["semb_score"] = self._semb(generated, references)
        if "radgraph_combined" not in self.absent:
            out["radgraph_combined"] = radgraph_combined_scores(generated, references, annotate=self._annotator())
        if all(c in out for c in RADCLIQ_INPUTS):
            for version in RADCLIQ_MODELS:
                out[version] = radcliq(out, version=version)
        return {c: out[c] for c in REXRANK_COLUMNS if c in out}

    def files(self) -> dict[str, Path]:
        """``{option: local file or folder}`` that the model-based columns read (hub ids and
        ``hf://`` files resolved to the local snapshot; ``radgraph_model_cache_dir`` as its
        ``<dir>/<radgraph_model>`` folder, and only when no annotations file replaces it): what a
        run's key holds by content. An option that cannot be resolved is given as written (its
        digest is then ``missing``; the scorer names the problem when it runs)."""
        from medimg_bench.metrics.text.chexbert import require

        o = self.options
        resolve: dict[str, Callable[[], Path]] = {
            "bertscore_model": self._bertscore_path,
            "chexbert_checkpoint": lambda: require(o["chexbert_checkpoint"], "scoring.chexbert_checkpoint", "chexbert.pth"),
            "chexbert_bert_path": lambda: require(o["chexbert_bert_path"], "scoring.chexbert_bert_path", "bert-base-uncased"),
            "radgraph_model_cache_dir": lambda: Path(o["radgraph_model_cache_dir"]).expanduser() / str(o["radgraph_model"]),
            "radgraph_annotations": lambda: Path(o["radgraph_annotations"]).expanduser(),
        }
        if o["radgraph_annotations"] is not None:
            resolve.pop("radgraph_model_cache_dir")  # the annotations are read instead of the model
        out: dict[str, Path] = {}
        for name, fn in resolve.items():
            if o[name] is None:
                continue
            try:
                out[name] = fn()
            except (OSError, ValueError) as exc:
                log.warning("scoring.%s = %r cannot be resolved for the run's key (%s)", name, o[name], exc)
                out[name] = Path(str(o[name])).expanduser()
        return out

    def _bertscore_path(self) -> Path:
        from medimg_bench.hub import looks_like_hub_id, resolve_transformers_snapshot

        model = str(self.options["bertscore_model"])
        path = Path(model).expanduser()
        if not path.exists() and looks_like_hub_id(model):
            path = resolve_transformers_snapshot(model, what="`scoring.bertscore_model`").path
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"scoring=rexrank: `scoring.bertscore_model` = {model!r} holds no "
                                    "transformers model (config.json is missing)")
        return path


def _annotations_from_file(path: Path) -> Callable[[list[str]], list[Mapping[str, Any]]]:
    """An annotator reading ``{report text: RadGraph annotation}`` from a JSON file."""
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"scoring=rexrank: `scoring.radgraph_annotations` {str(path)!r} is not readable JSON: {exc}") from exc
    if not isinstance(table, dict):
        raise ValueError(f"scoring=rexrank: `scoring.radgraph_annotations` {str(path)!r} must map report text "
                         "to a RadGraph annotation")

    def annotate(texts: list[str]) -> list[Mapping[str, Any]]:
        missing = [t for t in texts if t not in table]
        if missing:
            raise ValueError(f"scoring=rexrank: {len(missing)} report(s) have no annotation in "
                             f"`scoring.radgraph_annotations` {str(path)!r}, e.g. {missing[0][:80]!r}")
        return [table[t] for t in texts]

    return annotate


def rexrank_scores(
    generated: Sequence[str], references: Sequence[str], **options: Any
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per-report CXR-Report-Metric scores and ``{column: why absent}`` for the models
    ``options`` (:data:`REXRANK_OPTIONS`) name."""
    scorer = RexrankScorer(**options)
    return scorer.score(generated, references), dict(scorer.absent)
