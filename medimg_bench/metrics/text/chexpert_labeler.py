"""An offline CheXpert-style report labeler, written for this project from the published
description of the CheXpert labeler (Irvin et al., AAAI 2019): mention extraction from phrase
lists per observation, negation and uncertainty detection in the mention's scope, aggregation.

Per observation the label is 1.0 (positive), 0.0 (negative), -1.0 (uncertain) or NaN (not
mentioned). Rules (see docs/reports.md):

* text is lower-cased and split into sentences (on ``. ! ? ;`` and new lines, not inside
  numbers such as "4.5"), sentences into clauses at scope terminators ("but", "however", …);
* a mention is uncertain when an uncertainty cue precedes it in its clause (nearest cue wins) or
  a post-uncertainty cue follows it ("cannot be excluded"); negative when a negation cue precedes
  it in its clause (which covers lists: "no effusion, pneumothorax or consolidation") or a
  post-negation cue follows it ("has resolved"); pseudo-negations ("no change in") negate nothing;
  some phrases are negative or uncertain by themselves ("normal heart size");
* a structured field after a mention decides its status: "Effusion: none / negative /
  resolved", "Effusion (-)", "Pneumothorax -ve" → negative, "Pneumothorax: possible / ?" →
  uncertain, "Effusion: small", "(+)" → positive; a field whose value mentions the observation
  again is a heading, an empty field is no mention;
* aggregation per observation: any positive → 1; else any uncertain → -1; else negative → 0;
* "No Finding" is 1 when the text mentions no pathology as positive or uncertain (Support
  Devices does not count), else NaN; an empty text is NaN everywhere;
* a report that is not English (``language.detect_non_english``) is NaN everywhere, with a
  warning (or an error, or labelled anyway: ``on_unsupported``).

The phrase and cue lists live in ``phrases/chexpert.yaml``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from medimg_bench.findings import CHEXPERT_PATHOLOGIES
from medimg_bench.metrics.text.language import detect_non_english

__all__ = ["CHEXPERT_OBSERVATIONS", "CHEXPERT_COMPETITION", "label_reports", "label_report", "Mention"]

# one list for the loaders and the labeler: the 14 observations in CheXpert's CSV column order
CHEXPERT_OBSERVATIONS = CHEXPERT_PATHOLOGIES
#: the five observations of the CheXpert competition
CHEXPERT_COMPETITION = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion")

_PHRASES = Path(__file__).with_name("phrases") / "chexpert.yaml"
# "?" stays with its sentence (split after it): "Pneumothorax?" is a question, so uncertain
_SENTENCE = re.compile(r"(?<!\d)[.!](?!\d)|(?<=\?)|[\n;]")
_ON_UNSUPPORTED = ("nan", "raise", "label")


@dataclass(frozen=True)
class Mention:
    """One mention: observation, character span in its sentence, status (1, 0 or -1)."""

    observation: str
    start: int
    end: int
    status: float
    text: str


def _alternation(patterns: Sequence[str]) -> str:
    # longest first, so "pleural thickening" wins over a shorter overlapping phrase
    return "|".join(sorted((f"(?:{p})" for p in patterns), key=len, reverse=True))


@lru_cache(maxsize=4)
def _compiled(path: str = str(_PHRASES)) -> dict[str, Any]:
    import yaml

    spec = yaml.safe_load(Path(path).read_text())
    groups: list[tuple[str, float | None]] = []  # group name -> (observation, fixed status)
    parts = []
    for section, status in (("negative_mentions", 0.0), ("uncertain_mentions", -1.0), ("mentions", None)):
        for obs, patterns in (spec.get(section) or {}).items():
            if obs not in CHEXPERT_OBSERVATIONS:
                raise ValueError(f"{path}: unknown observation {obs!r} in {section}")
            for pat in patterns:
                name = f"g{len(groups)}"
                groups.append((obs, status))
                parts.append((len(pat), f"(?P<{name}>{pat})"))
    # longest pattern text first: the regex engine takes the first alternative that matches
    parts.sort(key=lambda t: t[0], reverse=True)
    mention_re = re.compile(r"\b(?:" + "|".join(p for _, p in parts) + r")\b")
    cues = spec["cues"]

    def cue(name: str) -> re.Pattern:
        return re.compile(r"(?<![\w-])(?:" + _alternation(cues[name]) + r")(?![\w-])")

    return {
        "structured": _compile_structured(spec["structured"]),
        "mention": mention_re,
        "groups": {f"g{i}": g for i, g in enumerate(groups)},
        "neg_pre": cue("negation_pre"),
        "neg_post": cue("negation_post"),
        "unc_pre": cue("uncertainty_pre"),
        "unc_post": cue("uncertainty_post"),
        "pseudo": cue("pseudo_negation"),
        "term": re.compile(r"(?<![\w-])(?:" + _alternation(cues["terminators"]) + r")(?![\w-])|[;:]"),
    }


def _compile_structured(spec: dict[str, list[str]]) -> dict[str, re.Pattern]:
    def alt(name: str) -> str:
        return _alternation(spec[name])

    end = r"(?![\w])"
    lat = rf"(?:{alt('laterality')}){end}"
    return {
        # between the mention and its separator or sign: "Pleural effusion, left: none"
        "gap": re.compile(rf"(?:\s*/\s*[\w-]+)?\s*(?:,\s*)?(?:{lat}\s*)?"),  # "Lines/tubes: none"
        "sign": re.compile(rf"\s*(?:(?P<neg>{alt('negative_signs')})|(?P<pos>{alt('positive_signs')})"
                           rf"|(?P<unc>{alt('uncertain_signs')}))"),
        "separator": re.compile(rf"\s*(?:{alt('separators')})\s*"),
        "lat": re.compile(rf"\s*(?:{lat}\s*)*"),
        "negative": re.compile(rf"(?:{alt('negative_values')}){end}"),
        "device_ok": re.compile(rf"(?:{alt('not_negative_for_support_devices')}){end}"),
        "uncertain": re.compile(rf"(?:{alt('uncertain_values')})(?![\w-])"),
        "size": re.compile(rf"(?:{alt('size_words')}){end}"),
        "segment": re.compile(r"\s*(?:[,)]|\b(?:and|but)\b)\s*"),
    }


def _value_status(value: str, obs: str, c: dict[str, Any]) -> float | None:
    """Status a structured value gives its mention; None: the value does not decide (the usual
    rules apply: "small", "present", "no change")."""
    s = c["structured"]
    value = value[s["lat"].match(value).end():]
    sign = s["sign"].match(value)
    if sign:
        return {"neg": 0.0, "pos": 1.0, "unc": -1.0}[sign.lastgroup]
    if c["pseudo"].match(value):
        return None
    if s["uncertain"].match(value) or c["unc_post"].match(value):
        return -1.0
    if s["negative"].match(value):
        if obs == "Support Devices" and s["device_ok"].match(value):
            return None
        return 0.0
    return None


def _field_status(sentence: str, end: int, nxt: tuple[int, str] | None, obs: str,
                  c: dict[str, Any]) -> float | None:
    """Status from a structured field right after a mention ending at ``end`` ("Effusion: none",
    "Effusion (-)"): 1, 0, -1; NaN when the mention is only a heading or an empty field; None when
    there is no field. ``nxt`` is (start, observation) of the next mention in the sentence."""
    s = c["structured"]
    stop = nxt[0] if nxt else len(sentence)
    pos = s["gap"].match(sentence, end, stop).end()
    sign = s["sign"].match(sentence, pos)  # not cut at ``stop``: "$" must be the sentence end
    if sign and sign.end() <= stop:
        return {"neg": 0.0, "pos": 1.0, "unc": -1.0}[sign.lastgroup]
    sep = s["separator"].match(sentence, pos, stop)
    if sep is None:
        return None
    if nxt and nxt[1] == obs:  # "Effusion: small left pleural effusion": a heading
        return float("nan")
    value = sentence[sep.end():stop]
    if not value.strip():
        # "Pneumothorax:" with nothing after it says nothing; before another mention it is that
        # mention's heading ("Lungs - atelectasis")
        return None if nxt else float("nan")
    segments = s["segment"].split(value)
    first = segments[0]
    if nxt and len(segments) == 1 and (c["neg_pre"].match(first) or c["unc_pre"].match(first)):
        return None  # "Atelectasis: no consolidation": the cue belongs to the next mention
    status = _value_status(first, obs, c)
    if status is not None and status != 1.0:
        if any(s["size"].match(seg, s["lat"].match(seg).end()) for seg in segments[1:]):
            return 1.0  # "none on the left, small on the right"
    return status


def _spans(regex: re.Pattern, text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in regex.finditer(text)]


def _overlaps(span: tuple[int, int], others: list[tuple[int, int]]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in others)


def _sentence_mentions(sentence: str, c: dict[str, Any]) -> list[Mention]:
    found = []
    for m in c["mention"].finditer(sentence):
        name = m.lastgroup
        obs, fixed = c["groups"][name]
        found.append((obs, fixed, m.start(), m.end(), m.group(0)))
    if not found:
        return []
    mention_spans = [(s, e) for _, _, s, e, _ in found]
    pseudo = _spans(c["pseudo"], sentence)
    unc_pre = [s for s in _spans(c["unc_pre"], sentence) if not _overlaps(s, mention_spans)]
    unc_post = [s for s in _spans(c["unc_post"], sentence) if not _overlaps(s, mention_spans)]
    unc_all = unc_pre + unc_post
    neg_pre = [s for s in _spans(c["neg_pre"], sentence)
               if not _overlaps(s, pseudo) and not _overlaps(s, unc_all) and not _overlaps(s, mention_spans)]
    neg_post = [s for s in _spans(c["neg_post"], sentence)
                if not _overlaps(s, pseudo) and not _overlaps(s, unc_all) and not _overlaps(s, mention_spans)]
    terms = [s for s in _spans(c["term"], sentence) if not _overlaps(s, mention_spans)]

    out = []
    for i, (obs, fixed, start, end, text) in enumerate(found):
        nxt = (found[i + 1][2], found[i + 1][0]) if i + 1 < len(found) else None
        field = _field_status(sentence, end, nxt, obs, c) if fixed is None else None
        if field is not None and np.isnan(field):
            continue  # a heading or an empty field: not a mention
        lo = max([e for s, e in terms if e <= start], default=0)  # clause start
        hi = min([s for s, e in terms if s >= end], default=len(sentence))  # clause end
        before = [(s, "unc") for s, e in unc_pre if lo <= s and e <= start]
        before += [(s, "neg") for s, e in neg_pre if lo <= s and e <= start]
        after_unc = any(end <= s and e <= hi for s, e in unc_post)
        after_neg = any(end <= s and e <= hi for s, e in neg_post)
        nearest = max(before)[1] if before else None
        if field is not None:
            status = field
        elif fixed is not None and fixed < 0:
            status = -1.0
        elif after_unc or nearest == "unc":
            status = -1.0
        elif fixed == 0.0 or nearest == "neg" or after_neg:
            status = 0.0
        else:
            status = 1.0
        out.append(Mention(obs, start, end, status, text))
    return out


def _labels(text: str) -> dict[str, float]:
    labels = dict.fromkeys(CHEXPERT_OBSERVATIONS, float("nan"))
    if not text.strip():
        return labels
    c = _compiled()
    statuses: dict[str, list[float]] = {}
    for sentence in _SENTENCE.split(" ".join(text.lower().split())):
        for m in _sentence_mentions(sentence, c):
            statuses.setdefault(m.observation, []).append(m.status)
    for obs, values in statuses.items():
        labels[obs] = 1.0 if 1.0 in values else (-1.0 if -1.0 in values else 0.0)
    pathologies = [o for o in CHEXPERT_OBSERVATIONS if o not in ("No Finding", "Support Devices")]
    if not any(labels[o] in (1.0, -1.0) for o in pathologies):
        labels["No Finding"] = 1.0
    return labels


def _check_option(on_unsupported: str) -> None:
    if on_unsupported not in _ON_UNSUPPORTED:
        raise ValueError(f"on_unsupported must be one of {_ON_UNSUPPORTED}, got {on_unsupported!r}")


def label_report(text: str, *, on_unsupported: str = "nan") -> dict[str, float]:
    """Labels of one report: observation → 1.0 / 0.0 / -1.0, or NaN when not mentioned.

    The phrase lists are English: a report that is not (:func:`detect_non_english`) gets NaN
    everywhere and a warning (``on_unsupported="nan"``), a ValueError (``"raise"``), or is
    labelled anyway (``"label"``)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a report string, got {type(text).__name__}")
    row = label_reports([text], on_unsupported=on_unsupported).iloc[0]
    return {obs: float(v) for obs, v in row.items()}


def label_reports(texts: Sequence[str], *, on_unsupported: str = "nan") -> Any:
    """One row per text, the 14 CheXpert observations as columns, values 1.0 / 0.0 / -1.0 /
    NaN (not mentioned); returns a ``pandas.DataFrame``. Non-text input raises TypeError naming
    the row.

    Reports that are not English get NaN everywhere and one warning naming how many and which
    (``on_unsupported="nan"``; ``df.attrs["non_english"]`` maps their row to the language), a
    ValueError naming them (``"raise"``), or are labelled anyway (``"label"``)."""
    import pandas as pd

    _check_option(on_unsupported)
    rows, refused = [], {}
    for i, t in enumerate(texts):
        if isinstance(t, bytes):
            try:
                t = t.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"report {i}: not valid UTF-8 ({exc})") from exc
        if not isinstance(t, str):
            raise TypeError(f"report {i}: expected a string, got {type(t).__name__}")
        language = None if on_unsupported == "label" else detect_non_english(t)
        if language is not None:
            refused[i] = language
            rows.append(dict.fromkeys(CHEXPERT_OBSERVATIONS, float("nan")))
        else:
            rows.append(_labels(t))
    if refused:
        listed = ", ".join(f"report {i}: {lang}" for i, lang in list(refused.items())[:10])
        more = f" and {len(refused) - 10} more" if len(refused) > 10 else ""
        msg = (f"{len(refused)} of {len(rows)} reports are not in English ({listed}{more}); "
               "the CheXpert-style labeler reads English only")
        if on_unsupported == "raise":
            raise ValueError(msg)
        warnings.warn(msg + ": their labels are NaN", UserWarning, stacklevel=2)
    df = pd.DataFrame(rows, columns=list(CHEXPERT_OBSERVATIONS), dtype=np.float64)
    df.attrs["non_english"] = refused
    return df
